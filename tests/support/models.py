"""Models for tests that need no real training: seeded random tiny Transformers saved as training saves them,
source batches as the translator feeds them, and a tiny model trained for real (seconds) on the toy task.

A random model's outputs are noise that runs to the length limit, and its near-ties make two engines'
choices differ for reasons that say nothing about what is tested; the trained toy model's outputs end
and its choices are clear.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import sentencepiece as spm
import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, PAD
from mtkit.model import Transformer, build_model
from mtkit.train.loss import label_smoothed_sums

OPAQUE_VOCAB = b"opaque SentencePiece bytes: averaging only carries them over"
# 200 updates: its 256 byte pieces (never in the toy text) make the output layer larger than the task, and
# at 120 the choices of the 64-wide model were less clear (fewer int8 outputs agreed with fp32's).
TOY_STEPS = 200


def random_model(vocab_size: int, seed: int, **overrides) -> Transformer:
    """A seeded, randomly initialised `tiny` Transformer in eval mode."""
    torch.manual_seed(seed)
    return build_model("tiny", vocab_size, **overrides).eval()


def save_run(run: Path, vocab: bytes, models: dict[int, Transformer]) -> list[Path]:
    """Save {step: model} as training does; returns the numbered files, oldest first."""
    paths = []
    for step, model in sorted(models.items()):
        path = run / f"checkpoint_{step}.pt"
        optimizer = {"state": {0: {"exp_avg": torch.ones(3)}}, "param_groups": [{"lr": 1e-3}]}
        checkpoint.atomic_save(
            checkpoint.model_payload(
                model, model.cfg, vocab, step=step, kind="checkpoint", optimizer=optimizer, scheduler={"step": step}
            ),
            path,
        )
        paths.append(path)
    shutil.copyfile(paths[-1], run / "checkpoint_last.pt")
    shutil.copyfile(paths[0], run / "checkpoint_best.pt")
    return paths


def save_checkpoints(run: Path, steps: list[int], **overrides) -> list[Path]:
    """Seeded random tiny models (vocabulary 40, OPAQUE_VOCAB as their SentencePiece bytes) saved as training
    saves them (kind "checkpoint", optimizer state included): for averaging, which reads no vocabulary."""
    paths = []
    for step in steps:
        torch.manual_seed(step)
        model = build_model("tiny", 40, **overrides)
        path = run / f"checkpoint_{step}.pt"
        checkpoint.atomic_save(
            checkpoint.model_payload(
                model,
                model.cfg,
                OPAQUE_VOCAB,
                step=step,
                kind="checkpoint",
                optimizer={"state": {}, "param_groups": []},
            ),
            path,
        )
        paths.append(path)
    shutil.copyfile(paths[-1], run / "checkpoint_last.pt")
    shutil.copyfile(paths[0], run / "checkpoint_best.pt")
    return paths


def sources(n: int, vocab_size: int, seed: int, max_len: int = 9) -> list[list[int]]:
    """n seeded random sentences of 1..max_len real token ids (no special ids)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (n,), generator=g).tolist()
    return [torch.randint(4, vocab_size, (length,), generator=g).tolist() for length in lengths]


def batch(ids: list[list[int]]) -> torch.Tensor:
    """ids + [EOS], right-padded with PAD: what the translator feeds the search."""
    src = torch.full((len(ids), max(map(len, ids)) + 1), PAD, dtype=torch.long)
    for row, sentence in enumerate(ids):
        src[row, : len(sentence) + 1] = torch.tensor([*sentence, EOS])
    return src


def _toy_batch(sp: spm.SentencePieceProcessor, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, ...]:
    """(src, tgt_in, tgt_out), right-padded: src = ids + [EOS], tgt_in = [BOS] + ids, tgt_out = ids + [EOS]."""
    src_ids = [sp.encode(s) + [EOS] for s, _ in pairs]
    tgt_ids = [sp.encode(t) for _, t in pairs]
    S, T = max(map(len, src_ids)), max(map(len, tgt_ids)) + 1
    src = torch.tensor([s + [PAD] * (S - len(s)) for s in src_ids])
    tgt_in = torch.tensor([[BOS] + t + [PAD] * (T - len(t) - 1) for t in tgt_ids])
    tgt_out = torch.tensor([t + [EOS] + [PAD] * (T - len(t) - 1) for t in tgt_ids])
    return src, tgt_in, tgt_out


def train_toy(vocab: bytes, pairs: list[tuple[str, str]], steps: int = TOY_STEPS, seed: int = 0) -> Transformer:
    """Adam on batches of 16 pairs: in TOY_STEPS steps the outputs of short toy pairs end, their choices clear."""
    sp = spm.SentencePieceProcessor(model_proto=vocab)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = build_model("tiny", sp.get_piece_size(), dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9, fused=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # about 20 ms of CPU a step either way; one thread does not stall on a busy machine
    try:
        for _ in range(steps):
            src, tgt_in, tgt_out = _toy_batch(sp, rng.sample(pairs, 16))
            loss, _ = label_smoothed_sums(model(src, tgt_in), tgt_out, smoothing=0.1)
            optimizer.zero_grad()
            (loss / int(tgt_out.ne(PAD).sum())).backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()
