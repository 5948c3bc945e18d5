"""Token ids on disk as memory-mapped arrays: `PREFIX.bin` (ids) and `PREFIX.idx` (offsets).

`.bin` holds every sentence's ids back to back (uint16 when the vocabulary fits, else
int32), without BOS/EOS: the batcher adds them. `.idx` holds n+1 int64 offsets into
`.bin`, so sentence i is bin[idx[i]:idx[i+1]]. Both are opened with numpy.memmap, so
reading sentence i is O(1) and memory does not grow with corpus size. The id width is
read off the file sizes, so the pair needs no header.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from mtkit.errors import MtkitError


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits in 16 bits (halves disk and page-cache use), else int32."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.int32)


def _temporary(prefix: Path, ext: str) -> tuple[BinaryIO, Path]:
    fd, name = tempfile.mkstemp(prefix=f".{prefix.name}.{ext}.", suffix=".tmp", dir=prefix.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # the mode a plain open gives (mkstemp's is 0600)
    return os.fdopen(fd, "wb"), Path(name)


class BinaryWriter:
    """Appends sentences to `PREFIX.bin`/`.idx`; both appear only when `close()` succeeds.

    Ids and offsets are both streamed to temporary files in blocks, so memory stays flat
    however many sentences are written (a 4.5M-sentence split would otherwise hold 4.5M
    Python ints of offsets, about 160 MB, until `close()`).
    """

    def __init__(self, prefix: str | os.PathLike, vocab_size: int, buffer_tokens: int = 1 << 20):
        self.prefix = Path(prefix)
        self.dtype = id_dtype(vocab_size)
        self.vocab_size = vocab_size
        # Names of their own (`.NAME.bin.XXXXXXXX.tmp`, as atomic.py's): two writers never share one.
        self._bin, self._tmp_bin = _temporary(self.prefix, "bin")
        try:
            self._idx, self._tmp_idx = _temporary(self.prefix, "idx")
        except BaseException:
            self._bin.close()
            self._tmp_bin.unlink(missing_ok=True)
            raise
        np.zeros(1, dtype=np.int64).tofile(self._idx)  # offsets[0] = 0
        self._total = 0  # tokens written or buffered so far = the last offset
        self._buffer: list[np.ndarray] = []
        self._offset_buffer: list[np.ndarray] = []
        self._buffered = 0
        self._buffer_tokens = buffer_tokens

    @property
    def num_tokens(self) -> int:
        return self._total

    def _check_range(self, arr: np.ndarray) -> None:
        if arr.size and (arr.min() < 0 or arr.max() >= self.vocab_size):
            raise MtkitError(f"token id out of range [0, {self.vocab_size}) while writing {self.prefix}.bin.")

    def add_many(self, sentences: Sequence[Sequence[int]]) -> None:
        """Append many sentences at once (what SentencePiece's batch encode returns).

        One numpy conversion per batch instead of one per sentence: far faster than converting sentence by
        sentence (docs/benchmarks.md: mtkit/data/normalize.py), which matters at millions of sentences.
        """
        if not len(sentences):
            return
        lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
        flat = np.fromiter(itertools.chain.from_iterable(sentences), dtype=np.int64, count=int(lengths.sum()))
        self._check_range(flat)
        self._append(flat.astype(self.dtype), lengths)

    def _append(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        offsets = self._total + np.cumsum(lengths)
        self._buffer.append(ids)
        self._offset_buffer.append(offsets)
        self._total = int(offsets[-1]) if offsets.size else self._total
        self._buffered += int(ids.size) + int(lengths.size)
        if self._buffered >= self._buffer_tokens:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            try:
                np.concatenate(self._buffer).tofile(self._bin)
                np.concatenate(self._offset_buffer).tofile(self._idx)
            except OSError as exc:  # a full disk names no file: say which one
                raise self._cannot_write(exc) from None
            self._buffer, self._offset_buffer, self._buffered = [], [], 0

    def _cannot_write(self, exc: OSError) -> MtkitError:
        why = exc.strerror or f"{exc}: is the disk full?"  # numpy's tofile says only what it could not write
        return MtkitError(f"cannot write {self.prefix}.bin or its .idx ({why}); no array was replaced.")

    def close(self) -> None:
        try:
            self._flush()
            try:
                self._bin.close()
                self._idx.close()
            except OSError as exc:
                raise self._cannot_write(exc) from None
        except BaseException:
            self.abort()
            raise
        # .idx goes last: a reader never sees an index that points past its .bin.
        os.replace(self._tmp_bin, self.prefix.with_name(self.prefix.name + ".bin"))
        os.replace(self._tmp_idx, self.prefix.with_name(self.prefix.name + ".idx"))

    def abort(self) -> None:
        for f in (self._bin, self._idx):
            with contextlib.suppress(OSError):  # a full disk fails the last flush too
                f.close()
        for tmp in (self._tmp_bin, self._tmp_idx):
            tmp.unlink(missing_ok=True)

    def __enter__(self) -> BinaryWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class IndexedDataset:
    """Read-only view of one binarized split of one language; sentence i in O(1)."""

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = Path(prefix)
        bin_path = self.prefix.with_name(self.prefix.name + ".bin")
        idx_path = self.prefix.with_name(self.prefix.name + ".idx")
        for path in (bin_path, idx_path):
            if not path.is_file():
                raise MtkitError(f"binarized data {path} is missing; run `mtkit bpe` on the data directory first.")
        self.offsets = (
            np.memmap(idx_path, dtype=np.int64, mode="r") if idx_path.stat().st_size else np.zeros(1, np.int64)
        )
        n_tokens = int(self.offsets[-1])
        n_bytes = bin_path.stat().st_size
        if n_tokens == 0:
            self.dtype = np.dtype(np.uint16)
        elif n_bytes == 2 * n_tokens or n_bytes == 4 * n_tokens:
            self.dtype = np.dtype(np.uint16) if n_bytes == 2 * n_tokens else np.dtype(np.int32)
        else:
            raise MtkitError(
                f"{bin_path} ({n_bytes} bytes) does not match {idx_path} ({n_tokens} tokens); "
                f"rebuild it with `mtkit bpe`."
            )
        self.ids = np.memmap(bin_path, dtype=self.dtype, mode="r") if n_tokens else np.zeros(0, self.dtype)
        self.sizes = np.diff(self.offsets).astype(np.int64)  # tokens per sentence, without BOS/EOS

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        if not -len(self) <= i < len(self):
            raise IndexError(f"sentence {i} out of range for {len(self)} sentences in {self.prefix}")
        i %= len(self)
        return np.asarray(self.ids[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])
