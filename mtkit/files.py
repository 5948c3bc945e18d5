"""The file helpers that `prepare`, `bpe` and the downloader share: one copy of each rule.

Reading: `open_binary` (.gz decompressed on the fly), `count_lines`, `fingerprint` and
`hash_file` (one pass, at disk speed), `check_parallel` (the line-count rule of aligned
files). A damaged .gz is one sentence naming the file, never a zlib traceback.
Showing: `progress_bar`, a tqdm bar on stderr that starts no monitor thread.
Owning: `work_dir`, a temporary directory that no run leaves behind, not even a killed one, and that
no other run (another container on a shared disk included) takes for a dead one's: it is judged by a lock.
Naming: the names of the files mtkit writes beside a model or into a data directory and reads back, spelled here
once (below).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from mtkit import locks
from mtkit.errors import MtkitError
from mtkit.interrupts import signals_held, terminate_as_interrupt

logger = logging.getLogger(__name__)

# The files mtkit writes and reads back by name (one spelling each; a module that writes one imports its name).
SPM_MODEL = "spm.model"  # mtkit's SentencePiece model (`Vocab.filename`), in a data directory and an export
MARIAN_TOKENIZER = "marian-tokenizer.json"  # an OPUS-MT tokenizer's bundle (`MarianVocab.filename`); was spm.model
TOKENIZER_FILES = (SPM_MODEL, MARIAN_TOKENIZER)  # `Tokenizer.filename` of each kind (mtkit/data/tokenizer.py)
EXPORT_RECORD = "mtkit-export.json"  # what `mtkit export` writes beside an export: its files, step, provenance
CT2_MODEL = "model.bin"  # CTranslate2's weights in an export
VMAP = "vmap.txt"  # CTranslate2's vocabulary map: a model's shortlist in its export

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


def read_json(path: Path, kind: type, hint: str) -> Any:
    """The JSON value in `path` if it is of `kind`; else (cut short, damaged, another shape) one sentence naming
    the file and ending in `hint` (what to do)."""
    try:
        value = json.loads(read_model_file(path))  # a plain file of bounded size, or one sentence
    except (OSError, ValueError) as exc:  # cut short by a full disk or an interrupted copy; not UTF-8
        reason = f"{exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else exc
        raise MtkitError(f"{path} is damaged ({reason}); {hint}.") from None
    if not isinstance(value, kind):
        raise MtkitError(f"{path} holds a JSON {type(value).__name__}, not a {kind.__name__}; {hint}.")
    return value


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
LOCK_SUFFIX = ".lock"  # a work directory PREFIX<pid>-XXXX is live while PREFIX<pid>-XXXX.lock is locked


def sweep_stale(parent: Path, prefix: str) -> list[Path]:
    """Remove the `parent/PREFIX<pid>-*` work directories whose owner is gone (killed, crashed).

    A directory is live while its owner holds the flock on `NAME.lock` beside it (`work_dir`):
    a lock, not a pid, because another container or host sharing `parent` (a cluster's shared
    disk) has pids of its own, and `os.kill(pid, 0)` there says nothing. A directory without
    a lock file (left by an older mtkit) cannot be judged and is left alone.
    """
    swept = []
    pattern = re.compile(re.escape(prefix) + r"\d+-")
    for path in sorted(parent.glob(f"{prefix}*")) if parent.is_dir() else ():
        if not pattern.match(path.name) or path.is_symlink():
            continue
        if path.name.endswith(LOCK_SUFFIX):
            if not os.path.lexists(path.with_name(path.name[: -len(LOCK_SUFFIX)])):
                with locks.if_free(path) as free:  # a lock whose directory is gone (a kill mid-cleanup)
                    if free:
                        path.unlink(missing_ok=True)
            continue
        lock = path.with_name(path.name + LOCK_SUFFIX)
        if not path.is_dir():
            continue
        if not lock.exists():
            logger.info("leaving %s alone: it has no lock file to tell whether a run still uses it", path)
            continue
        with locks.if_free(lock) as free:
            if free:
                shutil.rmtree(path, ignore_errors=True)
                lock.unlink(missing_ok=True)
                swept.append(path)
    if swept:
        logger.info(
            "removed %d temporary director%s left by a killed run in %s",
            len(swept),
            "y" if len(swept) == 1 else "ies",
            parent,
        )
    return swept


DATA_LOCK = ".mtkit.lock"


@contextlib.contextmanager
def data_dir_locked(data_dir: Path, command: str) -> Iterator[None]:
    """Hold DATA_DIR/.mtkit.lock for the block: one `prepare` or `bpe` at a time on a data directory.

    A second run refuses at once with one sentence naming the first (it does not wait: a
    queued run would then redo or undo what the first has just written, and the user who
    started two by mistake learns it now). The lock file goes when the block ends. A
    directory that this call created and that is still empty at the end is removed too, so
    that a `prepare` that fails before writing anything leaves nothing behind.
    """
    created = not data_dir.exists()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MtkitError(f"cannot create {data_dir} ({exc.strerror or exc}).") from None
    lock: locks.Lock | None = None
    with terminate_as_interrupt():  # a SIGTERM at any moment still removes the lock file
        try:
            with signals_held():  # a signal now would leave the file made but not yet ours to remove
                try:
                    lock = locks.acquire(data_dir / DATA_LOCK, f"`{command}` ({locks.holder_note()})")
                except locks.Busy as busy:
                    raise MtkitError(
                        f"{data_dir} is in use by {busy.holder}; wait for it to end, or use another directory."
                    ) from None
            yield
        finally:
            with signals_held():
                if lock is not None:
                    locks.release(lock, remove=True)
                if created:
                    with contextlib.suppress(OSError):  # not empty: what was written stays
                        data_dir.rmdir()


@contextlib.contextmanager
def work_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary directory in `parent`, removed when the block ends however it ends (error, Ctrl-C,
    SIGTERM); ones that a killed run left are swept first.

    Its lock file (`NAME.lock` beside it) is created and locked before the directory exists and
    held until it is gone, so that no other run's sweep ever takes it for a dead one's.
    """
    sweep_stale(parent, prefix)
    lock: locks.Lock | None = None
    lock_path: Path | None = None
    tmp: Path | None = None
    with terminate_as_interrupt():  # from the first file made: a SIGTERM leaves neither lock nor directory
        try:
            # Made with the signals held: a Ctrl-C between mkstemp's return and the assignment would
            # leave a lock file that this block does not know the name of. One that came meanwhile is
            # raised as the `with` ends, inside the try, so the finally removes both.
            with signals_held():
                fd, name = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=LOCK_SUFFIX, dir=parent)
                os.close(fd)
                lock_path = Path(name)
                lock = locks.acquire(lock_path)
                tmp = Path(name[: -len(LOCK_SUFFIX)])
                tmp.mkdir(mode=0o700)
            yield tmp
        except KeyboardInterrupt as exc:
            logger.warning("interrupted (%s); removing the temporary files in %s", exc or "Ctrl-C", tmp or parent)
            raise
        finally:
            with signals_held():  # a second Ctrl-C does not cut the cleanup short
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                if lock is not None:
                    locks.release(lock, remove=True)
                elif lock_path is not None:
                    lock_path.unlink(missing_ok=True)


# A model directory's small files (config.json, vocab.json, tokenizer_config.json, source.spm, ...): an
# OPUS-MT vocab.json is about 2 MB, its SentencePiece models under 1 MB each; weights are not read here.
MODEL_FILE_MAX = 64 << 20


def read_model_file(path: Path, limit: int = MODEL_FILE_MAX) -> bytes:
    """The bytes of a model directory's small file: a regular file (links followed, as a Hub cache has them) of at
    most `limit` bytes, else one sentence. A missing file is FileNotFoundError, as `Path.read_bytes` raises.

    A cloned repository may carry a link to /dev/zero (read until memory runs out) or a named pipe (an
    open that waits for ever): the open does not wait (O_NONBLOCK), and only a regular file is read, at
    most `limit` + 1 bytes of it whatever its size says.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a named pipe"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a file"
            )
            raise MtkitError(f"{path} is {kind}, not a regular file; a model directory's files must be plain files.")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise MtkitError(
                f"{path} is over {limit >> 20} MiB, more than such a file of a model directory holds; "
                "the directory is damaged or not a model's."
            )
        return data
    finally:
        os.close(fd)
