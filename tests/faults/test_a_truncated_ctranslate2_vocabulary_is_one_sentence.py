"""A CTranslate2 directory whose shared_vocabulary.json was cut short (a full disk, an interrupted copy).

It was a JSONDecodeError traceback; now it is one sentence naming the file (mtkit/decode/ct2.py).
"""

from __future__ import annotations

import pytest

from tests.support.cli import error_line, run_cli

pytest.importorskip("ctranslate2")


def test_a_cut_vocabulary_file_is_named(cli_model, tmp_path):
    """fault: a truncated CTranslate2 `shared_vocabulary.json`; expected: one sentence naming it, exit 1."""
    out = tmp_path / "ct2"
    done = run_cli("export", cli_model, "--format", "ctranslate2", "-o", out)
    assert done.returncode == 0, done.stderr
    vocabulary = out / "shared_vocabulary.json"
    vocabulary.write_bytes(vocabulary.read_bytes()[:100])
    line = error_line(run_cli("translate", "-m", out, "--device", "cpu", input="a man\n"))
    assert str(vocabulary) in line and "damaged" in line, line
