"""Raw text in and out: UTF-8 lines read lazily with bad bytes reported, output written whole or not at all."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import BinaryIO, Iterator

from mtkit.atomic import atomic_file

logger = logging.getLogger(__name__)


def read_lines(stream: BinaryIO, name: str = "input") -> Iterator[str]:
    """Lines of a byte stream without their line ending, read lazily so that a pipe is served as it flows.

    A line that is not valid UTF-8 has its bad bytes replaced by U+FFFD and is reported by number,
    so one stray byte in a large file costs one sentence, not the whole run.
    """
    for number, raw in enumerate(stream, 1):
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
    """stdout (None) or a file that appears only when complete (temporary file, then rename).

    Lines can be flushed as they come either way; a failure half-way leaves an earlier file
    of the same name untouched.
    """
    if path is None:
        yield sys.stdout.buffer
        return
    with atomic_file(path) as f:
        yield f
