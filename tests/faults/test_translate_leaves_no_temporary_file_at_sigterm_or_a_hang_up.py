"""SIGTERM or SIGHUP while `translate -o FILE` runs: its temporary file removed, no FILE, the signal's exit code.

Python dies at once by either signal, so the `.FILE.*.tmp` beside the output stayed for good
(issue 46 row 16, reported once before). `mtkit` now raises them as an interrupt, so every
`finally` cleans up, and exits 128 + the signal's number as a shell reports it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.cli import ROOT
from tests.support.serve import wait_until

FAST = ("--beam", "1", "--max-len-b", "3", "--device", "cpu", "--threads", "1", "--buffer-size", "1")


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_during_translate_leaves_nothing_behind(cli_model, tmp_path, sig, code):
    """fault: SIGTERM / SIGHUP during `translate -o FILE`; expected: no FILE, no temporary, exit 143 / 129."""
    source = tmp_path / "in.txt"
    source.write_text("a man runs on the street\n" * 20000)
    out = tmp_path / "out.txt"
    translate = subprocess.Popen(
        [sys.executable, "-m", "mtkit", "translate", "-m", str(cli_model), "-i", str(source), "-o", str(out), *FAST],
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        # Translations flowing into the temporary file: the signal lands while lines are being decoded.
        wait_until(lambda: any(p.stat().st_size for p in tmp_path.glob(".out.txt.*.tmp")), 300, "translations")
        translate.send_signal(sig)
        assert translate.wait(timeout=300) == code
        stderr = translate.stderr.read().decode()
        assert f"stopped by {signal.Signals(sig).name}" in stderr and "Traceback" not in stderr, stderr
        assert [p.name for p in tmp_path.iterdir()] == ["in.txt"]
    finally:
        translate.kill()
        translate.wait()
