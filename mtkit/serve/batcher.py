"""Dynamic batching: requests that arrive close together are decoded together, in one worker thread.

Decoding is CPU-bound (and holds the GIL in stretches), so one thread decodes while the event loop only parses
requests and hands answers back. The first waiting request opens a batch; others with the same decoding settings
and the same glossary join it for up to `wait_s` or until the batch holds `max_tokens` source tokens (a glossary
applies to every line of a batch, so requests with different ones never share one). A request that asks for
confidence has its whole batch rated, and only the requests that asked get it: a few features a line, cheap beside
the search (with `serve --reverse-model`, that model's forced decode of each line too), where a batch of its own
would cost the batching. The window opens only while requests come close together: a request that arrives more than
`wait_s` after the one before it (a lone client, a quiet server) is decoded at once, since nothing says company is
coming, and waiting would only add `wait_s` to its latency. The window counts from the first request's arrival, so
a request that waited out a busy decoder goes with whatever came meanwhile, without a new wait.

Each request carries a `concurrent.futures.Future` that gets its own translations (in its own
order) or the batch's error. The batcher counts the batches that failed in a row, for /health;
`abandon` fails every job at once when a shutdown's drain time is up.

Every use of the model runs in this one thread: `call` queues other work (the markup's alignment
pass) for it, and a server loads the model in it too (`start=False`, then `work()` in the loading
thread). PyTorch's OpenMP keeps a team of threads for each thread that runs a parallel operation,
so two such threads make more threads than cores, and waking them between operations then costs what
the operations do: a sentence took about twice as long in a second thread (docs/benchmarks.md, "Figures behind the
code's choices": this module).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from mtkit.config import DecodeConfig
from mtkit.decode.glossary import Glossary
from mtkit.decode.translator import Translation

logger = logging.getLogger(__name__)

# A batch's lines, their settings, their glossary (None: none), and whether to rate them: their translations.
Decode = Callable[[list[str], DecodeConfig, Glossary | None, bool], list[Translation]]


class QueueFull(Exception):
    """The bounded queue holds `queue_size` requests already: the caller should come back later."""


class Closed(Exception):
    """The batcher is draining for shutdown and takes no new requests."""


@dataclass
class Job:
    """One request: its lines, its settings and glossary, whether it asked for confidence, its size in source
    tokens, and where its answer goes."""

    lines: list[str]
    config: DecodeConfig
    tokens: int
    glossary: Glossary | None = None
    confidence: bool = False
    future: Future = field(default_factory=Future)
    company: bool = False  # it came within the window of the request before it: more may follow
    arrived: float = 0.0  # time.monotonic() at submit


class Batcher:
    """A bounded queue of jobs and the one thread that decodes them in dynamic batches."""

    def __init__(
        self,
        decode: Decode,
        count_tokens: Callable[[Sequence[str]], int],
        *,
        max_tokens: int,
        wait_s: float,
        queue_size: int,
        start: bool = True,
    ) -> None:
        if max_tokens < 1 or queue_size < 1 or wait_s < 0:
            raise ValueError("max_tokens and queue_size must be positive and wait_s >= 0")
        self._decode, self._count_tokens = decode, count_tokens
        self.max_tokens, self.wait_s, self.queue_size = max_tokens, wait_s, queue_size
        self._queue: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self.done = {"batches": 0, "requests": 0, "sentences": 0}  # decoded so far (for /health and benchmarks)
        self.failed_in_a_row = 0  # batches whose decoding raised, since the last that did not
        self.last_failure = 0.0  # time.monotonic() of the latest failed batch
        self.last_error = ""
        self._running: list[Job] = []
        self._last_arrival = -float("inf")  # time.monotonic() of the latest submit
        self._calls: collections.deque[tuple[Callable[[], Any], Future]] = collections.deque()
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self.work, name="mtkit-serve-decoder", daemon=True)
            self._thread.start()

    @property
    def started(self) -> bool:
        """Whether a thread decodes (or is about to): one started here, or one that called `work`."""
        with self._cond:
            return self._thread is not None

    @property
    def queued(self) -> int:
        """Requests waiting, not counting the batch being decoded."""
        with self._cond:
            return len(self._queue)

    def submit(
        self, lines: list[str], config: DecodeConfig, glossary: Glossary | None = None, confidence: bool = False
    ) -> Future:
        """Queue `lines` for decoding (with `glossary` enforced; rated when `confidence`); raises QueueFull or
        Closed at once rather than wait."""
        job = Job(lines, config, self._count_tokens(lines), glossary or None, confidence)
        with self._cond:
            if self._closed:
                raise Closed()
            if len(self._queue) >= self.queue_size:  # jobs whose caller gave up (cancelled) make room first
                self._queue = collections.deque(j for j in self._queue if not j.future.cancelled())
            if len(self._queue) >= self.queue_size:
                raise QueueFull()
            now = time.monotonic()
            job.company, job.arrived, self._last_arrival = now - self._last_arrival <= self.wait_s, now, now
            self._queue.append(job)
            self._cond.notify()
        return job.future

    def call(self, fn: Callable[[], Any]) -> Future:
        """Run `fn()` in the decoder thread, before the next batch; its result or error in the Future."""
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise Closed()
            self._calls.append((fn, future))
            self._cond.notify()
        return future

    def close(self, timeout: float | None = None) -> bool:
        """Take no new jobs, decode every queued one, then stop the worker; False if `timeout` came first."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            begun = lambda: self._thread is not None or not (self._queue or self._calls)  # noqa: E731
            if not self._cond.wait_for(begun, timeout):  # work queued, and no thread yet to do it
                return False
            thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def abandon(self) -> int:
        """Take no new jobs and fail every queued and running one with Closed now; how many were failed.

        The batch being decoded runs on (a decode call cannot be interrupted), but its answers are dropped.
        """
        with self._cond:
            self._closed = True
            futures = [job.future for job in (*self._queue, *self._running)] + [f for _, f in self._calls]
            self._queue.clear()
            self._calls.clear()
            self._cond.notify()
        return sum(_settle(future, error=Closed()) for future in futures)

    def work(self) -> None:
        """The decoder thread's loop, until closed and drained; runs in the thread that calls it."""
        with self._cond:
            if self._thread not in (None, threading.current_thread()):
                raise RuntimeError("this batcher has its decoder thread already")
            self._thread = threading.current_thread()
            self._cond.notify_all()
        while (batch := self._take_batch()) is not None:
            while call := self._next_call():
                fn, future = call
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn())
                    except Exception as exc:  # noqa: BLE001 - the caller's error, given to the caller
                        future.set_exception(exc)
            self._run(batch)
            with self._cond:
                self._running = []
        logger.info("decoder thread: queue drained, stopping.")

    def _next_call(self) -> tuple[Callable[[], Any], Future] | None:
        with self._cond:
            return self._calls.popleft() if self._calls else None

    def _take_batch(self) -> list[Job] | None:
        """Block for a first job, then gather compatible ones until the window closes or the batch is full;
        the window stays shut for a first job that came alone (see the module's docstring)."""
        with self._cond:
            while not self._queue and not self._calls and not self._closed:
                self._cond.wait()
            if self._calls and not self._queue:
                return []  # only calls to run
            if not self._queue:
                return None  # closed and drained
            while self._queue and self._queue[0].future.cancelled():
                self._queue.popleft()
            if not self._queue:
                return [] if not self._closed else None
            batch = [self._queue.popleft()]
            deadline = batch[0].arrived + (self.wait_s if batch[0].company else 0.0)
            while True:
                self._gather(batch)
                left = deadline - time.monotonic()
                if self._closed or left <= 0 or sum(j.tokens for j in batch) >= self.max_tokens:
                    break
                self._cond.wait(left)
            self._running = [job for job in batch if job.future.set_running_or_notify_cancel()]  # callers gone: skip
            return self._running

    def _gather(self, batch: list[Job]) -> None:
        """Move queued jobs with the batch's settings and glossary into it, in arrival order, while the tokens fit."""
        tokens, first = sum(j.tokens for j in batch), batch[0]
        for job in list(self._queue):
            if job.future.cancelled():  # its caller left or gave up: it takes no room in a batch
                self._queue.remove(job)
            elif (
                job.config == first.config
                and (job.glossary is first.glossary or job.glossary == first.glossary)  # a stored one: the same object
                and tokens + job.tokens <= self.max_tokens
            ):
                self._queue.remove(job)
                batch.append(job)
                tokens += job.tokens

    def _run(self, batch: list[Job]) -> None:
        """Decode the batch's lines in one call and give each job its slice; an error fails this batch only."""
        if not batch:
            return
        lines = [line for job in batch for line in job.lines]
        try:
            first, rate = batch[0], any(job.confidence for job in batch)
            translations = self._decode(lines, first.config, first.glossary, rate)
            if len(translations) != len(lines):
                raise RuntimeError(f"the decoder returned {len(translations)} translations for {len(lines)} lines")
        except Exception as exc:  # noqa: BLE001 - any failure belongs to this batch's callers, not to the server
            self.failed_in_a_row += 1
            self.last_failure, self.last_error = time.monotonic(), " ".join(f"{type(exc).__name__}: {exc}".split())
            logger.error(
                "decoding a batch of %d request(s), %d line(s) failed: %s", len(batch), len(lines), self.last_error
            )
            for job in batch:
                _settle(job.future, error=exc)
            return
        self.failed_in_a_row = 0
        self.done["batches"] += 1
        self.done["requests"] += len(batch)
        self.done["sentences"] += len(lines)
        start = 0
        for job in batch:
            mine = translations[start : start + len(job.lines)]
            if rate and not job.confidence:  # rated for another request of the batch: not asked for here
                mine = [dataclasses.replace(t, confidence=None) for t in mine]
            _settle(job.future, result=mine)
            start += len(job.lines)


def _settle(future: Future[Any], result: object = None, error: BaseException | None = None) -> bool:
    """Give the future its answer unless it has one already (abandoned at shutdown, or cancelled)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        return False
    return True
