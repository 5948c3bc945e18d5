"""Dynamic batching: requests that arrive close together are decoded together, in one worker thread.

Decoding is CPU-bound (and holds the GIL in stretches), so one thread decodes while the
event loop only parses requests and hands answers back. The first waiting request opens a
batch; others with the same decoding settings join it for up to `wait_s` or until the
batch holds `max_tokens` source tokens. Each request carries a `concurrent.futures.Future`
that gets its own translations (in its own order) or the batch's error.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

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
            if len(self._queue) >= self.queue_size:
                raise QueueFull()
            self._queue.append(job)
            self._cond.notify()
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Take no new jobs, decode every queued one, then stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)

    def _work(self) -> None:
        while (batch := self._take_batch()) is not None:
            self._run(batch)
        logger.info("decoder thread: queue drained, stopping.")

    def _take_batch(self) -> list[Job] | None:
        """Block for a first job, then gather compatible ones until the window closes or the batch is full."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None  # closed and drained
            batch = [self._queue.popleft()]
            deadline = time.monotonic() + self.wait_s
            while True:
                self._gather(batch)
                left = deadline - time.monotonic()
                if self._closed or left <= 0 or sum(j.tokens for j in batch) >= self.max_tokens:
                    break
                self._cond.wait(left)
        return [job for job in batch if job.future.set_running_or_notify_cancel()]  # callers gone: skip

    def _gather(self, batch: list[Job]) -> None:
        """Move queued jobs with the batch's settings into it, in arrival order, while the tokens fit."""
        tokens = sum(j.tokens for j in batch)
        for job in list(self._queue):
            if job.config == batch[0].config and tokens + job.tokens <= self.max_tokens:
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
            logger.error("decoding a batch of %d request(s), %d line(s) failed: %s", len(batch), len(lines), exc)
            for job in batch:
                job.future.set_exception(exc)
            return
        self.done["batches"] += 1
        self.done["requests"] += len(batch)
        self.done["sentences"] += len(lines)
        start = 0
        for job in batch:
            job.future.set_result(translations[start : start + len(job.lines)])
            start += len(job.lines)
