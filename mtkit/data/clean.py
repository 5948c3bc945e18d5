"""Normalisation and filtering of parallel training text, streamed and spread over processes.

What happens to each training pair (dev and test sets never come here):

1. Both sides are decoded as UTF-8. A pair with an invalid byte on either side is dropped
   and counted (`invalid_utf8`), and its first file:line positions go to prepare.json:
   web-crawled training data has such lines, and one bad line in 4.5M pairs is no reason
   to stop. (Dev and test sets are never filtered, so there a bad byte is an error naming
   the file and the line.)
2. Moses punctuation normalisation, `normalize-punctuation.perl -l LANG` as sacremoses'
   `MosesPunctNormalizer(lang)` implements it, then Moses' `remove-non-printing-char.perl`:
   every `\\p{C}` character (controls, format characters, unassigned code points; plus the
   Unicode line and paragraph separators, so that no line reader can split a line) becomes
   a space, and runs of spaces collapse. `PunctNormalizer` (normalize.py) applies sacremoses'
   own rule table with precompiled patterns and skips a rule when the one character every
   match of it must contain is absent: output identical to sacremoses' (the tests compare
   them), at 10-25x its speed.
3. Filters, the first one that applies is counted: `empty` (a side is empty after step 2),
   `too_long` (a side has more than 250 words), `ratio` (one side has more than 1.5 times
   the words of the other), `too_long_chars` and `char_ratio` (the same tests counted in
   characters, Unicode code points spaces included: a unit that works for every script),
   and with `dedup`, `duplicate` (the same normalised pair seen before). The word limits are
   per corpus (corpora.py: a named corpus keeps its own rules, custom data has none unless
   asked); the character limits are off unless asked; 0 turns one off. Words are
   whitespace-separated tokens of the untokenised text. That is Moses'
   `clean-corpus-n.perl -ratio 1.5 ... 1 250` with its word counts, applied before
   tokenisation: fairseq's `prepare-wmt14en2de.sh` runs the same script after Moses
   tokenisation and BPE, so there the counts are subword tokens and a little more pairs
   pass the ratio test and fewer pass the length test than here.

Streaming: pairs travel in chunks of `chunk_pairs` through a pool of worker processes with
at most `2 * workers` chunks in flight, so memory does not grow with the corpus. With
`dedup`, 8 bytes per kept pair (a 64-bit hash) are kept, and a second pass over the
written text keeps the first occurrence of each pair (about 36 MB for 4.5M pairs).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import multiprocessing
import os
import signal
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from mtkit.data.normalize import normalizer, remove_non_printing
from mtkit.errors import MtkitError
from mtkit.files import count_parallel, open_binary

RULES = ("invalid_utf8", "empty", "too_long", "ratio", "too_long_chars", "char_ratio", "duplicate")
# The option that turns each rule off, for the sentence that says which rule emptied a corpus.
RULE_OPTIONS = {
    "invalid_utf8": "none: re-encode the files as UTF-8 (iconv)",
    "empty": "none: both sides need text",
    "too_long": "--max-words 0",
    "ratio": "--max-ratio 0",
    "too_long_chars": "--max-chars 0",
    "char_ratio": "--max-char-ratio 0",
    "duplicate": "leave out --dedup",
}
# Written without spaces between words: whitespace word counts mean nothing there.
NO_SPACES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu", "dz"})
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class CleanConfig:
    max_words: int = 250  # 0: no limit
    max_ratio: float = 1.5  # 0: no limit
    dedup: bool = False
    normalize: bool = True
    max_chars: int = 0  # 0: no limit
    max_char_ratio: float = 0.0  # 0: no limit

    def active(self) -> tuple[str, ...]:
        """The rules this configuration applies, in RULES' order."""
        on = {"too_long": self.max_words, "ratio": self.max_ratio, "duplicate": self.dedup}
        on.update(too_long_chars=self.max_chars, char_ratio=self.max_char_ratio)
        return tuple(rule for rule in RULES if bool(on.get(rule, True)))

    def check_script(self, src: str, tgt: str) -> None:
        """Refuse word-counting rules for a language written without spaces between words."""
        lang = next((code for code in (src, tgt) if code.lower().replace("_", "-").split("-")[0] in NO_SPACES), None)
        if lang is None:
            return
        for value, option, chars in (
            (self.max_words, "--max-words", "--max-chars"),
            (self.max_ratio, "--max-ratio", "--max-char-ratio"),
        ):
            if value:
                raise MtkitError(
                    f"{option} counts whitespace-separated words, which '{lang}' text does not have; "
                    f"give {option} 0 and use {chars} (characters) instead."
                )

    def describe(self, src: str, tgt: str) -> dict:
        return {
            "applied_to": "train only (valid and test are written as published)",
            "normalizer": f"sacremoses MosesPunctNormalizer(lang='{src}' / '{tgt}') = Moses normalize-punctuation.perl"
            if self.normalize
            else "none",
            "non_printing": "\\p{C} and U+2028/U+2029 -> space, runs of spaces collapsed "
            "(Moses remove-non-printing-char.perl)"
            if self.normalize
            else "none",
            "invalid_utf8": "pair dropped and counted; first positions listed",
            "empty": "a side empty after normalisation",
            "max_words": self.max_words or "off",
            "max_ratio": self.max_ratio or "off",
            "ratio_unit": "whitespace-separated words of the untokenised text, max(a/b, b/a) > max_ratio "
            "(clean-corpus-n.perl's test; fairseq applies it to BPE tokens after tokenisation)",
            "max_chars": self.max_chars or "off",
            "max_char_ratio": self.max_char_ratio or "off",
            "char_unit": "Unicode code points of the normalised text, spaces included",
            "rules": list(self.active()),
            "dedup": self.dedup,
        }


