"""The one cleaning runner: rules (mtkit/data/rules.py) applied to parallel files, streamed, spread over processes.

Pairs travel in chunks of `chunk_pairs` lines through a pool of forked worker processes, at most `2 * workers`
chunks in flight, so memory does not grow with the corpus. A worker decodes its chunk (a pair with a side that
is not UTF-8 is dropped and counted as `invalid_utf8`, with its first file:line positions), makes each side the
text the rules see (`Text`), and computes every rule it can: the `PAIR` rules' verdicts and the `STREAM` rules'
scores. The main process takes the results in input order and finishes each pair as the rules' `ORDER` says:
the `STREAM` rules keep in order (they hold what was kept before), the `MODEL` rules score what is left. A pair
is counted under the first rule that drops it, exactly as if the rules ran one after the other on one process.

Resuming is the caller's (mtkit/data/webclean.py): `run(..., skip=N)` starts after N pairs, and a `STREAM`
rule's state is its `added` hashes, which the caller logs and restores.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.data.normalize import normalizer, remove_non_printing
from mtkit.data.rules import MODEL, ORDER, PAIR, STREAM, Rule
from mtkit.errors import MtkitError
from mtkit.files import open_binary

NORMALIZE, STRIP, AS_READ = "normalize", "strip", "as read"
MAX_EXAMPLES = 20  # invalid_utf8 positions kept


@dataclass(frozen=True)
class Text:
    """What a line becomes: `NORMALIZE` (prepare: Moses punctuation normalisation and non-printing characters,
    normalize.py; the text is written), `STRIP` (prepare without normalisation) or `AS_READ` (`mtkit clean`: the
    rules see the line without its line end, the line is written as read)."""

    src_lang: str
    tgt_lang: str
    mode: str = AS_READ

    def load(self) -> None:
        """Build the normalisers before forking, so that every worker inherits them ready."""
        if self.mode == NORMALIZE:
            normalizer(self.src_lang), normalizer(self.tgt_lang)

    def sides(self, lines: list[str], lang: str) -> tuple[list[str], list[str]]:
        """(the texts the rules see, the lines to write) of one side's decoded lines."""
        if self.mode == AS_READ:
            return [line.rstrip("\r\n") for line in lines], lines
        if self.mode == STRIP:
            texts = [line.strip() for line in lines]
        else:
            norm = normalizer(lang).normalize
            texts = [remove_non_printing(norm(line)) for line in lines]
        return texts, texts


@dataclass
class Stats:
    """Pairs read, kept, and dropped by each rule (`names`, in order); the first invalid_utf8 positions."""

    pairs_in: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    invalid_utf8_at: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, names: Sequence[str]) -> Stats:
        return cls(dropped=dict.fromkeys(names, 0))

    def add(self, other: Stats) -> None:
        self.pairs_in += other.pairs_in
        self.kept += other.kept
        for rule, n in other.dropped.items():
            self.dropped[rule] = self.dropped.get(rule, 0) + n
        room = MAX_EXAMPLES - len(self.invalid_utf8_at)
        self.invalid_utf8_at.extend(other.invalid_utf8_at[: max(0, room)])


@dataclass
class Batch:
    """One chunk's outcome: its counts, and the kept pairs' lines (to write, without line ends) and texts."""

    stats: Stats
    lines: tuple[list[str], list[str]]
    texts: tuple[list[str], list[str]]

    def encoded(self, side: int) -> bytes:
        return "".join(line + "\n" for line in self.lines[side]).encode()


# --------------------------------------------------------------------------- the worker side
@dataclass(frozen=True)
class _Job:
    src: bytes  # the chunk's lines, each ending in b"\n" (except perhaps the file's last line)
    tgt: bytes
    n: int
    first_line: int  # 1-based line number of the chunk's first line
    labels: tuple[str, str]


@dataclass
class _Result:
    stats: Stats  # invalid_utf8 and the drops of the PAIR rules before the first other rule
    lines: tuple[list[str], list[str]]  # of the pairs those rules keep
    texts: tuple[list[str], list[str]]
    later: list[int]  # per pair: the place of the first later PAIR rule that drops it, or len(rules)
    scores: dict[int, list[Any]]  # STREAM rules' scores by place, per pair (None where a rule before dropped it)


