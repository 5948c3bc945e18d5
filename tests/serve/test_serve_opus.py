"""`mtkit serve -m OPUS_DIR`: an OPUS-MT directory served as `mtkit translate -m OPUS_DIR` reads it."""

from __future__ import annotations

import pytest

for _name in ("httpx", "fastapi", "uvicorn", "safetensors", "transformers"):
    pytest.importorskip(_name)

from tests.support.serve import Server, translated


def test_an_opus_directory_is_served_as_translate_reads_it(opus_dir, tmp_path):
    lines = ["A dog runs in the snow.", ">>deu<< Two men.", ""]
    translations, scores = translated(opus_dir, lines)
    server = Server(opus_dir, tmp_path, "--batch-wait-ms", "20")
    try:
        answer = server.post("/translate", json={"text": lines})
        assert answer.status_code == 200, answer.text
        assert answer.json()["translations"] == translations
        assert answer.json()["scores"] == pytest.approx(scores, abs=1e-4)
    finally:
        server.stop()