@dataclass
class CleanStats:
    pairs_in: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: {rule: 0 for rule in RULES})
    invalid_utf8_at: list[str] = field(default_factory=list)

    def add(self, other: CleanStats) -> None:
        self.pairs_in += other.pairs_in
        self.kept += other.kept
        for rule, n in other.dropped.items():
            self.dropped[rule] = self.dropped.get(rule, 0) + n
        room = MAX_EXAMPLES - len(self.invalid_utf8_at)
        self.invalid_utf8_at.extend(other.invalid_utf8_at[: max(0, room)])

    def record(self) -> dict:
        out = {"pairs_in": self.pairs_in, "kept": self.kept, "dropped": dict(self.dropped)}
        if self.invalid_utf8_at:
            out["invalid_utf8_at"] = list(self.invalid_utf8_at)
        return out


def _words(text: str) -> int:
    """len(text.split()), faster where the only whitespace is single ASCII spaces (most lines)."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text.count(" ") + 1 if text else 0
    return len(text.split())


# --------------------------------------------------------------------------- the worker side
@dataclass(frozen=True)
class _Job:
    src: bytes  # the chunk's lines, each ending in b"\n" (except perhaps the file's last line)
    tgt: bytes
    n: int
    first_line: int  # 1-based line number of the chunk's first line
    src_lang: str
    tgt_lang: str
    src_label: str
    tgt_label: str
    config: CleanConfig
    want_hashes: bool


@dataclass
class _Result:
    src: bytes
    tgt: bytes
    counts: dict[str, int]
    kept: int
    n: int
    invalid_at: list[str]
    hashes: bytes


def _split(blob: bytes, n: int) -> list[bytes]:
    lines = blob.split(b"\n")
    if len(lines) == n + 1 and lines[-1] == b"":
        lines.pop()
    return lines


def _decode(lines_blob: bytes, n: int) -> list[str | None]:
    """The chunk's lines as text (split at '\n' only); None for a line that is not UTF-8."""
    try:
        text = lines_blob.decode("utf-8")
    except UnicodeDecodeError:  # rare: find the bad lines one by one
        out: list[str | None] = []
        for line in _split(lines_blob, n):
            try:
                out.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        return out
    lines: list[str | None] = text.split("\n")  # type: ignore[assignment]
    if len(lines) == n + 1 and lines[-1] == "":
        lines.pop()
    return lines


