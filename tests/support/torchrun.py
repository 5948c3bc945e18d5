"""Two gloo ranks on this machine through torch's own launcher: `python -m torch.distributed.run --standalone`.

SCRIPT is a Python file that ends in mtkit's main (each test's decides what a rank records or
changes); ARGS are its command line, e.g. `train DATA --out RUN ...`. The checkout is on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.cli import ROOT

# A rank's script that runs `mtkit ARGS` and leaves RUN/rank{RANK}.pid (so a test can signal that rank) and
# RUN/rank{RANK}.exit (the code it exited with).
RANK_WITH_PID = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from mtkit import cli
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{os.environ['RANK']}.pid").write_text(str(os.getpid()))
    sys.argv = ["mtkit", *sys.argv[1:]]
    try:
        cli.main()
    except SystemExit as exc:
        (out / f"rank{os.environ['RANK']}.exit").write_text(str(exc.code))
        raise
""")


def command(script: Path, *args: object, ranks: int = 2, monitor_s: float | None = None) -> list[str]:
    """torchrun's command line; `monitor_s`: how often its agent looks at the workers (what a test of a dead rank
    sets, so that the agent does not end the survivor before the survivor has noticed the loss itself)."""
    monitor = ["--monitor-interval", str(monitor_s)] if monitor_s is not None else []
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        *monitor,
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


def start_torchrun(script: Path, *args: object, monitor_s: float | None = None, **env: str) -> subprocess.Popen:
    """The ranks in the background, their launcher's stdout and stderr piped, for a test that signals them."""
    return subprocess.Popen(
        command(script, *args, monitor_s=monitor_s),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(**env),
    )
