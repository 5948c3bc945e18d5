"""`mtkit serve --decoder-process`: the model searches in a forked process of its own (mtkit/serve/decoder.py), with
the same translations and alignments as in the server's own thread, a new process after one dies, and one sentence
for a model or setting it cannot run with."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from mtkit.config import DecodeConfig
from mtkit.decode.glossary import Glossary
from mtkit.errors import MtkitError
from mtkit.serve import decoder
from mtkit.serve.payload import RequestError
from mtkit.serve.service import ServeSettings, Service
from tests.support.serve import wait_until

LINES = ["green dog", "a small red house", "the cat runs"]
PAIRS = [(["green", "dog"], ["grün", "hund"])]
GLOSSARY = Glossary.of({"dog": "Vierbeiner"})


def loaded(model: str, **settings: Any) -> Service:
    service = Service(ServeSettings(models=(model,), device="cpu", **settings))
    failed = threading.Event()
    service.start_loading(failed.set)
    wait_until(lambda: service.ready or failed.is_set(), 120, "the model to load")
    assert service.ready, service.error
    return service


def use(service: Service, config: DecodeConfig) -> tuple[list[Any], ...]:
    """Plain translations, with a glossary enforced and each rated (both travel to the process and back), and an
    alignment."""

    async def each() -> tuple[list[Any], ...]:
        plain = await service.translate(LINES, config)
        termed = await service.translate(LINES, config, glossary=GLOSSARY, confidence=True)
        return plain, termed, await service.align(PAIRS, "")

    return asyncio.run(each())


@pytest.fixture(scope="module")
def in_thread(cli_model):
    """What the server's own thread gives, beam and greedy, with the alignment: what the process must give."""
    service = loaded(str(cli_model))
    try:
        found = {beam: use(service, DecodeConfig(beam=beam)) for beam in (4, 1)}
        for _, termed, _ in found.values():  # what the process must match holds the terms and the ratings
            assert "Vierbeiner" in termed[0].text and all(t.confidence is not None for t in termed)
        yield found
    finally:
        service.close()


@pytest.mark.parametrize("beam", [4, 1])
def test_the_process_translates_and_aligns_as_the_thread_does(cli_model, in_thread, beam):
    service = loaded(str(cli_model), decoder_process=True)
    try:
        assert isinstance(service.searcher, decoder.DecoderProcess) and service.info["decoder_process"] is True
        pid = service.searcher.pid
        assert pid is not None and pid != os.getpid()
        # From here on the server's own copy of the model cannot search: what answers comes from the process,
        # which was forked with the model as it was.
        assert service.translator is not None
        service.translator.translate_stream = None  # type: ignore[assignment, method-assign]
        service.translator.align = None  # type: ignore[assignment, method-assign]
        assert use(service, DecodeConfig(beam=beam)) == in_thread[beam]
        assert service.searcher.pid == pid
    finally:
        service.close()
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 30, "the decoder process to end with the server")


def test_a_decoder_process_that_dies_fails_its_batch_and_the_next_forks_a_new_one(cli_model, in_thread):
    service = loaded(str(cli_model), decoder_process=True)
    try:
        assert isinstance(service.searcher, decoder.DecoderProcess)
        first = service.searcher.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with pytest.raises(RequestError) as failed:
            asyncio.run(service.translate(LINES, DecodeConfig(beam=4)))
        assert failed.value.status == 500 and "the decoder process stopped" in str(failed.value)
        assert use(service, DecodeConfig(beam=4)) == in_thread[4]
        assert service.searcher.pid not in (None, first)
    finally:
        service.close()


def engine(**kwargs: Any) -> Any:
    return SimpleNamespace(engine=SimpleNamespace(**{"parallel": "processes", **kwargs}), device="cpu")


@pytest.mark.parametrize(
    ("translator", "threads", "said"),
    [
        (engine(parallel="threads"), 0, "CTranslate2 already searches outside Python's lock"),
        (SimpleNamespace(engine=SimpleNamespace(parallel="processes"), device="cuda"), 0, "on the CPU only"),
        (engine(), 2, "runs one PyTorch thread"),
    ],
)
def test_what_a_decoder_process_cannot_run_is_one_sentence(translator, threads, said):
    with pytest.raises(MtkitError, match=said):
        decoder.check(translator, threads)
    decoder.check(engine(), 1)  # one thread, mtkit's engine, on the CPU: runs


def test_a_decoder_process_off_linux_is_one_sentence(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(MtkitError, match="needs Linux"):
        decoder.check(engine(), 1)


@pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None, reason="AOTInductor needs a C++ compiler (g++ or $CXX)"
)
def test_a_decoder_process_decodes_lone_lines_through_the_compiled_packages_it_loads_itself(
    cli_model, in_thread, tmp_path, monkeypatch
):
    """`--compile on` with `--decoder-process`: each lone line's search runs in the forked process through the
    packages that process built (they appear in the cache directory it inherited), with the thread's greedy
    translations (scores up to fp32 rounding); the server's own copy of the model searches nothing."""
    monkeypatch.setenv("MTKIT_CACHE", str(tmp_path))
    service = loaded(str(cli_model), decoder_process=True, compile="on")
    try:
        assert service.translator is not None
        service.translator.translate_stream = None  # type: ignore[assignment, method-assign]
        found = [asyncio.run(service.translate([line], DecodeConfig(beam=1)))[0] for line in LINES]
    finally:
        service.close()
    expected = in_thread[1][0]
    assert [t.text for t in found] == [t.text for t in expected]
    assert [t.score for t in found] == pytest.approx([t.score for t in expected], abs=1e-5)
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "compiled").glob("*.pt2")) == ["encoder", "greedy"]


def test_a_server_asked_for_two_threads_in_its_decoder_process_stops_with_the_reason(cli_model):
    service = Service(ServeSettings(models=(str(cli_model),), device="cpu", decoder_process=True, threads=2))
    failed = threading.Event()
    service.start_loading(failed.set)
    wait_until(failed.is_set, 120, "the load to fail")
    assert not service.ready and "--decoder-process runs one PyTorch thread" in str(service.error)
