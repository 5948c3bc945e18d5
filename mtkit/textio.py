"""Text files in and out, one sentence a line: the two ways of reading, the one way of writing.

Scoring reads strictly (`read_lines_strict`): a score over replaced characters would be
silently wrong, so bad UTF-8 is an error. Translation reads leniently (`read_lines_lenient`):
one stray byte in a large file costs one sentence, not the run. Every file argument may be a
regular file, `-` (stdin), a named pipe, `/dev/stdin` or a process substitution `<(cmd)`.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mtkit.atomic import atomic_file
from mtkit.errors import MtkitError
from mtkit.files import READ_ERRORS, unreadable
from mtkit.interrupts import raise_if_terminated

logger = logging.getLogger(__name__)

# Every character str.splitlines() breaks on, and tab (our column separator): none may stay inside an output line.
_BREAKS = str.maketrans({c: " " for c in "\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """`text` with line breaks and tabs made spaces: a byte-fallback piece can decode to one, and it would
    shift every later line of the output against the input."""
    return text.translate(_BREAKS)


@contextlib.contextmanager
def open_input(path: str | os.PathLike | None) -> Iterator[BinaryIO]:
    """The bytes of `path`: stdin for None or "-", else a file, pipe or device that exists (.gz decompressed)."""
    if path is None or str(path) == "-":
        if sys.stdin is None:  # started with stdin closed (`cmd <&-`)
            raise MtkitError("stdin is closed; give an input file, or pipe text in.")
        yield sys.stdin.buffer
        return
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError:
        raise MtkitError(f"{path} does not exist.") from None
    if stat.S_ISDIR(mode):
        raise MtkitError(f"{path} is a directory; give a text file.")
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise MtkitError(f"cannot read {path}: {exc.strerror}.") from None
    with raw:
        if path.suffix == ".gz":
            with gzip.open(raw, "rb") as unzipped:
                yield unzipped  # type: ignore[misc]
        else:
            yield raw


def read_lines_strict(path: str | os.PathLike | None) -> list[str]:
    """All lines as sacrebleu's command line reads them (trailing whitespace stripped); bad UTF-8 is an error."""
    name = "stdin" if path is None or str(path) == "-" else str(path)
    lines = []
    with open_input(path) as f:
        try:
            for raw in f:
                lines.append(raw.decode("utf-8").rstrip())
        except UnicodeDecodeError:
            raise MtkitError(f"{name} is not valid UTF-8 (line {len(lines) + 1}).") from None
        except READ_ERRORS as exc:  # a damaged .gz
            raise unreadable(name, exc) from None
    return lines


# The most of one line that translation reads: far more than any model takes (mtkit/decode/encode.py cuts a
# source to 32 characters a token), so that one 100 MB line costs 1 MiB of memory, not its size many times over.
MAX_LINE_BYTES = 1 << 20


def _bounded_lines(stream: BinaryIO, name: str, cap: int) -> Iterator[tuple[bytes, int]]:
    """(line, bytes left out) for each line: at most `cap` bytes of it are kept, the rest read past in pieces."""
    try:
        while True:
            # A Ctrl-C or SIGTERM whose exception was dropped on its way (mtkit/interrupts.py) is raised here, not
            # left to a wait for a line that may never come (a pipe kept open).
            raise_if_terminated()
            if not (raw := stream.readline(cap)):
                break
            if len(raw) < cap or raw.endswith(b"\n"):
                yield raw, 0
                continue
            skipped = 0
            while (more := stream.readline(cap)) and not more.endswith(b"\n"):
                skipped += len(more)
            yield raw, skipped + len(more)
    except READ_ERRORS as exc:
        raise unreadable(name, exc) from None


def _whole_characters(raw: bytes) -> bytes:
    """`raw` without a UTF-8 character cut at its end (a line cut at MAX_LINE_BYTES)."""
    for back in range(1, min(4, len(raw)) + 1):  # a character is at most 4 bytes: find where the last one starts
        byte = raw[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the last character starts here
            need = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return raw if need <= back else raw[:-back]
    return raw


def read_lines_lenient(stream: BinaryIO, name: str = "input", max_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Lines of a byte stream without their line ending, read lazily so that a pipe is served as it flows.

    A line that is not valid UTF-8 has its bad bytes replaced by U+FFFD and is reported by number.
    A line over `max_bytes` is cut there, with a warning, before it is held whole in memory.
    """
    for number, (raw, skipped) in enumerate(_bounded_lines(stream, name, max_bytes), 1):
        if skipped:
            raw = _whole_characters(raw)
            logger.warning(
                "%s line %d has over %d bytes; only its first %d are read (no model translates more).",
                name,
                number,
                max_bytes,
                len(raw),
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            logger.warning("%s line %d is not valid UTF-8; the bad bytes were replaced by U+FFFD.", name, number)
        if number == 1:
            text = text.removeprefix("\ufeff")  # a byte-order mark is not part of the first sentence
        yield text.rstrip("\r\n")


@contextlib.contextmanager
def open_output(path: str | os.PathLike | None) -> Iterator[BinaryIO]:
    """stdout (None or "-") or a file that appears only when complete (temporary file, then rename).

    Opened before any work starts, so that an output path that cannot be written (a directory,
    no permission) is said at once, not after the translating.
    """
    if path is None or str(path) == "-":
        yield _Named(sys.stdout.buffer, STDOUT)  # type: ignore[misc]
        return
    if Path(path).is_dir():
        raise MtkitError(f"output {path} is a directory; give a file name.")
    try:
        writer = atomic_file(path)
        f = writer.__enter__()
    except OSError as exc:
        raise MtkitError(f"cannot write {path}: {exc.strerror}.") from None
    try:
        yield _Named(f, path)  # type: ignore[misc]
    except BaseException as exc:
        with contextlib.suppress(OSError):  # closing flushes again, and a full disk fails again: exc says it
            writer.__exit__(type(exc), exc, exc.__traceback__)  # removes the temporary file
        raise
    try:
        writer.__exit__(None, None, None)  # fsync and rename: where a full disk often shows first
    except OSError as exc:
        raise _cannot_write(path, exc) from None


STDOUT = "standard output"


def _cannot_write(path: str | os.PathLike, exc: OSError) -> MtkitError:
    if path == STDOUT:  # a full disk or a failing device under `> FILE`
        return MtkitError(f"cannot write to standard output: {exc.strerror or exc}.")
    return MtkitError(f"cannot write {path} ({exc.strerror or exc}); it was not created or changed.")


class _Named:
    """An output file (or standard output) whose write errors name it: the system names no file for a write to
    an open one."""

    def __init__(self, f: BinaryIO, path: str | os.PathLike) -> None:
        self._f, self._path = f, path

    def write(self, data: bytes) -> int:
        try:
            return self._f.write(data)
        except BrokenPipeError:
            raise  # the reader went away: a normal end (mtkit/cli/app.py)
        except OSError as exc:
            raise _cannot_write(self._path, exc) from None

    def flush(self) -> None:
        try:
            self._f.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _cannot_write(self._path, exc) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._f, name)
