"""A toy data directory and models that share its vocabulary: for distillation and shortlist tests."""

from __future__ import annotations

from pathlib import Path

from mtkit import checkpoint
from tests.support.corpora import build_data_dir, short_pairs
from tests.support.models import random_model, train_toy
from tests.support.spm import BYTE_PIECES


def toy_task(root: Path) -> tuple[Path, Path, Path]:
    """(data directory, a model trained briefly on the toy task, a random model): one vocabulary, 23 training pairs."""
    pairs = short_pairs(120, seed=7)
    splits = {
        "train": ([s for s, _ in pairs[:23]], [t for _, t in pairs[:23]]),
        "valid": ([s for s, _ in pairs[23:30]], [t for _, t in pairs[23:30]]),
    }
    data = build_data_dir(root / "data", splits, vocab_size=120 + BYTE_PIECES)
    vocab = (data / "spm.model").read_bytes()
    model = train_toy(vocab, pairs, steps=60)
    trained = root / "teacher.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab, step=60), trained)
    other = root / "other.pt"
    rnd = random_model(model.cfg.vocab_size, seed=4)
    checkpoint.atomic_save(checkpoint.model_payload(rnd, rnd.cfg, vocab, step=1), other)
    return data, trained, other
