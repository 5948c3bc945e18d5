"""A tiny model trained for real (seconds) on a toy task, so that its outputs end and its choices are clear.

A random model's outputs are noise that runs to the length limit, and its near-ties make two
engines' choices differ for reasons that say nothing about the export; a trained one does not.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, PAD
from mtkit.model import Transformer, build_model
from mtkit.train.loss import label_smoothed_loss
from tests.decode.conftest import train_spm
from tests.train.conftest import synthetic_pairs

STEPS = 120


def _batch(sp: spm.SentencePieceProcessor, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, ...]:
    """(src, tgt_in, tgt_out), right-padded: src = ids + [EOS], tgt_in = [BOS] + ids, tgt_out = ids + [EOS]."""
    src_ids = [sp.encode(s) + [EOS] for s, _ in pairs]
    tgt_ids = [sp.encode(t) for _, t in pairs]
    S, T = max(map(len, src_ids)), max(map(len, tgt_ids)) + 1
    src = torch.tensor([s + [PAD] * (S - len(s)) for s in src_ids])
    tgt_in = torch.tensor([[BOS] + t + [PAD] * (T - len(t) - 1) for t in tgt_ids])
    tgt_out = torch.tensor([t + [EOS] + [PAD] * (T - len(t) - 1) for t in tgt_ids])
    return src, tgt_in, tgt_out


def train_tiny(vocab: bytes, pairs: list[tuple[str, str]], steps: int = STEPS, seed: int = 0) -> Transformer:
    """Adam on batches of 16 pairs: in 120 steps the outputs of short toy pairs end and their choices are clear."""
    sp = spm.SentencePieceProcessor(model_proto=vocab)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = build_model("tiny", sp.get_piece_size(), dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9, fused=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # about 20 ms of CPU a step either way; one thread does not stall on a busy machine
    try:
        for _ in range(steps):
            src, tgt_in, tgt_out = _batch(sp, rng.sample(pairs, 16))
            sums = label_smoothed_loss(model(src, tgt_in), tgt_out, smoothing=0.1)
            optimizer.zero_grad()
            (sums.loss / sums.tokens).backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def short_pairs(n: int, seed: int, max_words: int = 6) -> list[tuple[str, str]]:
    """The toy pairs of at most `max_words` words: shorter batches, the same task."""
    return [(s, t) for s, t in zip(*synthetic_pairs(n, seed)) if len(s.split()) <= max_words]


@pytest.fixture(scope="session")
def toy_sentences() -> list[str]:
    """Held-out sources of the toy task (another seed than the training pairs)."""
    return [s for s, _ in short_pairs(60, seed=11)]


@pytest.fixture(scope="session")
def trained_model(tmp_path_factory) -> Path:
    """A kind "model" file of a tiny Transformer trained on the toy reverse task, with its vocabulary."""
    pairs = short_pairs(600, seed=7)
    vocab = train_spm([s for s, _ in pairs] + [t for _, t in pairs], vocab_size=120)
    model = train_tiny(vocab, pairs)
    path = tmp_path_factory.mktemp("trained") / "model.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab, step=STEPS), path)
    return path
