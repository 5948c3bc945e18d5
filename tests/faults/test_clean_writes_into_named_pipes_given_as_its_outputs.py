"""`mtkit clean --out PREFIX` where PREFIX.LANG are named pipes: written into, as every `-o` of mtkit is.

The finished .part files were renamed over the outputs: the pipes became regular files and their reader
waited for ever. Now each pipe gets its side's lines (the two at once: `paste A B` reads them in step, `cat A B`
one after the other) and stays a pipe; the record PREFIX.clean.json is a regular file beside them.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tests.support.cli import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
PAIRS = [(f"A dog number {i} runs on the grass.", f"Ein Hund Nummer {i} rennt über das Gras.") for i in range(6000)]


@pytest.mark.parametrize("reader", ["paste", "cat"])
def test_clean_writes_into_named_pipes_and_leaves_them_pipes(tmp_path, reader):
    """fault: `clean --out P` with P.en and P.de named pipes (read by `paste P.en P.de`, or `cat P.en P.de`);
    expected: the reader gets every kept pair, both stay pipes, exit 0, no .part file left."""
    src, tgt = tmp_path / "in.en", tmp_path / "in.de"
    src.write_text("".join(s + "\n" for s, _ in PAIRS + PAIRS[:10]), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in PAIRS + PAIRS[:10]), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    pipes = [out / "p.en", out / "p.de"]
    for pipe in pipes:
        os.mkfifo(pipe)
    got = open(tmp_path / "got.txt", "wb")
    listener = subprocess.Popen([reader, *map(str, pipes)], stdout=got)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mtkit", "clean", str(src), str(tgt), "--out", str(out / "p"), "--dedup"],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert listener.wait(timeout=30) == 0
    finally:
        listener.kill()
        got.close()
    if reader == "paste":
        expected = "".join(f"{s}\t{t}\n" for s, t in PAIRS)
    else:
        expected = "".join(s + "\n" for s, _ in PAIRS) + "".join(t + "\n" for _, t in PAIRS)
    assert (tmp_path / "got.txt").read_text(encoding="utf-8") == expected
    assert all(stat.S_ISFIFO(os.stat(pipe).st_mode) for pipe in pipes)
    assert sorted(p.name for p in out.iterdir()) == ["p.clean.json", "p.de", "p.en"]
    assert (out / "p.clean.json").is_file()