def clean_chunk(job: _Job) -> _Result:
    cfg = job.config
    srcs = _decode(job.src, job.n)
    tgts = _decode(job.tgt, job.n)
    if len(srcs) != job.n or len(tgts) != job.n:  # the reader split lines the same way: cannot happen
        raise RuntimeError(f"chunk of {job.n} pairs split into {len(srcs)}/{len(tgts)} lines")
    norm_s = normalizer(job.src_lang).normalize if cfg.normalize else str.strip
    norm_t = normalizer(job.tgt_lang).normalize if cfg.normalize else str.strip
    clean = remove_non_printing if cfg.normalize else (lambda s: s)
    counts = dict.fromkeys(RULES, 0)
    invalid_at: list[str] = []
    out_s: list[str] = []
    out_t: list[str] = []
    max_words, ratio, max_chars, char_ratio = cfg.max_words, cfg.max_ratio, cfg.max_chars, cfg.max_char_ratio
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        if s is None or t is None:
            counts["invalid_utf8"] += 1
            if len(invalid_at) < MAX_EXAMPLES:
                label = job.src_label if s is None else job.tgt_label
                invalid_at.append(f"{label}:{job.first_line + i}")
            continue
        s = clean(norm_s(s))
        t = clean(norm_t(t))
        if not s or not t:
            counts["empty"] += 1
            continue
        ns, nt = _words(s), _words(t)
        if max_words and (ns > max_words or nt > max_words):
            counts["too_long"] += 1
            continue
        if ratio and (ns > ratio * nt or nt > ratio * ns):
            counts["ratio"] += 1
            continue
        cs, ct = len(s), len(t)
        if max_chars and (cs > max_chars or ct > max_chars):
            counts["too_long_chars"] += 1
            continue
        if char_ratio and (cs > char_ratio * ct or ct > char_ratio * cs):
            counts["char_ratio"] += 1
            continue
        out_s.append(s)
        out_t.append(t)
    hashes = b""
    if job.want_hashes:
        hashes = array(
            "Q",
            (
                int.from_bytes(hashlib.blake2b(f"{s}\t{t}".encode(), digest_size=8).digest(), "little")
                for s, t in zip(out_s, out_t)
            ),
        ).tobytes()
    src_out = ("\n".join(out_s) + "\n").encode() if out_s else b""
    tgt_out = ("\n".join(out_t) + "\n").encode() if out_t else b""
    return _Result(src_out, tgt_out, counts, len(out_s), job.n, invalid_at, hashes)


# --------------------------------------------------------------------------- the main side
def _fork_context():
    if "fork" in multiprocessing.get_all_start_methods():
        # fork, not spawn: a spawned child re-imports `__main__`, which for `python -m mtkit`
        # is the CLI itself. Workers only run clean_chunk, which needs nothing but this module.
        return multiprocessing.get_context("fork")
    return None


