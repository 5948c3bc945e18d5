"""Lock files that say who holds them: one exclusive `flock` per lock, held for the holder's whole life.

Why flock: the kernel drops it when the process ends however it ends (SIGKILL, OOM, a node
crash on most network filesystems), so a killed run never leaves a stale lock behind, and
a lock is judged by the lock, never by a pid that means nothing on another host or in
another container. `train` (RUN/.train.lock), `prepare` and `bpe` (DIR/.mtkit.lock) and the
temporary work directories (mtkit/files.py) all take theirs here.

A lock file sits in a directory that others may write to (a shared run or data directory),
so it is opened without following a symbolic link and never truncated: a link planted under
its name is refused, and a file hard-linked there from elsewhere is left untouched.

A filesystem without flock (some NFS mounts, Lustre mounted `noflock`) answers ENOLCK,
EOPNOTSUPP or ENOSYS. mtkit then goes on without the lock and says so in one warning: the
trainers mtkit follows (fairseq, Lightning) take no lock at all, and refusing would make
those clusters unusable. `Lock.supported` tells the caller which case it got.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)

NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Busy(MtkitError):
    """The lock is held by another process; `holder` is what that process wrote in the file."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder}.")
        self.path, self.holder = path, holder


@dataclass
class Lock:
    path: Path
    fd: int | None  # None where there is no lock (no flock on this filesystem, or no fcntl: Windows)

    @property
    def supported(self) -> bool:
        return self.fd is not None


def holder_note() -> str:
    """What a lock file says about its holder: enough for another user to find the process."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _open(path: Path) -> int:
    try:
        return os.open(path, _OPEN_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise MtkitError(
                f"{path} is a symbolic link; mtkit never follows a link where its lock file goes "
                "(one planted in a shared directory would have mtkit write through it): remove it."
            ) from None
        raise MtkitError(f"cannot open the lock file {path} ({exc.strerror or exc}).") from None


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 512, 0).decode("utf-8", "replace")
    except OSError:
        text = ""
    return text.split("\n", 1)[0].strip() or "another process"


def _same_file(path: Path, fd: int) -> bool:
    """Whether `path` still names the file `fd` locked (a releasing holder may have removed it meanwhile)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def acquire(path: Path, note: str | None = None) -> Lock:
    """Take `path`'s lock without waiting; `Busy` names the holder when another process has it."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; two runs there are the user's to avoid
        return Lock(path, None)
    for _ in range(20):  # each retry means a holder removed the file between our open and our lock
        fd = _open(path)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise MtkitError(
                    f"{path} is not a plain file of its own (a directory, device or a hard link to another "
                    "file); mtkit will not use it as its lock file: remove it."
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Busy(path, _holder(fd)) from None
            except OSError as exc:
                if exc.errno not in NO_FLOCK:
                    raise MtkitError(f"cannot lock {path} ({exc.strerror or exc}).") from None
                logger.warning(
                    "the filesystem of %s does not support file locks (%s); going on without the lock, so make "
                    "sure no other mtkit command uses this directory at the same time",
                    path.parent,
                    exc.strerror or exc,
                )
                os.close(fd)
                return Lock(path, None)
            if _same_file(path, fd):
                line = f"{note or holder_note()}\n".encode()
                os.pwrite(fd, line, 0)  # the first line names the holder; no truncation, ever
                return Lock(path, fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise MtkitError(f"cannot lock {path}: other processes keep removing and re-creating it.")


def release(lock: Lock, remove: bool) -> None:
    """Drop the lock; `remove` unlinks the file first, while it is still held (so no one else's goes)."""
    if lock.fd is None:
        return
    try:
        if remove and _same_file(lock.path, lock.fd):
            lock.path.unlink(missing_ok=True)
    finally:
        os.close(lock.fd)


@contextlib.contextmanager
def held(path: Path, note: str | None = None, remove: bool = True) -> Iterator[Lock]:
    """`acquire` for the block, `release` after it however it ends."""
    lock = acquire(path, note)
    try:
        yield lock
    finally:
        release(lock, remove)


@contextlib.contextmanager
def if_free(path: Path) -> Iterator[bool]:
    """True, with `path`'s lock held for the block, when no process holds it (its holder is gone);
    False when one does or it cannot be told (no such plain file, a link, no flock here). Never creates it."""
    try:
        import fcntl
    except ImportError:
        yield False
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield False
        return
    try:
        free = stat.S_ISREG(os.fstat(fd).st_mode)
        if free:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # BlockingIOError: held; others: no flock, so no verdict
                free = False
        yield free and _same_file(path, fd)
    finally:
        os.close(fd)


def holder(path: Path) -> str | None:
    """What the process holding `path`'s lock wrote about itself; None when none holds it, or it cannot be told.

    For a reader of what the holder writes (`train` on a data directory a `bpe` holds), so that it
    names the writer instead of calling its half-written files damaged. Never creates the file.
    """
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        except OSError:  # no flock here: no verdict
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
