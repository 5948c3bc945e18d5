"""Raw text into the BPE model and out as arrays: batches of lines, a seeded sample, a file encoded.

The streaming pieces of `mtkit bpe` (bpe.py holds its steps and records): memory holds one
batch of lines or one sampling block, never a corpus.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from mtkit.data.binarize import BinaryWriter
from mtkit.errors import MtkitError
from mtkit.files import CHUNK

ENCODE_BATCH = 20_000


def _lines(path: Path, batch: int) -> Iterator[list[str]]:
    """Batches of lines as text; a line that is not UTF-8 is an error naming file and line."""
    first = 1
    with open(path, "rb", buffering=CHUNK) as f:
        while True:
            raw = f.readlines(batch * 200)
            if not raw:
                return
            blob = b"".join(raw)
            try:
                text = blob.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = first + blob.count(b"\n", 0, exc.start)
                raise MtkitError(f"{path}: line {line} is not valid UTF-8; run `mtkit prepare` again.") from None
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            first += len(lines)
            yield lines


def all_lines(*paths: Path) -> Iterator[str]:
    for path in paths:
        for batch in _lines(path, ENCODE_BATCH):
            yield from batch


def sample_pairs(
    src: Path, tgt: Path, pairs: int, want: int, seed: int, taken: list[int] | None = None
) -> Iterator[str]:
    """Both sides of `want` pairs chosen uniformly at random (seeded) among `pairs`, in one pass.

    Exact selection in a stream: each block of lines gets a hypergeometric share of what is
    still wanted, then that many of its lines at random. Memory holds one block. The number
    of sentences yielded is added to `taken[0]`.
    """
    rng = np.random.default_rng(seed)
    remaining, need = pairs, min(want, pairs)
    block = 100_000
    with open(src, "rb", buffering=CHUNK) as fs, open(tgt, "rb", buffering=CHUNK) as ft:
        while remaining and need:
            a = [fs.readline() for _ in range(min(block, remaining))]
            b = [ft.readline() for _ in range(len(a))]
            n = len(a)
            take = int(rng.hypergeometric(n, remaining - n, need)) if remaining > n else need
            for i in np.sort(rng.choice(n, size=take, replace=False)):
                for line in (a[i], b[i]):
                    yield line.decode("utf-8", errors="replace").rstrip("\n")
            if taken is not None:
                taken[0] += 2 * take
            need -= take
            remaining -= n


def give_back_freed_memory() -> None:
    """SentencePiece's trainer frees its sentences when done, but glibc keeps the pages: return
    them to the system, so that encoding does not carry learning's peak with it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to do
            pass


def encode_file(
    encode: Callable[..., list[list[int]]],
    size: int,
    path: Path,
    prefix: Path,
    threads: int,
    timings: dict[str, float] | None = None,
    progress: Callable[[int], object] | None = None,
) -> int:
    """Encode a raw text file line by line into PREFIX.bin/.idx; returns the token count.

    `timings` accumulates seconds spent reading+decoding, in SentencePiece, and writing arrays.
    `encode(lines, threads=N)`: a tokenizer's `encode_batch` (a source side) or `encode_target_batch` (a target
    side: an OPUS-MT tokenizer cuts it with its target model); `size`: its number of ids.
    """
    t = timings if timings is not None else {}
    clock = time.perf_counter
    with BinaryWriter(prefix, size) as writer:
        lines_iter = _lines(path, ENCODE_BATCH)
        while True:
            t0 = clock()
            lines = next(lines_iter, None)
            t1 = clock()
            if lines is None:
                break
            ids = encode(lines, threads=threads)
            t2 = clock()
            writer.add_many(ids)
            t3 = clock()
            t["read_s"] = t.get("read_s", 0.0) + t1 - t0
            t["encode_s"] = t.get("encode_s", 0.0) + t2 - t1
            t["binarize_s"] = t.get("binarize_s", 0.0) + t3 - t2
            if progress is not None:
                progress(len(lines))
        t0 = clock()
    t["binarize_s"] = t.get("binarize_s", 0.0) + clock() - t0  # the final flush and renames
    return writer.num_tokens