def _decode(blob: bytes, n: int) -> list[str | None]:
    """The chunk's lines as text (split at '\n' only); None for a line that is not UTF-8."""
    try:
        lines: list[str | None] = blob.decode("utf-8").split("\n")  # type: ignore[assignment]
    except UnicodeDecodeError:  # rare: find the bad lines one by one
        out: list[str | None] = []
        for raw in blob.split(b"\n"):
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        lines = out
    if len(lines) == n + 1 and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True)
class _Work:
    """What a worker does with a chunk: the rules it can compute."""

    rules: tuple[Rule, ...]
    text: Text
    names: tuple[str, ...]

    @property
    def first_other(self) -> int:
        """The place of the first rule that is not a PAIR one: the worker counts the drops of those before it."""
        return next((k for k, rule in enumerate(self.rules) if rule.kind != PAIR), len(self.rules))

    def __call__(self, job: _Job) -> _Result:
        srcs, tgts = _decode(job.src, job.n), _decode(job.tgt, job.n)
        if len(srcs) != job.n or len(tgts) != job.n:  # the reader split lines the same way: cannot happen
            raise RuntimeError(f"chunk of {job.n} pairs split into {len(srcs)}/{len(tgts)} lines")
        stats = Stats.of(self.names)
        stats.pairs_in = job.n
        good_s: list[str] = []
        good_t: list[str] = []
        for i, (s, t) in enumerate(zip(srcs, tgts)):
            if s is None or t is None:
                stats.dropped["invalid_utf8"] += 1
                if len(stats.invalid_utf8_at) < MAX_EXAMPLES:
                    stats.invalid_utf8_at.append(
                        f"{job.labels[0] if s is None else job.labels[1]}:{job.first_line + i}"
                    )
            else:
                good_s.append(s)
                good_t.append(t)
        (text_s, line_s), (text_t, line_t) = (
            self.text.sides(good_s, self.text.src_lang),
            self.text.sides(good_t, self.text.tgt_lang),
        )
        alive = list(range(len(text_s)))
        first_other = self.first_other
        for rule in self.rules[:first_other]:  # the drops counted here
            mask = rule.keep(rule.score([text_s[i] for i in alive], [text_t[i] for i in alive]))
            stats.dropped[rule.name] += mask.count(False)
            alive = [i for i, ok in zip(alive, mask) if ok]
        later = [len(self.rules)] * len(alive)
        scores: dict[int, list[Any]] = {}
        live = list(range(len(alive)))  # places in `alive` that no later PAIR rule dropped
        for k in range(first_other, len(self.rules)):
            rule = self.rules[k]
            if rule.kind == MODEL:
                continue
            got = rule.score([text_s[alive[j]] for j in live], [text_t[alive[j]] for j in live])
            if rule.kind == STREAM:
                scores[k] = [None] * len(alive)
                for j, score in zip(live, got):
                    scores[k][j] = score
                continue
            mask = rule.keep(got)
            for j, ok in zip(live, mask):
                if not ok:
                    later[j] = k
            live = [j for j, ok in zip(live, mask) if ok]
        lines = ([line_s[i] for i in alive], [line_t[i] for i in alive])
        return _Result(stats, lines, ([text_s[i] for i in alive], [text_t[i] for i in alive]), later, scores)


_WORK: _Work | None = None  # a forked worker's, set by the pool's initializer


def _start_worker(work: _Work) -> None:
    """Workers leave signals to the main process: Ctrl-C reaches the whole process group, and the main
    process answers it (or SIGTERM) by terminating the pool, which must then end a worker quietly."""
    global _WORK
    _WORK = work
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal's, like Ctrl-C's: the main process answers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_job(job: _Job) -> _Result:
    assert _WORK is not None
    return _WORK(job)


