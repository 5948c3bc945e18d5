"""The run directory as one training process's own: made, locked, and (with --restart) cleared by moving aside.

The lock is a flock on RUN/.train.lock (mtkit/locks.py, as `prepare` and `bpe` lock their data
directory): the kernel drops it when the process ends however it ends, so a killed run never
leaves a stale lock behind. The file names its holder (pid and host) for the message
a second run gets. --restart never deletes: the old run's own files (RUN_FILES, and nothing
else of RUN) go to RUN/previous-<time>/.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fnmatch
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from mtkit import locks
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


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """Hold RUN/.train.lock for the block; a second holder gets one sentence naming the first one.

    mtkit/locks.py opens it without following a link and never truncates it (a link planted in
    a shared run directory is refused), and goes on with a warning where the filesystem has no
    flock. The file stays after the run: it is how `info` and the tests know a run was here.
    """
    try:
        lock = locks.acquire(run_dir / LOCK_NAME)
    except locks.Busy as busy:
        raise MtkitError(
            f"{run_dir} is in use by another `mtkit train` ({busy.holder}); wait for it to end, or use another --out."
        ) from None
    try:
        yield  # the lock goes with the descriptor's close, or with the process
    finally:
        locks.release(lock, remove=False)


def _json_keys(path: Path, *keys: str, format: str | None = None) -> bool:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and all(k in record for k in keys) and record.get("format", format) == format


def _tensorboard_dir(path: Path) -> bool:
    return path.is_dir() and all(p.name.startswith("events.out.tfevents.") for p in path.rglob("*") if p.is_file())


# Everything mtkit writes in a run directory: the one list `--restart` moves, and nothing else is
# touched (with `--out .` in a source tree, the tree stays where it is). A name whose content could
# also be a user's own (config.json, run.json, tb/) moves only when the content reads as mtkit's.
RUN_FILES: tuple[tuple[str, Callable[[Path], bool] | None], ...] = (
    ("config.json", lambda p: _json_keys(p, "model", "train")),  # train: the resolved configs
    ("run.json", lambda p: _json_keys(p, format="mtkit-run")),  # train: provenance (mtkit/provenance.py)
    ("metrics.jsonl", None),  # train: one record a log line
    ("checkpoint_*.pt", None),  # train: checkpoint_<step>.pt, checkpoint_last.pt, checkpoint_best.pt
    ("averaged.pt", None),  # average: its default output
    ("tb", _tensorboard_dir),  # train --tensorboard
    (".checkpoint*.tmp", None),  # temporaries of writes cut short (atomic.py, checkpoint.py)
    (".config.json.*.tmp", None),
    (".run.json.*.tmp", None),
    (".averaged.pt.*.tmp", None),
)


def own_files(run_dir: Path) -> list[Path]:
    """The files (and tb/) of RUN that mtkit wrote, by RUN_FILES."""
    return [
        p
        for p in sorted(run_dir.iterdir())
        if any(fnmatch.fnmatchcase(p.name, pattern) and (test is None or test(p)) for pattern, test in RUN_FILES)
    ]


def move_aside(run_dir: Path) -> Path | None:
    """--restart: move the old run's own files into RUN/previous-<time>/; None when there were none."""
    old = own_files(run_dir)
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
            except OSError as exc:  # said on rank 0 and shared below: the other ranks must not hang
                problem = MtkitError(f"cannot use the run directory {run_dir} ({exc.strerror or exc}).")
        flag = torch.tensor([float(problem is not None)], device=world.device)
        failed = dist.all_reduce_sum(flag, world).item() > 0
        if problem is not None:
            raise problem
        if failed:
            raise MtkitError(f"rank 0 could not take the run directory {run_dir} (its message says why).")
        yield
