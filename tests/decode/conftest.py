"""Checkpoints for decoding tests, made here because training is not needed to test decoding.

A tiny SentencePiece BPE model is trained on a few hundred Multi30k lines (the shipped sample), and randomly
initialised (seeded) tiny Transformers are saved the way training saves them: kind
"checkpoint" with training state beside the weights, as RUN/checkpoint_<step>.pt plus the
checkpoint_last.pt / checkpoint_best.pt copies.
"""

from __future__ import annotations

import gzip
import io
import itertools
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from mtkit import checkpoint
from mtkit.model import Transformer, build_model


def train_spm(lines: list[str], vocab_size: int = 300) -> bytes:
    """Joint BPE with mtkit's fixed ids (pad 0, unk 1, bos 2, eos 3), trained in memory."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()


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


@pytest.fixture
def make_model():
    """`make_model(vocab_size, seed, **overrides)`: a seeded random tiny Transformer."""
    return random_model


@pytest.fixture(scope="session")
def multi30k_lines(multi30k) -> dict[str, list[str]]:
    """The first lines of Multi30k train and test, both languages."""
    out = {}
    for name in ("train.en", "train.de", "test_2016_flickr.en", "test_2016_flickr.de"):
        with gzip.open(multi30k / f"{name}.gz", "rt", encoding="utf-8") as f:
            out[name] = [line.rstrip("\n") for line in itertools.islice(f, 400)]
    return out


@pytest.fixture(scope="session")
def spm_bytes(multi30k_lines) -> bytes:
    return train_spm(multi30k_lines["train.en"] + multi30k_lines["train.de"])


@pytest.fixture(scope="session")
def model_file(tmp_path_factory, spm_bytes) -> Path:
    """A kind "checkpoint" file of a random tiny model with 32 positions (so long lines are easy to make)."""
    run = tmp_path_factory.mktemp("run")
    model = random_model(len(spm.SentencePieceProcessor(model_proto=spm_bytes)), seed=1, max_positions=32)
    return save_run(run, spm_bytes, {100: model})[-1]
