"""Files that appear whole or not at all: write a temporary file beside the target, then rename.

Every file mtkit writes for a user (checkpoints, translations, prepared text, JSON records,
the SentencePiece model) goes through here, so that a crash or Ctrl-C at any moment leaves
either the previous file or the new one, never half of one.

Only a regular file (or a name not there yet) is replaced so: a device (/dev/null), a named pipe,
a socket or a terminal (/dev/stdout) is written into, as coreutils' `cp`, `sort -o` and `dd`
do. A rename would put a regular file where the device was (as root, in place of /dev/null)
and leave a pipe's reader waiting for ever.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mtkit.interrupts import signals_held


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file to write; on a clean exit it is fsynced and renamed to `path`, else removed.

    The temporary name is `.NAME.XXXXXXXX.tmp` in the target's directory (the rename must not
    cross filesystems), and the file gets the mode a plain `open` would give (mkstemp's is 0600).
    """
    path = Path(path)
    if is_special(path):
        with open_special(path) as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp: str | None = None
    try:
        with signals_held():  # a Ctrl-C right after mkstemp returns would leave a temporary nobody knows of
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            file = os.fdopen(fd, "wb")
        with file as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def is_special(path: str | os.PathLike) -> bool:
    """Whether `path` (links followed) names something there already that is not a regular file or a directory,
    or a link of the system's under /dev or /proc (`/dev/stdout` redirected to a file leads to a regular file:
    renaming over it would replace the link)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    system_link = os.path.islink(path) and os.path.abspath(path).startswith(("/dev/", "/proc/"))
    return system_link or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextlib.contextmanager
def open_special(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A device, pipe, socket or terminal opened to write into, never created (it is there) nor synced.

    A socket cannot be opened (ENXIO) and says so; a pipe's open waits for its reader, as `cat > FIFO` does.
    """
    with open(os.open(path, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOCTTY", 0)), "wb", closefd=True) as f:
        yield f


def _sync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (POSIX: fsync the directory itself).

    Windows cannot open a directory as a file (os.open raises PermissionError) and NTFS
    journals the rename's metadata itself, so there is nothing to do there.
    """
    if sys.platform == "win32":
        return
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write `data` (str as UTF-8) to `path` through `atomic_file`."""
    with atomic_file(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
