"""`-m org/..`, `--from org/na--me`, `--init org/..`: neither a local path nor a name the Hub accepts.

huggingface_hub's validation raised from inside the download, a traceback; now one sentence says
the name is neither, before anything is asked of the network.
"""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli

pytest.importorskip("huggingface_hub")

SENTENCE = "is neither a local path nor a valid Hugging Face Hub name"


@pytest.mark.parametrize(
    "command",
    [
        ("translate", "-m", "org/.."),
        ("info", "org/na--me"),
        ("export", "org/..", "--format", "huggingface", "-o", "out"),
        ("serve", "-m", "org/na--me", "--port", "0"),
        ("bpe", "data", "--from", "org/na--me"),
        ("train", "data", "--init", "org/..", "--out", "run"),
    ],
    ids=["translate", "info", "export", "serve", "bpe", "train"],
)
def test_an_invalid_hub_name_is_one_sentence(command, tmp_path, monkeypatch):
    """fault: `-m org/..` / `--from org/na--me` / `--init org/..` (no such path here); expected: one sentence, not a
    valid Hub name nor a local path, exit 1, no traceback."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing may be fetched whatever happens
    (tmp_path / "data").mkdir()
    done = run_cli(*command, cwd=tmp_path, input="a dog\n")
    assert done.returncode == 1, done.stderr
    assert SENTENCE in done.stderr and "Traceback" not in done.stderr, done.stderr
