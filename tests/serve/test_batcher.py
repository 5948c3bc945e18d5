"""The Batcher alone, with a fake decoder: who is batched with whom, the bound, errors, draining."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from mtkit.config import DecodeConfig
from mtkit.decode.glossary import Glossary
from mtkit.decode.translator import Translation
from mtkit.serve.batcher import Batcher, Closed, QueueFull
from tests.support.serve import wait_until


class FakeDecoder:
    """Upper-cases lines and records each batch; holds each batch until `release` is set (when `hold`)."""

    def __init__(self, hold: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.glossaries: list[Glossary | None] = []
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(
        self, lines: list[str], config: DecodeConfig, glossary: Glossary | None = None, rate: bool = False
    ) -> list[Translation]:
        self.batches.append(list(lines))
        self.glossaries.append(glossary)
        self.started.release()
        assert self.release.wait(30)
        if "boom" in lines:
            raise RuntimeError("boom")
        return [
            Translation(i + 1, [(f"{line.upper()}/{config.beam}", -1.0)], 0.5 if rate else None)
            for i, line in enumerate(lines)
        ]


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


def test_a_glossary_is_shared_only_by_requests_that_bring_it():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    occupy(decoder, batcher)
    dogs, cats = Glossary.of({"dog": "Hund"}), Glossary.of({"cat": "Katze"})
    jobs = [
        batcher.submit(["a"], DecodeConfig(), dogs),
        batcher.submit(["b"], DecodeConfig()),
        batcher.submit(["c"], DecodeConfig(), cats),
        batcher.submit(["d"], DecodeConfig(), Glossary.of({"dog": "Hund"})),  # the same entries: the same glossary
        batcher.submit(["e"], DecodeConfig(), Glossary.of([])),  # none to enforce: as without one
    ]
    decoder.release.set()
    assert [texts(j) for j in jobs] == [["A/4"], ["B/4"], ["C/4"], ["D/4"], ["E/4"]]
    assert decoder.batches[1:] == [["a", "d"], ["b", "e"], ["c"]]
    assert decoder.glossaries[1:] == [dogs, None, cats]
    batcher.close()


def test_confidence_goes_to_the_requests_that_asked():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    occupy(decoder, batcher)
    asked, not_asked = batcher.submit(["a"], DecodeConfig(), confidence=True), batcher.submit(["b"], DecodeConfig())
    decoder.release.set()
    assert [t.confidence for t in asked.result(30)] == [0.5]  # the batch was rated: one request asked
    assert [t.confidence for t in not_asked.result(30)] == [None]  # and only that one gets it
    assert decoder.batches[1:] == [["a", "b"]]
    batcher.close()


def test_the_window_gathers_requests_that_arrive_later():
    decoder = FakeDecoder()
    batcher = make(decoder, wait_s=30, max_tokens=2)  # closes when full, long before 30 s
    lone = batcher.submit(["lone"], DecodeConfig())  # the first request: nothing came before it
    assert texts(lone) == ["LONE/4"]
    a = batcher.submit(["a"], DecodeConfig())  # within 30 s of the one before: the window opens
    wait_until(lambda: batcher.queued == 0, 30, "the worker to take the request")
    b = batcher.submit(["b"], DecodeConfig())  # arrives while its window is open
    assert texts(a) == ["A/4"] and texts(b) == ["B/4"]
    assert decoder.batches == [["lone"], ["a", "b"]]
    batcher.close()


def test_a_request_that_comes_alone_does_not_wait_for_company():
    decoder = FakeDecoder()
    batcher = make(decoder, wait_s=600)
    assert texts(batcher.submit(["first"], DecodeConfig())) == ["FIRST/4"]  # within 30 s, not 600
    batcher._last_arrival -= 601  # the next request comes more than a window after this one
    assert texts(batcher.submit(["later"], DecodeConfig())) == ["LATER/4"]
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


def test_the_window_counts_from_the_first_requests_arrival():
    """A request that waited out a busy decoder longer than the window is decoded at once when its turn comes."""
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder, wait_s=600)
    first = occupy(decoder, batcher)  # came alone: decoded at once, and held
    waiting = batcher.submit(["a"], DecodeConfig())  # within 600 s of the first: it opens a window
    with batcher._cond:
        batcher._queue[0].arrived -= 601  # as if it had waited in the queue longer than its window
    decoder.release.set()
    assert texts(first) == ["FIRST/4"] and texts(waiting) == ["A/4"]  # within 30 s, not 600
    batcher.close()


def test_calls_run_in_the_decoder_thread_between_batches():
    decoder, where = FakeDecoder(hold=True), []
    batcher = make(decoder)
    first = occupy(decoder, batcher)
    queued = batcher.submit(["a"], DecodeConfig())
    called = batcher.call(lambda: where.append(threading.current_thread()) or "done")
    failed = batcher.call(lambda: 1 / 0)
    decoder.release.set()
    assert called.result(30) == "done" and texts(first) == ["FIRST/4"] and texts(queued) == ["A/4"]
    with pytest.raises(ZeroDivisionError):
        failed.result(30)
    assert where == [batcher._thread] and where[0] is not threading.current_thread()
    batcher.close()


def test_a_batcher_can_decode_in_the_thread_that_loaded_the_model():
    """start=False, then work() in the caller's thread: every use of the model stays in that one thread."""
    seen: list[threading.Thread] = []

    def decode(lines: list[str], config: DecodeConfig, *rest: object) -> list[Translation]:
        seen.append(threading.current_thread())
        return [Translation(1, [(line, 0.0)]) for line in lines]

    batcher = Batcher(decode, words, max_tokens=100, wait_s=0.0, queue_size=8, start=False)
    assert not batcher.started
    loader = threading.Thread(target=batcher.work)  # in a server: the thread that has just loaded the model
    loader.start()
    wait_until(lambda: batcher.started, 30, "the loading thread to begin decoding")
    assert texts(batcher.submit(["x"], DecodeConfig())) == ["x"]
    assert batcher.call(threading.current_thread).result(30) is loader
    with pytest.raises(RuntimeError, match="decoder thread already"):
        batcher.work()  # a second loop would decode in a second thread
    assert batcher.close(30) and not loader.is_alive()
    assert seen == [loader]


def test_abandon_fails_the_calls_not_yet_run():
    decoder = FakeDecoder(hold=True)
    batcher = make(decoder)
    occupy(decoder, batcher)
    pending = batcher.call(lambda: "never")
    assert batcher.abandon() == 2  # the running batch and the call
    with pytest.raises(Closed):
        pending.result(30)
    decoder.release.set()
