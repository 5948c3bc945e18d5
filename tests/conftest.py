"""Shared test helpers: drive the real CLI in a subprocess, find the shared Multi30k data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k-en-de"

# Tests are small; two intra-op threads match the CI machine and keep timings stable.
torch.set_num_threads(min(2, os.cpu_count() or 1))


def run_cli(*args: str, input: str | bytes | None = None, cwd: Path | None = None,
            env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python -m mtkit ARGS` from this checkout (not whatever `mtkit` is on PATH)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    text = not isinstance(input, bytes)
    return subprocess.run([sys.executable, "-m", "mtkit", *map(str, args)], input=input, capture_output=True,
                          text=text, cwd=cwd, env=full_env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def multi30k() -> Path:
    if not MULTI30K.is_dir():
        pytest.fail(f"the shared Multi30k data is expected at {MULTI30K} (CI clones next to ../shared)")
    return MULTI30K


@pytest.fixture(scope="session")
def cli_model(tmp_path_factory) -> Path:
    """A randomly initialised tiny model with a BPE vocabulary of synthetic text: for tests of the CLI's plumbing."""
    import sentencepiece as spm

    from tests.decode.conftest import random_model, save_run, train_spm
    from tests.train.conftest import synthetic_pairs

    src, tgt = synthetic_pairs(300, seed=5)
    vocab = train_spm(src + tgt, vocab_size=120)
    run = tmp_path_factory.mktemp("cli-model")
    model = random_model(len(spm.SentencePieceProcessor(model_proto=vocab)), seed=3)
    return save_run(run, vocab, {10: model})[-1]
