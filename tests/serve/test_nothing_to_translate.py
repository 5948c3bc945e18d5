"""A text of emoji, symbols and spaces only is given back as it is through every API that takes free text
(LibreTranslate's, DeepL's, OpenAI's), never sent to the model, which would make a sentence of it."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
EMOJI = "🙂👍 !"


def test_emoji_only_comes_back_as_it_is_and_nothing_is_decoded():
    service = EnglishGerman()
    with client(service) as http:
        ready(http)
        lt = http.post("/translate", json={"q": EMOJI, "source": "en", "target": "de"})
        assert lt.status_code == 200 and lt.json() == {"translatedText": EMOJI}
        deepl = http.post("/v2/translate", json={"text": [EMOJI, "a dog"], "target_lang": "DE"})
        assert deepl.status_code == 200 and [t["text"] for t in deepl.json()["translations"]] == [EMOJI, "god a"]
        chat = {"model": "mtkit-en-de", "messages": [{"role": "user", "content": f"{EMOJI}\n\na dog"}]}
        openai = http.post("/v1/chat/completions", json=chat)
        assert openai.status_code == 200 and openai.json()["choices"][0]["message"]["content"] == f"{EMOJI}\n\ngod a"
    assert service.batcher is not None and service.batcher.done["sentences"] == 2  # "a dog", twice
