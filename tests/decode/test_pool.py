"""The worker pool: jobs (functions of the state the workers inherit) run in forked processes of one thread each."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from mtkit.decode.pool import WorkerPool
from mtkit.errors import MtkitError
from tests.support.serve import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the workers are Linux processes")


@dataclass
class State:
    """What the workers inherit: never pickled (an Event cannot be), only forked."""

    log: Path
    go: Any = field(default_factory=lambda: multiprocessing.get_context("fork").Event())
    offset: int = 0


def scaled(state: State, *, k: int) -> tuple[int, int, int]:
    """k + the inherited offset, with the process and its PyTorch threads that ran it."""
    return k + state.offset, os.getpid(), torch.get_num_threads()


def broken(state: State, *, k: int) -> int:
    if k == 3:
        raise ValueError(f"job {k} failed")
    return k


def killed(state: State, *, k: int) -> int:
    os._exit(9)  # as the kernel's out-of-memory killer would end it


def logged(state: State, *, k: int) -> int:
    """Says it started, then (but for job 0) waits for the test's go."""
    with open(state.log, "a", encoding="utf-8") as f:
        f.write(f"{k}\n")
    if k != 0:
        state.go.wait(60)  # a liveness bound: the test sets it within milliseconds
    return k


@pytest.fixture
def state(tmp_path) -> State:
    return State(tmp_path / "started.log", offset=100)


def test_every_job_runs_once_in_a_worker_of_one_thread_against_the_inherited_state(state):
    pool = WorkerPool(state, 2)
    try:
        pids = pool.pids
        results = dict(pool.run([partial(scaled, k=k) for k in range(12)]))
    finally:
        pool.close()
    assert sorted(results) == list(range(12))
    assert [value for value, _, _ in (results[k] for k in range(12))] == [100 + k for k in range(12)]
    assert {pid for _, pid, _ in results.values()} <= set(pids) and os.getpid() not in pids and len(pids) == 2
    assert {threads for _, _, threads in results.values()} == {1}
    assert pool.closed and pool.pids == []


def test_a_failing_job_ends_the_stream_with_its_error_and_the_pool_runs_on(state):
    pool = WorkerPool(state, 2)
    try:
        with pytest.raises(ValueError, match="job 3 failed"):
            list(pool.run([partial(broken, k=k) for k in range(8)]))
        assert sorted(k for _, k in pool.run([partial(broken, k=k) for k in (0, 1)])) == [0, 1]
    finally:
        pool.close()


def test_a_worker_that_dies_closes_the_pool_with_one_clear_error(state):
    pool = WorkerPool(state, 2)
    pids = pool.pids
    with pytest.raises(MtkitError, match="a decoding worker stopped before its batch was done"):
        list(pool.run([partial(killed, k=k) for k in range(4)]))
    assert pool.closed and len(pids) == 2 and not any(alive(pid) for pid in pids)
    with pytest.raises(MtkitError, match="stopped"):
        list(pool.run([partial(scaled, k=0)]))


def test_a_worker_that_died_between_jobs_closes_the_pool_with_the_same_error(state):
    """Killed while idle (the pool broken before the next job is handed over): the same one sentence, not the
    executor's own exception, and the pool closed so that its owner can start another."""
    pool = WorkerPool(state, 1)
    (pid,) = pool.pids
    os.kill(pid, signal.SIGKILL)
    # until the executor has seen it (its own flag, which its submit checks): the case a quick test would miss
    wait_until(lambda: bool(getattr(pool._executor, "_broken", False)), 30, "the pool to see its worker gone")
    with pytest.raises(MtkitError, match="a decoding worker stopped before its batch was done"):
        list(pool.run([partial(scaled, k=0)]))
    assert pool.closed


def test_a_consumer_that_stops_cancels_the_jobs_not_yet_started(state):
    pool = WorkerPool(state, 2)
    try:
        stream = pool.run([partial(logged, k=k) for k in range(40)])
        assert next(stream) == (0, 0)  # the others wait for `go`, or in the queue
        stream.close()
        state.go.set()
        # Workers take jobs in order: once these two are done, every earlier job that was still to run has begun.
        assert sorted(k for _, k in pool.run([partial(logged, k=k) for k in (100, 101)])) == [100, 101]
    finally:
        pool.close()
    started = {int(line) for line in state.log.read_text().split()} - {100, 101}
    assert 0 in started and len(started) <= 10  # those already handed to a worker; 30 or more never began


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
