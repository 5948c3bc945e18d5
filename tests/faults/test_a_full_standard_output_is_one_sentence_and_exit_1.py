"""`mtkit translate`, `score` or `info` with standard output on a full disk (`> /dev/full`): one sentence, exit 1.

Python flushed stdout at exit after the command's own error, printed "Exception ignored ...
OSError" and exited 120, and the sentence said that no file was named. As coreutils' close_stdout
does, mtkit flushes stdout itself and names it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
FAST = ("--beam", "1", "--max-len-b", "3", "--device", "cpu", "--threads", "1")


def to_dev_full(*args: str) -> subprocess.CompletedProcess:
    with open("/dev/full", "wb") as full:
        return subprocess.run(
            [sys.executable, "-m", "mtkit", *args],
            input=b"a man runs\n",
            stdout=full,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=300,
        )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["translate", "score", "info"])
def test_a_full_stdout_is_one_sentence_naming_it(cli_model, tmp_path, command):
    """fault: stdout on a full disk (`translate`, `score`, `info` > /dev/full); expected: one sentence naming
    standard output, exit 1, nothing after it."""
    text = tmp_path / "text.txt"
    text.write_text("a man runs\n" * 3)
    args = {
        "translate": ("translate", "-m", str(cli_model), *FAST),
        "score": ("score", str(text), "-r", str(text)),
        "info": ("info", str(cli_model)),
    }[command]
    done = to_dev_full(*args)
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == ["mtkit: error: cannot write to standard output: No space left on device."], stderr
