"""Dynamic batching: requests that arrive close together are decoded together, in one worker thread.

Decoding is CPU-bound (and holds the GIL in stretches), so one thread decodes while the
event loop only parses requests and hands answers back. The first waiting request opens a
batch; others with the same decoding settings join it for up to `wait_s` or until the
batch holds `max_tokens` source tokens. Each request carries a `concurrent.futures.Future`
that gets its own translations (in its own order) or the batch's error. The batcher counts
the batches that failed in a row, for /health; `abandon` fails every job at once when a
shutdown's drain time is up.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from mtkit.config import DecodeConfig
from mtkit.decode.translator import Translation

logger = logging.getLogger(__name__)

Decode = Callable[[list[str], DecodeConfig], list[Translation]]


class QueueFull(Exception):
    """The bounded queue holds `queue_size` requests already: the caller should come back later."""


class Closed(Exception):
    """The batcher is draining for shutdown and takes no new requests."""


@dataclass
class Job:
    """One request: its lines, its settings, its size in source tokens, and where its answer goes."""

    lines: list[str]
    config: DecodeConfig
    tokens: int
    future: Future = field(default_factory=Future)


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
        self._thread = threading.Thread(target=self._work, name="mtkit-serve-decoder", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Requests waiting, not counting the batch being decoded."""
        with self._cond:
            return len(self._queue)

    def submit(self, lines: list[str], config: DecodeConfig) -> Future:
        """Queue `lines` for decoding; raises QueueFull or Closed at once rather than wait."""
        job = Job(lines, config, self._count_tokens(lines))
        with self._cond:
            if self._closed:
                raise Closed()
            if len(self._queue) >= self.queue_size:  # jobs whose caller gave up (cancelled) make room first
                self._queue = collections.deque(j for j in self._queue if not j.future.cancelled())
            if len(self._queue) >= self.queue_size:
                raise QueueFull()
            self._queue.append(job)
            self._cond.notify()
        return job.future

    def close(self, timeout: float | None = None) -> bool:
        """Take no new jobs, decode every queued one, then stop the worker; False if `timeout` came first."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def abandon(self) -> int:
        """Take no new jobs and fail every queued and running one with Closed now; how many were failed.

        The batch being decoded runs on (a decode call cannot be interrupted), but its answers are dropped.
        """
        with self._cond:
            self._closed = True
            jobs = [*self._queue, *self._running]
            self._queue.clear()
            self._cond.notify()
        return sum(_settle(job.future, error=Closed()) for job in jobs)

    def _work(self) -> None:
        while (batch := self._take_batch()) is not None:
            self._run(batch)
            with self._cond:
                self._running = []
        logger.info("decoder thread: queue drained, stopping.")

    def _take_batch(self) -> list[Job] | None:
        """Block for a first job, then gather compatible ones until the window closes or the batch is full."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None  # closed and drained
            while self._queue and self._queue[0].future.cancelled():
                self._queue.popleft()
            if not self._queue:
                return [] if not self._closed else None
            batch = [self._queue.popleft()]
            deadline = time.monotonic() + self.wait_s
            while True:
                self._gather(batch)
                left = deadline - time.monotonic()
                if self._closed or left <= 0 or sum(j.tokens for j in batch) >= self.max_tokens:
                    break
                self._cond.wait(left)
            self._running = [job for job in batch if job.future.set_running_or_notify_cancel()]  # callers gone: skip
            return self._running

    def _gather(self, batch: list[Job]) -> None:
        """Move queued jobs with the batch's settings into it, in arrival order, while the tokens fit."""
        tokens = sum(j.tokens for j in batch)
        for job in list(self._queue):
            if job.future.cancelled():  # its caller left or gave up: it takes no room in a batch
                self._queue.remove(job)
            elif job.config == batch[0].config and tokens + job.tokens <= self.max_tokens:
                self._queue.remove(job)
                batch.append(job)
                tokens += job.tokens

    def _run(self, batch: list[Job]) -> None:
        """Decode the batch's lines in one call and give each job its slice; an error fails this batch only."""
        if not batch:
            return
        lines = [line for job in batch for line in job.lines]
        try:
            translations = self._decode(lines, batch[0].config)
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
            _settle(job.future, result=translations[start : start + len(job.lines)])
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