# --------------------------------------------------------------------------- the main side
class Runner:
    """Applies `rules` (in `ORDER`) to parallel files; a context manager owning the worker pool.

    `counted` names the rules the stats list (zeros included), in order; by default invalid_utf8 and the rules."""

    def __init__(
        self,
        rules: Sequence[Rule],
        text: Text,
        *,
        workers: int | None = None,
        chunk_pairs: int = 10_000,
        counted: Sequence[str] | None = None,
    ):
        places = [ORDER.index(rule.name) for rule in rules]
        if places != sorted(places):
            raise ValueError(f"rules out of order: {[rule.name for rule in rules]}")
        names = tuple(counted or ("invalid_utf8", *(rule.name for rule in rules)))
        self.rules, self.text = tuple(rules), text
        self.work = _Work(tuple(rules), text, names)
        self.workers = max(1, workers if workers else (os.cpu_count() or 1))
        self.chunk_pairs = chunk_pairs
        self._pool: Any = None

    def __enter__(self) -> Runner:
        self.text.load()
        for rule in self.rules:
            rule.load()
        if self.workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            # fork, not spawn: a spawned child re-imports `__main__`, which for `python -m mtkit` is the CLI
            # itself; a forked one inherits the rules ready (normalisers, the language model).
            ctx = multiprocessing.get_context("fork")
            self._pool = ctx.Pool(self.workers, initializer=_start_worker, initargs=(self.work,))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.terminate() if exc[0] else self._pool.close()
            self._pool.join()
            self._pool = None

    def run(self, src: Path, tgt: Path, labels: tuple[str, str] | None = None, *, skip: int = 0) -> Iterator[Batch]:
        """The batches of SRC/TGT after their first `skip` pairs, in order (the caller counted the files equal)."""
        jobs = self._jobs(src, tgt, labels or (str(src), str(tgt)), skip)
        if self._pool is None:
            results: Iterator[_Result] = map(self.work, jobs)
        else:
            results = self._pooled(jobs)
        for result in results:
            yield self._finish(result)

    def _jobs(self, src: Path, tgt: Path, labels: tuple[str, str], skip: int) -> Iterator[_Job]:
        with open_binary(src) as fs, open_binary(tgt) as ft:
            for _ in itertools.islice(zip(fs, ft), skip):
                pass
            first = skip + 1
            while True:
                src_lines = list(itertools.islice(fs, self.chunk_pairs))
                tgt_lines = list(itertools.islice(ft, self.chunk_pairs))
                if not src_lines and not tgt_lines:
                    return
                if len(src_lines) != len(tgt_lines):  # counted beforehand; only a file changing under us gets here
                    raise MtkitError(f"{labels[0]} and {labels[1]} changed while being read.")
                yield _Job(b"".join(src_lines), b"".join(tgt_lines), len(src_lines), first, labels)
                first += len(src_lines)

    def _pooled(self, jobs: Iterator[_Job]) -> Iterator[_Result]:
        pending: collections.deque[Any] = collections.deque()
        for job in jobs:
            pending.append(self._pool.apply_async(_run_job, (job,)))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def _finish(self, result: _Result) -> Batch:
        """The rules from the first STREAM or MODEL one on, in order, over the pairs the worker's rules kept."""
        stats, (text_s, text_t) = result.stats, result.texts
        alive = list(range(len(text_s)))
        for k in range(self.work.first_other, len(self.rules)):
            rule = self.rules[k]
            if rule.kind == STREAM:
                mask = rule.keep([result.scores[k][j] for j in alive])
            elif rule.kind == MODEL:
                mask = rule.keep(rule.score([text_s[j] for j in alive], [text_t[j] for j in alive]))
            else:
                mask = [result.later[j] != k for j in alive]
            stats.dropped[rule.name] += mask.count(False)
            alive = [j for j, ok in zip(alive, mask) if ok]
        stats.kept = len(alive)
        lines = ([result.lines[0][j] for j in alive], [result.lines[1][j] for j in alive])
        return Batch(stats, lines, ([text_s[j] for j in alive], [text_t[j] for j in alive]))


def first_drops(rules: Sequence[Rule], sources: list[str], targets: list[str]) -> list[str | None]:
    """The rule that drops each pair of texts (None: kept), the rules applied one after the other in this process,
    as the runner counts them: what a report of each rule's catch needs (recipes/multi30k-noisy/noise.py)."""
    dropped_by: list[str | None] = [None] * len(sources)
    alive = list(range(len(sources)))
    for rule in rules:
        mask = rule.keep(rule.score([sources[i] for i in alive], [targets[i] for i in alive]))
        for i, ok in zip(alive, mask):
            if not ok:
                dropped_by[i] = rule.name
        alive = [i for i, ok in zip(alive, mask) if ok]
    return dropped_by
