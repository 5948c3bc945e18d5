"""The Batcher alone, with a fake decoder: who is batched with whom, the bound, errors, draining."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from mtkit.config import DecodeConfig
from mtkit.decode.translator import Translation
from mtkit.serve.batcher import Batcher, Closed, QueueFull
from tests.support.serve import wait_until


class FakeDecoder:
    """Upper-cases lines and records each batch; holds each batch until `release` is set (when `hold`)."""

    def __init__(self, hold: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, lines: list[str], config: DecodeConfig) -> list[Translation]:
        self.batches.append(list(lines))
        self.started.release()
        assert self.release.wait(30)
        if "boom" in lines:
            raise RuntimeError("boom")
        return [Translation(i + 1, [(f"{line.upper()}/{config.beam}", -1.0)]) for i, line in enumerate(lines)]


def words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


def make(decoder: FakeDecoder, *, max_tokens: int = 100, wait_s: float = 0.0, queue_size: int = 8) -> Batcher:
    return Batcher(decoder, words, max_tokens=max_tokens, wait_s=wait_s, queue_size=queue_size)


def texts(future: Future) -> list[str]:
    return [t.text for t in future.result(30)]


def occupy(decoder: FakeDecoder, batcher: Batcher) -> Future:
    """A first request that is being decoded (held), so what comes next waits in the queue."""
    first = batcher.submit(["first"], DecodeConfig())
    assert decoder.started.acquire(timeout=30)
    return first


def test_queued_requests_share_a_batch_and_get_their_own_answers():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    first = occupy(decoder, batcher)
    a = batcher.submit(["a b", "c"], DecodeConfig())
    b = batcher.submit(["d"], DecodeConfig())
    decoder.release.set()
    assert texts(first) == ["FIRST/4"] and texts(a) == ["A B/4", "C/4"] and texts(b) == ["D/4"]
    assert decoder.batches == [["first"], ["a b", "c", "d"]]
    batcher.close()


def test_settings_and_max_tokens_split_batches():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder, max_tokens=3)
    occupy(decoder, batcher)
    jobs = [
        batcher.submit(["a b"], DecodeConfig()),
        batcher.submit(["c"], DecodeConfig(beam=2)),
        batcher.submit(["d"], DecodeConfig()),
        batcher.submit(["e f"], DecodeConfig()),
    ]
    decoder.release.set()
    assert [texts(j) for j in jobs] == [["A B/4"], ["C/2"], ["D/4"], ["E F/4"]]
    assert decoder.batches[1:] == [["a b", "d"], ["c"], ["e f"]]  # same settings, within 3 tokens, in order
    batcher.close()


def test_the_window_gathers_requests_that_arrive_later():
    decoder = FakeDecoder()
    batcher = make(decoder, wait_s=30, max_tokens=2)  # closes when full, long before 30 s
    a = batcher.submit(["a"], DecodeConfig())
    wait_until(lambda: batcher.queued == 0, 30, "the worker to take the first request")
    b = batcher.submit(["b"], DecodeConfig())  # arrives while the first one's window is open
    assert texts(a) == ["A/4"] and texts(b) == ["B/4"]
    assert decoder.batches == [["a", "b"]]
    batcher.close()


def test_a_full_queue_refuses_at_once():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder, queue_size=1)
    occupy(decoder, batcher)
    queued = batcher.submit(["a"], DecodeConfig())
    with pytest.raises(QueueFull):
        batcher.submit(["b"], DecodeConfig())
    assert batcher.queued == 1
    decoder.release.set()
    assert texts(queued) == ["A/4"]
    batcher.close()


def test_an_error_fails_only_its_batch():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    occupy(decoder, batcher)
    bad = batcher.submit(["boom"], DecodeConfig(beam=2))
    good = batcher.submit(["fine"], DecodeConfig())
    decoder.release.set()
    with pytest.raises(RuntimeError, match="boom"):
        bad.result(30)
    assert texts(good) == ["FINE/4"]
    assert texts(batcher.submit(["later"], DecodeConfig())) == ["LATER/4"]
    batcher.close()


def test_close_drains_the_queue_then_refuses():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    first = occupy(decoder, batcher)
    queued = [batcher.submit([w], DecodeConfig(beam=b)) for w, b in (("x", 1), ("y", 2))]
    closer = threading.Thread(target=batcher.close)
    closer.start()
    decoder.release.set()
    closer.join(30)
    assert not closer.is_alive()
    assert [texts(f) for f in (first, *queued)] == [["FIRST/4"], ["X/1"], ["Y/2"]]
    with pytest.raises(Closed):
        batcher.submit(["z"], DecodeConfig())


def test_close_ends_the_batching_window():
    decoder = FakeDecoder()
    batcher = make(decoder, wait_s=600)
    waiting = batcher.submit(["a"], DecodeConfig())
    batcher.close()
    assert texts(waiting) == ["A/4"]


def test_a_cancelled_request_is_not_decoded():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    occupy(decoder, batcher)
    gone = batcher.submit(["gone"], DecodeConfig())
    assert gone.cancel()  # the client went away while waiting
    kept = batcher.submit(["kept"], DecodeConfig())
    decoder.release.set()
    assert texts(kept) == ["KEPT/4"]
    batcher.close()
    assert ["gone"] not in decoder.batches
