"""Data: named corpora, downloads, cleaning, SentencePiece vocabulary, binarized arrays, batching."""