def _worker_signals() -> None:
    """Workers leave signals to the main process: Ctrl-C reaches the whole process group, and the main
    process answers it (or SIGTERM) by terminating the pool, which must then end a worker quietly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal's, like Ctrl-C's: the main process answers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Cleaner:
    """Cleans parallel files into open output files; a context manager owning the worker pool."""

    def __init__(
        self,
        src_lang: str,
        tgt_lang: str,
        config: CleanConfig = CleanConfig(),
        *,
        workers: int | None = None,
        chunk_pairs: int = 10_000,
    ):
        self.src_lang, self.tgt_lang, self.config = src_lang, tgt_lang, config
        self.workers = max(1, workers if workers else (os.cpu_count() or 1))
        self.chunk_pairs = chunk_pairs
        self.hashes = array("Q")  # one per kept pair, in output order, when config.dedup
        self._pool = None

    def __enter__(self) -> Cleaner:
        # Build the normalisers before forking, so that every worker inherits them ready.
        if self.config.normalize:
            normalizer(self.src_lang), normalizer(self.tgt_lang)
        ctx = _fork_context()
        if self.workers > 1 and ctx is not None:
            self._pool = ctx.Pool(self.workers, initializer=_worker_signals)
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.terminate() if exc[0] else self._pool.close()
            self._pool.join()
            self._pool = None

    def _jobs(self, fs: BinaryIO, ft: BinaryIO, src_label: str, tgt_label: str, want_hashes: bool) -> Iterator[_Job]:
        first = 1
        while True:
            src = list(itertools.islice(fs, self.chunk_pairs))
            tgt = list(itertools.islice(ft, self.chunk_pairs))
            if not src and not tgt:
                return
            if len(src) != len(tgt):  # counted beforehand; only a file changing under us gets here
                raise MtkitError(f"{src_label} and {tgt_label} changed while being read.")
            yield _Job(
                b"".join(src),
                b"".join(tgt),
                len(src),
                first,
                self.src_lang,
                self.tgt_lang,
                src_label,
                tgt_label,
                self.config,
                want_hashes,
            )
            first += len(src)

    def _results(self, jobs: Iterator[_Job]) -> Iterator[_Result]:
        if self._pool is None:
            yield from map(clean_chunk, jobs)
            return
        pending: collections.deque = collections.deque()
        for job in jobs:
            pending.append(self._pool.apply_async(clean_chunk, (job,)))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def run(
        self,
        src_path: Path,
        tgt_path: Path,
        out_src: BinaryIO,
        out_tgt: BinaryIO,
        *,
        src_label: str | None = None,
        tgt_label: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> CleanStats:
        """Clean one parallel text and append the kept pairs to `out_src`/`out_tgt`."""
        src_label, tgt_label = src_label or str(src_path), tgt_label or str(tgt_path)
        count_parallel(src_path, tgt_path, src_label, tgt_label)
        stats = CleanStats()
        with open_binary(src_path) as fs, open_binary(tgt_path) as ft:
            for res in self._results(self._jobs(fs, ft, src_label, tgt_label, self.config.dedup)):
                out_src.write(res.src)
                out_tgt.write(res.tgt)
                stats.add(CleanStats(res.n, res.kept, res.counts, res.invalid_at))
                if res.hashes:
                    self.hashes.frombytes(res.hashes)
                if progress is not None:
                    progress(res.n)
        return stats


def dedup_files(src_in: Path, tgt_in: Path, src_out: Path, tgt_out: Path, hashes: array) -> int:
    """Copy the pairs whose hash was not seen before; returns how many were dropped.

    The hashes (one per line, in order) are all there is in memory: 8 bytes a pair, and
    np.unique's sort of them. Collisions of 64-bit hashes would drop a unique pair with
    probability about n^2 / 2^65 (4e-5 for 36M pairs).
    """
    h = np.frombuffer(hashes, dtype=np.uint64) if len(hashes) else np.zeros(0, np.uint64)
    _, first = np.unique(h, return_index=True)
    keep = np.zeros(len(h), dtype=bool)
    keep[first] = True
    del first, h
    dropped = int(len(keep) - keep.sum())
    with open(src_in, "rb") as fs, open(tgt_in, "rb") as ft, open(src_out, "wb") as os_, open(tgt_out, "wb") as ot:
        for k, (s, t) in zip(keep, zip(fs, ft)):
            if k:
                os_.write(s)
                ot.write(t)
    return dropped


def summary(dropped: dict[str, int], config: CleanConfig) -> str:
    """Every applied rule with its count, zeros included: 'invalid_utf8 0, empty 2, ratio 5'."""
    return ", ".join(f"{rule} {dropped.get(rule, 0)}" for rule in config.active())
