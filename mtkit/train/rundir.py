"""The run directory as one training process's own: made, locked, and (with --restart) cleared by moving aside.

The lock is an fcntl lock on RUN/.train.lock, the mechanism `mtkit prepare`'s downloads use
(mtkit/data/fetch.py): the kernel drops it when the process ends however it ends, so a killed
run never leaves a stale lock behind. The file names its holder (pid and host) for the message
a second run gets. --restart never deletes: the old run's files go to RUN/previous-<time>/.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import torch

from mtkit.errors import MtkitError
from mtkit.train import distributed as dist

logger = logging.getLogger(__name__)

LOCK_NAME = ".train.lock"
PREVIOUS_PREFIX = "previous-"


def make_run_dir(run_dir: Path) -> None:
    """Create RUN (and its parents); a path that is a file is one sentence, not a FileExistsError."""
    if run_dir.exists() and not run_dir.is_dir():
        raise MtkitError(
            f"--out {run_dir} is a file, not a run directory; give a directory path (it is created if missing)."
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MtkitError(f"cannot create the run directory {run_dir} ({exc.strerror or exc}).") from None


def _try_lock(f: IO[str]) -> bool:
    import fcntl

    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold RUN/.train.lock for the block; a second holder gets one sentence naming the first one."""
    try:
        import fcntl  # noqa: F401  (POSIX only)
    except ImportError:  # Windows: no advisory locks; a second run there is the user's to avoid
        yield
        return
    path = run_dir / LOCK_NAME
    with open(path, "a+", encoding="utf-8") as f:
        if not _try_lock(f):
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise MtkitError(
                f"{run_dir} is in use by another `mtkit train` ({holder}); wait for it to end, or use another --out."
            )
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        f.flush()
        yield  # the lock goes with the file's close, or with the process


def move_aside(run_dir: Path) -> Path | None:
    """--restart: move everything of the old run into RUN/previous-<time>/; None when there was nothing."""
    old = [p for p in run_dir.iterdir() if p.name != LOCK_NAME and not p.name.startswith(PREVIOUS_PREFIX)]
    if not old:
        return None
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    target = run_dir / f"{PREVIOUS_PREFIX}{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = run_dir / f"{PREVIOUS_PREFIX}{stamp}-{n}"
    target.mkdir()
    for p in old:
        p.rename(target / p.name)
    logger.warning("--restart: moved the previous run's %d file(s) to %s", len(old), target)
    return target


@contextlib.contextmanager
def owned(run_dir: Path, world: dist.World, restart: bool) -> Iterator[None]:
    """Rank 0 makes, locks and (restart) clears RUN; the all-reduce makes every rank wait and share its verdict."""
    with contextlib.ExitStack() as stack:
        problem = None
        if world.is_main:
            try:
                make_run_dir(run_dir)
                stack.enter_context(locked(run_dir))
                if restart:
                    move_aside(run_dir)
            except MtkitError as exc:
                problem = exc
        flag = torch.tensor([float(problem is not None)], device=world.device)
        failed = dist.all_reduce_sum(flag, world).item() > 0
        if problem is not None:
            raise problem
        if failed:
            raise MtkitError(f"rank 0 could not take the run directory {run_dir} (its message says why).")
        yield
