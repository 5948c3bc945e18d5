"""Two gloo ranks on this machine through torch's own launcher: `python -m torch.distributed.run --standalone`.

SCRIPT is a Python file that ends in mtkit's main (each test's decides what a rank records or
changes); ARGS are its command line, e.g. `train DATA --out RUN ...`. The checkout is on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT


def command(script: Path, *args: object, ranks: int = 2) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(ranks),
        str(script),
    ] + [str(a) for a in args]


def environment(**env: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **env}


def torchrun(script: Path, *args: object, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run the ranks to their end; `timeout` is a deadline for a hang, not a timing assertion."""
    return subprocess.run(
        command(script, *args), capture_output=True, text=True, timeout=timeout, env=environment(**env)
    )


def start_torchrun(script: Path, *args: object, **env: str) -> subprocess.Popen:
    """The ranks in the background, their launcher's stdout and stderr piped, for a test that signals them."""
    return subprocess.Popen(
        command(script, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(**env)
    )
