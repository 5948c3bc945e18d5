"""Confidence through a real `mtkit serve`: `"confidence": true` in mtkit's API and LibreTranslate's gives each
translation the confidence `mtkit translate --confidence` gives it (the calibrator beside the model, else the
default; with `serve --reverse-model`, that model's score too); without it, the answers are as they were."""

from __future__ import annotations

import functools
from typing import Any

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

import mtkit  # noqa: E402
from mtkit.decode.confidence import Confidence  # noqa: E402
from tests.support.serve import Server  # noqa: E402

LINES = ["a big dog runs in the park", "the man plays", "", "a child plays with the red ball"]


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    srv = Server(cli_model, tmp_path_factory.mktemp("confidence"), "--languages", "en-de", "--batch-wait-ms", "5")
    yield srv
    srv.stop()


@functools.cache
def expected(model: Any, reverse: Any = None) -> tuple[list[str], list[float]]:
    """What the Python API says of LINES: translations and their confidences."""
    translator = mtkit.load_translator(str(model))
    rate = Confidence.open(translator, None if reverse is None else str(reverse))
    found = list(translator.translate_stream(LINES, confidence=rate))
    return [t.text for t in found], [t.confidence for t in found]  # type: ignore[misc]


def native(server: Server, **extra: Any) -> dict[str, Any]:
    answer = server.post("/translate", json={"text": LINES, **extra})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_mtkits_api_gives_each_translation_its_confidence(server, cli_model):
    texts, confidences = expected(cli_model)
    rated = native(server, confidence=True)
    assert rated["translations"] == texts == native(server)["translations"]
    assert rated["confidences"] == pytest.approx(confidences, abs=1e-6)
    assert all(0 <= c <= 1 for c in rated["confidences"]) and rated["confidences"][2] == 1.0  # an empty line: right
    assert "confidences" not in native(server) and "confidences" not in native(server, confidence=False)
    bad = server.post("/translate", json={"text": LINES, "confidence": "yes"})
    assert bad.status_code == 422 and bad.json()["error"] == 'confidence must be true or false, got "yes".'
    assert server.get("/info").json()["confidence"] == {"calibrated": False, "reverse_model": None}


def test_libretranslates_translate_adds_confidence_only_when_asked(server, cli_model):
    _, confidences = expected(cli_model)
    todo = [line for line in LINES if line]
    many = server.post("/translate", json={"q": todo, "source": "en", "target": "de", "confidence": True}).json()
    assert many["confidence"] == pytest.approx([c for line, c in zip(LINES, confidences) if line], abs=1e-6)
    one = server.post("/translate", data={"q": todo[0], "source": "en", "target": "de", "confidence": "true"}).json()
    assert one["confidence"] == pytest.approx(confidences[0], abs=1e-6)
    plain = server.post("/translate", json={"q": todo[0], "source": "en", "target": "de"}).json()
    assert set(plain) == {"translatedText"}  # what LibreTranslate's clients get: nothing new
    html = server.post("/translate", json={"q": "<p>a dog</p>", "source": "en", "target": "de", "format": "html",
                                           "confidence": True})  # fmt: skip
    assert html.status_code == 400 and "format text" in html.json()["error"]


def test_a_reverse_model_adds_its_score(cli_model, tmp_path):
    srv = Server(cli_model, tmp_path, "--languages", "en-de", "--reverse-model", str(cli_model))
    try:
        _, forward_only = expected(cli_model)
        _, both = expected(cli_model, reverse=cli_model)
        rated = native(srv, confidence=True)["confidences"]
        assert rated == pytest.approx(both, abs=1e-6) and rated != pytest.approx(forward_only, abs=1e-6)
        assert srv.get("/info").json()["confidence"]["reverse_model"] == str(cli_model)
    finally:
        srv.stop()
