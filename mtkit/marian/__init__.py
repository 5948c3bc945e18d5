"""Marian, as Hugging Face Transformers holds it (`MarianMTModel`), in and out of mtkit: one package.

- `weights`: mtkit's weights as a Marian model's and back (names, fused projections, one permutation of the
  model dimension); a Marian directory mtkit wrote, read back exactly.
- `opus`: a public OPUS-MT directory (Marian's own vocabulary ids) as an mtkit model, and back.
- `sizes`: a config.json's size fields checked against the weights; safetensors read a tensor at a time.
- (an OPUS-MT tokenizer, `MarianVocab`, is a peer of mtkit's own in mtkit/data/marian_vocab.py: decoding and
  training use tokenizers without importing this package.)
- `export`, `export_opus`, `card`: `mtkit export --format huggingface` (mtkit/export/ registers it as a format).

mtkit/sources/ registers a Marian directory as a model source (`MarianDirectory`, over `weights.is_hf_dir` and
`opus.load_hf_dir`), so every command that takes a model reads one; mtkit/export/ registers the format. Nothing
else imports this package.
"""
