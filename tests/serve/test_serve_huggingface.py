"""`mtkit serve -m HF_DIR`: a Hugging Face Marian directory served as `mtkit translate -m HF_DIR` reads it."""

from __future__ import annotations

import pytest

for _name in ("httpx", "fastapi", "uvicorn", "safetensors"):
    pytest.importorskip(_name)
pytest.importorskip("transformers", reason="the hf extra is not installed: pip install 'mtkit[hf]'")

from mtkit.export import ExportConfig, export
from tests.support.cli import run_cli
from tests.support.serve import Server, translated


@pytest.fixture(scope="module")
def hf_server(trained_model, tmp_path_factory):
    model = export(trained_model, tmp_path_factory.mktemp("hf-serve") / "model", ExportConfig(format="huggingface"))
    srv = Server(model, tmp_path_factory.mktemp("serve"), "--batch-wait-ms", "20")
    yield srv, model
    srv.stop()


def test_translations_and_scores_are_mtkit_translates(hf_server, toy_sentences):
    server, model = hf_server
    lines = toy_sentences[:5]
    translations, scores = translated(model, lines)
    answer = server.post("/translate", json={"text": lines})
    assert answer.status_code == 200, answer.text
    assert answer.json()["translations"] == translations
    assert answer.json()["scores"] == pytest.approx(scores, abs=1e-4)
    info = server.get("/info").json()["models"][0]
    assert info["kind"] == "model" and info["parameters"] > 0


def test_a_directory_that_is_no_model_is_one_sentence_before_the_server_starts(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model\n")
    result = run_cli("serve", "-m", tmp_path, "--port", "0")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "neither a run directory, a CTranslate2 export" in result.stderr and "Hugging Face" in result.stderr
