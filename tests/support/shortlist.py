"""A model file carrying a shortlist of one target piece: a search that honours the shortlist can emit only that
piece (or UNK, one of the four special ids every shortlist keeps), so a test can tell it from one that ignores it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from mtkit import checkpoint
from mtkit.decode.loading import prepare
from mtkit.decode.shortlist import SPECIAL


def one_piece_shortlist(model: Path, out: Path) -> tuple[Path, str]:
    """`model` written to `out` with a shortlist of one piece (no candidates, one frequent piece: the first whose
    text is a word), used by default as `mtkit shortlist` sets it; and that piece's text."""
    ckpt = checkpoint.load(model)
    config, vocab = checkpoint.config_of(ckpt), prepare(model, "cpu").vocab
    piece = next(p for p in range(SPECIAL, config.target_vocab_size) if len(vocab.decode([p]).strip()) > 1)
    record = {
        "candidates": torch.full((config.vocab_size, 1), -1, dtype=torch.long),
        "frequent": torch.tensor([piece]),
        "learned_from": {"spm_sha256": hashlib.sha256(ckpt["vocab"]).hexdigest()},
    }
    defaults = {**ckpt.get("decode_defaults", {}), "shortlist": True}
    checkpoint.atomic_save({**ckpt, "shortlist": record, "decode_defaults": defaults}, out)
    return out, vocab.decode([piece]).strip()
