"""Drive the real `mtkit` command of this checkout: in this test process (fast) or in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.inprocess import in_process

ROOT = Path(__file__).resolve().parents[2]


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


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one `mtkit: error:` line of a command that failed as a user mistake should: exit 1, no traceback."""
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("mtkit: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]
