"""Batches searched several at once: worker processes forked from this one, each running one PyTorch thread.

As Marian's `--cpu-threads` and CTranslate2's `inter_threads` do: one search leaves one of two cores idle while
Python works out each step, and two threads would wait for each other on Python's lock. The workers are forked
as the pool is made, and each inherits a copy-on-write view of one object, the pool's state (a Translator with
its models): the weights are shared, never sent.

A job is a function of that state, `Callable[[S], R]`: a `functools.partial` binding every argument but the
first of a module-level function, e.g. `partial(search_batch, ids=..., config=...)`. It travels to a worker
by pickling (the function by its qualified name, the bound arguments by value) and runs there as
`job(state)`; a type checker follows it as a plain call.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import multiprocessing
import os
import signal
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from mtkit.errors import MtkitError

S = TypeVar("S")  # the state the workers inherit
R = TypeVar("R")  # a job's result

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends (<linux/prctl.h>)

# In a worker process: the state of the pool it was forked for (`WorkerPool.__init__`); None elsewhere.
_FORKED: Any = None


def _start_worker(parent: int) -> None:
    """A worker's first act: one PyTorch thread (see `WorkerPool`), and an end with its parent.

    A worker blocks on its job queue, whose write end it inherited too, so a parent that is killed
    (SIGTERM, SIGKILL) would leave it waiting forever: the kernel sends it SIGTERM when the parent ends
    (Linux's PR_SET_PDEATHSIG), and one whose parent already ended before that took hold leaves at once.
    """
    import torch  # here, not above: CTranslate2's path imports this module, and runs no torch

    torch.set_num_threads(1)
    for signum in (signal.SIGTERM, signal.SIGHUP):  # the parent's handlers (mtkit/interrupts.py) are not a worker's
        signal.signal(signum, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0 or os.getppid() != parent:
        os._exit(1)


def _run_job(job: Callable[[Any], R]) -> R:
    """A job, run in a worker process against the state it inherited."""
    assert _FORKED is not None, "a worker runs only jobs of the pool it was forked for"
    return job(_FORKED)


class WorkerPool(Generic[S]):
    """`workers` processes (Linux), forked now, each with one PyTorch thread and a copy-on-write view of `state`.

    One thread each, because GNU OpenMP cannot start threads in a process forked from one that ran OpenMP
    threads of its own (it hangs); one thread runs no OpenMP at all. The pool keeps no reference to `state`
    (an owner that holds the pool stays free to be collected), and its processes end with it, with `close()`,
    or with this process.
    """

    def __init__(self, state: S, workers: int) -> None:
        global _FORKED
        _FORKED = state
        try:
            executor = concurrent.futures.ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
            executor.submit(int).result()  # every worker is forked at the first job, while _FORKED is `state`
        finally:
            _FORKED = None
        self._executor: concurrent.futures.ProcessPoolExecutor | None = executor
        weakref.finalize(self, executor.shutdown, wait=False, cancel_futures=True)

    @property
    def closed(self) -> bool:
        """Whether the workers were stopped (`close()`, or one of them died)."""
        return self._executor is None

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (none once closed)."""
        return list(getattr(self._executor, "_processes", None) or {})

    def run(self, jobs: Sequence[Callable[[S], R]]) -> Iterator[tuple[int, R]]:
        """(index, result) of each job, as each is done, `workers` at a time; a job's error ends the stream.

        A consumer that stops early (an error, a closed stream) cancels the jobs not yet started. A worker that
        dies (the out-of-memory killer) closes the pool and ends the stream with one MtkitError.
        """
        if self._executor is None:
            raise MtkitError("the decoding workers were stopped (close()); start a new pool.")
        futures: dict[concurrent.futures.Future[R], int] = {}
        try:
            for k, job in enumerate(jobs):  # a worker that died while idle breaks the pool here already
                futures[self._executor.submit(_run_job, job)] = k
            for future in concurrent.futures.as_completed(futures):
                yield futures[future], future.result()
        except BrokenProcessPool as e:
            self.close()
            raise MtkitError(
                "a decoding worker stopped before its batch was done (out of memory?); "
                "try fewer --workers or a smaller --batch-tokens."
            ) from e
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        """Stop the worker processes at once, their jobs unfinished."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        # Python before 3.14 has no public way to stop a job that has started: end the processes themselves,
        # then let the pool's own thread see them gone and reap them (a second waiter could miss their end).
        for process in list((getattr(executor, "_processes", None) or {}).values()):
            process.terminate()
        executor.shutdown(wait=True, cancel_futures=True)
