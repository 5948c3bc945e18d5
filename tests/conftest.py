"""Shared test helpers: drive the real CLI (in this process or a subprocess); Multi30k as a sample or the full corpus.

Every test runs from the repository alone with `multi30k` (a few hundred lines shipped in
tests/data/sample/). Tests marked `integration` take `multi30k_full`, the whole corpus from
`$MTKIT_MULTI30K` or ../shared/data/multi30k-en-de, and are skipped with the reason when neither exists.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.inprocess import in_process

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "sample"
SHARED_MULTI30K = ROOT.parent / "shared" / "data" / "multi30k-en-de"

# Tests are small; two intra-op threads match the CI machine and keep timings stable.
torch.set_num_threads(min(2, os.cpu_count() or 1))
# `--precision auto` (the default) picks bf16 on CPUs with native bf16; tests pin it to fp32 so that
# they compute the same numbers on every machine (subprocesses inherit it). tests/train/test_precision.py
# lifts the pin to test the rule itself.
os.environ.setdefault("MTKIT_AUTO_PRECISION", "fp32")
# The fp32 CPU backend is chosen by measurement (mtkit/runtime/matmul.py) when a trainer or a loaded translator
# decides; the tests pin oneDNN, the path this project's CPUs take, so that no choice flips between runs (it falls
# back to the default where oneDNN's op is missing). tests/runtime/ holds the two backends equal and tests the rule.
os.environ.setdefault("MTKIT_CPU_MATMUL", "onednn")


def run_cli(
    *args: str,
    input: str | bytes | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    process: bool = False,
) -> subprocess.CompletedProcess:
    """Run `mtkit ARGS` from this checkout (not whatever `mtkit` is on PATH) and capture what it says.

    By default the command runs inside this test process (`in_process`): starting a Python with torch
    costs seconds a call, which was most of the suite's time. `process=True` runs `python -m mtkit` in a
    subprocess, for what only a process shows: /dev/stdin (a process's descriptor 0), a fresh import
    (a package hidden by PYTHONPATH), a server that might never return. Tests of signals, kills and pipes
    start their own processes. `timeout` bounds only a subprocess: an in-process call cannot be cut off.
    """
    if process:
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "mtkit", *map(str, args)],
            input=input,
            capture_output=True,
            text=not isinstance(input, bytes),
            cwd=cwd,
            env=full_env,
            timeout=timeout,
        )
    return in_process(*map(str, args), input=input, cwd=cwd, env=env)


@pytest.fixture
def cli():
    return run_cli


def full_multi30k() -> Path | None:
    """The full corpus's directory (the original .gz files), or None when this machine has none."""
    env = os.environ.get("MTKIT_MULTI30K")
    path = Path(env) if env else SHARED_MULTI30K
    return path if (path / "train.en.gz").is_file() else None


@pytest.fixture(scope="session")
def multi30k(tmp_path_factory) -> Path:
    """The sample in the corpus's own layout (train/val/test_2016_flickr .en/.de.gz), a few hundred lines each."""
    out = tmp_path_factory.mktemp("multi30k-sample")
    for path in SAMPLE.glob("*.??"):
        (out / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))
    return out


@pytest.fixture(scope="session")
def multi30k_full() -> Path:
    """The whole Multi30k corpus, for tests marked `integration`."""
    path = full_multi30k()
    if path is None:
        pytest.skip(f"the full Multi30k corpus is not here: set MTKIT_MULTI30K=DIR or put it at {SHARED_MULTI30K}")
    return path


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
