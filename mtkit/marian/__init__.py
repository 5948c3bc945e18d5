"""Marian, as Hugging Face Transformers holds it (`MarianMTModel`), in and out of mtkit: one package.

- `weights`: mtkit's weights as a Marian model's and back (names, fused projections, one permutation of the
  model dimension); a Marian directory mtkit wrote, read back exactly.
- `opus`: a public OPUS-MT directory (Marian's own vocabulary ids) as an mtkit model, and back.
- `sizes`: a config.json's size fields checked against the weights; safetensors read a tensor at a time.
- `vocab`: an OPUS-MT tokenizer (two SentencePiece models over Marian's ids), a `Tokenizer`
  (mtkit/data/tokenizer.py) beside mtkit's own SentencePiece `Vocab`; `load_tokenizer` tells the two apart.
- `export`, `export_opus`, `card`: `mtkit export --format huggingface` (mtkit/export/ registers it as a format).

mtkit/sources/ registers a Marian directory as a model source (`MarianDirectory`, over `weights.is_hf_dir` and
`opus.load_hf_dir`), so every command that takes a model reads one.
"""
