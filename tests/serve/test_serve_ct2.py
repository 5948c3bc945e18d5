"""`mtkit serve -m CT2DIR`: a CTranslate2 export behind the server's batching, limits and endpoints."""

from __future__ import annotations

import pytest

for _name in ("httpx", "fastapi", "uvicorn", "ctranslate2"):
    pytest.importorskip(_name)

from mtkit.export import export
from tests.support.serve import Server, translated


@pytest.fixture(scope="module")
def ct2_server(trained_model, tmp_path_factory):
    model = export(trained_model, tmp_path_factory.mktemp("ct2-serve") / "model")
    srv = Server(model, tmp_path_factory.mktemp("serve"), "--batch-wait-ms", "20", "--max-lines", "8")
    yield srv, model
    srv.stop()


def test_translate_agrees_with_mtkit_translate(ct2_server, toy_sentences):
    server, model = ct2_server
    lines = toy_sentences[:6] + [""]
    translations, scores = translated(model, lines)
    answer = server.post("/translate", json={"text": lines})
    assert answer.status_code == 200, answer.text
    assert answer.json()["translations"] == translations
    assert answer.json()["scores"] == pytest.approx(scores, abs=1e-3)


def test_info_and_limits(ct2_server):
    server, _ = ct2_server
    info = server.get("/info").json()
    assert info["models"][0]["kind"] == "ctranslate2" and info["decode"]["lenpen"] == "fairseq"
    too_many = server.post("/translate", json={"text": ["a"] * 9})
    assert too_many.status_code == 413


def test_request_setting_ctranslate2_lacks_is_422(ct2_server):
    server, _ = ct2_server
    answer = server.post("/translate", json={"text": ["small house"], "lenpen": "gnmt", "beam": 4})
    assert answer.status_code == 422 and "--lenpen fairseq" in answer.json()["error"]


def test_a_glossary_is_refused_saying_what_to_do_and_confidence_is_given(ct2_server):
    server, _ = ct2_server
    answer = server.post("/translate", json={"text": ["small house"], "glossary": {"house": "Haus"}})
    assert answer.status_code == 422 and "cannot enforce a glossary" in answer.json()["error"]
    assert "mtkit serve -m MODEL.pt" in answer.json()["error"]
    assert server.get("/info").json()["glossaries"] is False
    rated = server.post("/translate", json={"text": ["small house"], "confidence": True})
    assert rated.status_code == 200 and 0 <= rated.json()["confidences"][0] <= 1
