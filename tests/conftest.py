"""Fixtures every folder shares; the code that builds them lives in tests/support/.

Every test runs from the repository alone with `multi30k` (a few hundred lines shipped in
tests/data/sample/). Tests marked `integration` take `multi30k_full`, the whole corpus: the copy that ships in
mtkit/data/multi30k (or `$MTKIT_MULTI30K`), skipped with the reason only where neither holds it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from mtkit import checkpoint
from mtkit.data.corpora import SHIPPED_MULTI30K
from tests.support.cli import run_cli
from tests.support.corpora import build_data_dir, full_multi30k, sample_multi30k, short_pairs, synthetic_pairs
from tests.support.models import TOY_STEPS, random_model, save_run, train_toy
from tests.support.spm import BYTE_PIECES, pieces, train_spm
from tests.support.training import STARTED

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


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    """Each test its own cache directory: a measurement one test keeps (mtkit/runtime/kept.py) is never read by
    another, nor by the user's own runs."""
    monkeypatch.setenv("MTKIT_CACHE", str(tmp_path_factory.mktemp("mtkit-cache")))


@pytest.fixture(autouse=True)
def _no_training_left_running():
    """A training a test started and left running (the test failed first) is killed when the test ends."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.fixture(scope="session")
def multi30k(tmp_path_factory) -> Path:
    """The sample in the corpus's own layout (train/val/test_2016_flickr .en/.de.gz), a few hundred lines each."""
    return sample_multi30k(tmp_path_factory.mktemp("multi30k-sample"))


@pytest.fixture(scope="session")
def multi30k_full() -> Path:
    """The whole Multi30k corpus, for tests marked `integration`."""
    path = full_multi30k()
    if path is None:
        pytest.skip(f"the full Multi30k corpus is not here: set MTKIT_MULTI30K=DIR (it ships at {SHIPPED_MULTI30K})")
    return path


@pytest.fixture(scope="session")
def cli_model(tmp_path_factory) -> Path:
    """A randomly initialised tiny model with a BPE vocabulary of synthetic text: for tests of the CLI's plumbing."""
    src, tgt = synthetic_pairs(300, seed=5)
    vocab = train_spm(src + tgt, vocab_size=120 + BYTE_PIECES)
    run = tmp_path_factory.mktemp("cli-model")
    return save_run(run, vocab, {10: random_model(pieces(vocab), seed=3)})[-1]


@pytest.fixture(scope="session")
def toy_data(tmp_path_factory) -> Path:
    """About 7 tiny-preset updates an epoch: resume tests cross an epoch boundary within 20 steps."""
    splits = {"train": synthetic_pairs(240, 1), "valid": synthetic_pairs(40, 2), "test": synthetic_pairs(20, 3)}
    return build_data_dir(tmp_path_factory.mktemp("toy"), splits, vocab_size=120 + BYTE_PIECES)


@pytest.fixture(scope="session")
def toy_sentences() -> list[str]:
    """Held-out sources of the toy task (another seed than the training pairs)."""
    return [s for s, _ in short_pairs(60, seed=11)]


@pytest.fixture(scope="session")
def trained_model(tmp_path_factory) -> Path:
    """A kind "model" file of a tiny Transformer trained on the toy reverse task, with its vocabulary."""
    pairs = short_pairs(600, seed=7)
    vocab = train_spm([s for s, _ in pairs] + [t for _, t in pairs], vocab_size=120 + BYTE_PIECES)
    model = train_toy(vocab, pairs)
    path = tmp_path_factory.mktemp("trained") / "model.pt"
    checkpoint.atomic_save(checkpoint.model_payload(model, model.cfg, vocab, step=TOY_STEPS), path)
    return path


@pytest.fixture(scope="session")
def opus_dir(tmp_path_factory) -> Path:
    """An OPUS-MT-shaped Hugging Face directory (tests/support/opus.py): two spm models, Marian's ids, swish."""
    pytest.importorskip("transformers")
    from tests.support.opus import make_opus_dir

    return make_opus_dir(tmp_path_factory.mktemp("opus") / "opus-mt-en-de")


@pytest.fixture(scope="session")
def opus_multilingual_dir(tmp_path_factory) -> Path:
    """The same with `>>fra<<`, `>>deu<<`, `>>ces<<` target-language tokens in its vocabulary."""
    pytest.importorskip("transformers")
    from tests.support.opus import make_opus_dir

    return make_opus_dir(tmp_path_factory.mktemp("opus") / "opus-mt-en-mul", multilingual=True, seed=1)
