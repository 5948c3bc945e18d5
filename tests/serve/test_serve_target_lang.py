"""A multilingual model served: each request names its target language, whose token its lines get before they are
batched; one the model lacks is a 422, as is a server started with a --target-lang the model lacks."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.data.vocab import Vocab, train_bpe  # noqa: E402
from tests.support.fake_service import FakeService, client, ready  # noqa: E402
from tests.support.spm import BYTE_PIECES  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


class Multilingual(FakeService):
    """The fake model with a vocabulary that has the tokens >>de<< and >>fr<<; it records each batch's lines."""

    def _load(self) -> None:  # all of it before the batcher: the server is ready once that exists
        self.vocab = Vocab.from_bytes(
            train_bpe(["a man runs", "the dog sits"] * 20, BYTE_PIECES + 40, (">>de<<", ">>fr<<"))
        )
        self.seen: list[str] = []
        record = self.decode
        self.decode = lambda lines, config: self.seen.extend(lines) or record(lines, config)
        super()._load()


def test_each_request_takes_its_target_language():
    service = Multilingual()
    with client(service) as http:
        ready(http)
        assert http.post("/translate", json={"text": ["a man"], "target_lang": "fr"}).status_code == 200
        assert http.post("/translate", json={"text": ["a man"]}).status_code == 200
        assert service.seen == [">>fr<< a man", "a man"]
        bad = http.post("/translate", json={"text": ["a man"], "target_lang": "cs"})
        assert (
            bad.status_code == 422
            and bad.json()["error"] == "the model has no target-language token >>cs<<: it knows de, fr."
        )
        assert http.post("/translate", json={"text": ["a"], "target_lang": 3}).status_code == 422
        assert http.post("/translate", json={"text": ["a"], "target_lang": "b c"}).status_code == 422
        assert http.post("/translate", json={"text": ["a"], "target_lang": ">>de<<"}).status_code == 200
        assert service.seen[2:] == [">>de<< a"] and http.get("/health").status_code == 200  # no batch failed


def test_the_servers_target_lang_is_the_default_of_every_request():
    service = Multilingual(target_lang="de")
    with client(service) as http:
        ready(http)
        assert http.post("/translate", json={"text": ["a man"]}).status_code == 200
        assert http.post("/translate", json={"text": ["a man"], "target_lang": "fr"}).status_code == 200
        assert http.post("/translate", json={"text": [">>fr<< a man"]}).status_code == 200  # a line's own token wins
        assert service.seen == [">>de<< a man", ">>fr<< a man", ">>fr<< a man"]
