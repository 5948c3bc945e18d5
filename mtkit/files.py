"""The file helpers that `prepare`, `bpe` and the downloader share: one copy of each rule.

Reading: `open_binary` (.gz decompressed on the fly), `count_lines`, `fingerprint` and
`hash_file` (one pass, at disk speed), `check_parallel` (the line-count rule of aligned
files). A damaged .gz is one sentence naming the file, never a zlib traceback.
Showing: `progress_bar`, a tqdm bar on stderr that starts no monitor thread.
Owning: `work_dir`, a temporary directory that no run leaves behind, not even a killed one.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
READ_ERRORS = (OSError, EOFError, zlib.error)  # gzip.BadGzipFile is an OSError; bad deflate data is zlib.error


def open_binary(path: Path) -> BinaryIO:
    """A binary line stream; .gz files are decompressed on the fly."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb", buffering=CHUNK)


def unreadable(label: str | os.PathLike, exc: BaseException) -> MtkitError:
    """The one sentence for a file that cannot be read to its end (damaged .gz, I/O error)."""
    why = str(exc) or type(exc).__name__
    damaged = (
        "; the file is damaged (a truncated or corrupt .gz?)"
        if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile))
        else ""
    )
    return MtkitError(f"cannot read {label} ({why}){damaged}.")


def read_all(path: Path, label: str | None = None) -> bytes:
    """The whole (decompressed) content of a small file: dev and test sets."""
    try:
        with open_binary(path) as f:
            return f.read()
    except READ_ERRORS as exc:
        raise unreadable(label or path, exc) from None


def _blocks(path: Path, label: str | None, decompress: bool) -> Iterator[bytes]:
    try:
        with open_binary(path) if decompress else open(path, "rb") as f:
            while block := f.read(CHUNK):
                yield block
    except READ_ERRORS as exc:
        raise unreadable(label or path, exc) from None


def count_lines(path: Path, label: str | None = None) -> int:
    """Lines in a file (a last line without '\\n' counts; .gz decompressed), at disk speed."""
    n, last = 0, b"\n"
    for block in _blocks(path, label, decompress=True):
        n += block.count(b"\n")
        last = block[-1:]
    return n + (last != b"\n")


def fingerprint(path: Path) -> dict[str, Any]:
    """Size, line count and sha256 of a file as stored, in one pass."""
    sha, lines, size, last = hashlib.sha256(), 0, 0, b"\n"
    for block in _blocks(path, None, decompress=False):
        sha.update(block)
        lines += block.count(b"\n")
        size += len(block)
        last = block[-1:]
    return {"bytes": size, "lines": lines + (last != b"\n"), "sha256": sha.hexdigest()}


def hash_file(path: Path) -> tuple[str, str]:
    """(sha256, md5) of a file as stored: md5 is what some archives' publishers give."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    for block in _blocks(path, None, decompress=False):
        sha.update(block)
        md5.update(block)
    return sha.hexdigest(), md5.hexdigest()


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def check_parallel(
    n_src: int, n_tgt: int, src_label: str, tgt_label: str, *, unit: str = "line", hint: str = ""
) -> int:
    """The common count of two aligned texts; one sentence naming both and their counts otherwise."""
    if n_src != n_tgt:
        raise MtkitError(
            f"{src_label} has {_plural(n_src, unit)} but {tgt_label} has {_plural(n_tgt, unit)}: "
            f"the two sides of a parallel text must have the same number of lines{hint}."
        )
    if n_src == 0:
        raise MtkitError(f"{src_label} and {tgt_label} are empty{hint}.")
    return n_src


def count_parallel(src_path: Path, tgt_path: Path, src_label: str, tgt_label: str) -> int:
    """`check_parallel` of two files' line counts (counted before any work, so a mismatch fails at once)."""
    return check_parallel(count_lines(src_path, src_label), count_lines(tgt_path, tgt_label), src_label, tgt_label)


def progress_bar(enabled: bool, total: int | None, desc: str, unit: str, initial: int = 0) -> Any:
    """A tqdm bar on stderr (a no-op one when disabled: not a terminal); unit "B" counts bytes in KiB/MiB.

    No monitor thread: `prepare` forks its cleaning workers, and a fork must not copy a live thread.
    """
    from tqdm import tqdm

    tqdm.monitor_interval = 0
    return tqdm(
        total=total,
        initial=initial,
        unit=unit if unit == "B" else f" {unit}",
        unit_scale=True,
        unit_divisor=1024 if unit == "B" else 1000,
        desc=desc,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
        disable=not enabled,
    )


# --------------------------------------------------------------------------- temporaries
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def sweep_stale(parent: Path, prefix: str) -> list[Path]:
    """Remove `parent/PREFIX<pid>-*` directories whose process is gone (a run killed by SIGKILL or a crash).

    The pid in the name is how a run tells its own live work from a dead one's; a directory of a
    run still alive (another `prepare` on the same output) is left alone.
    """
    swept = []
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    for path in parent.glob(f"{prefix}*") if parent.is_dir() else ():
        m = pattern.match(path.name)
        if m and path.is_dir() and not _alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
    if swept:
        logger.info(
            "removed %d temporary director%s left by a killed run in %s",
            len(swept),
            "y" if len(swept) == 1 else "ies",
            parent,
        )
    return swept


class Terminated(KeyboardInterrupt):
    """SIGTERM seen as an interrupt, so that every `finally` and `except BaseException` cleans up as for Ctrl-C."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a scheduler's preemption, `kill`) raises `Terminated` like Ctrl-C does.

    Python's default for SIGTERM is to die at once, leaving temporary files behind. Only the
    main thread can set a handler; elsewhere the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def work_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary directory in `parent`, removed when the block ends however it ends (error, Ctrl-C,
    SIGTERM); ones that a killed run left are swept first."""
    sweep_stale(parent, prefix)
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    try:
        with terminate_as_interrupt():
            yield tmp
    except KeyboardInterrupt as exc:
        logger.warning("interrupted (%s); removing the temporary files in %s", exc or "Ctrl-C", tmp)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
