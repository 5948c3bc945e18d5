"""Glossaries through mtkit's own API on a real `mtkit serve`: a request's own entries, or a glossary its key made at
/v2/glossaries by its id (another key's is none of its own); their terms come out, a sentence without a term is
translated as without a glossary, a bad entry is one sentence naming it, and the size limits hold. A glossary of
another language pair than the request's is refused (a fake multilingual model, in process)."""

from __future__ import annotations

import re
from typing import Any

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from mtkit.config import DecodeConfig  # noqa: E402
from mtkit.data.vocab import Vocab, train_bpe  # noqa: E402
from mtkit.decode.glossary import Glossary  # noqa: E402
from mtkit.decode.translator import Translation  # noqa: E402
from mtkit.serve.batcher import Batcher  # noqa: E402
from mtkit.serve.glossaries import MAX_BYTES, MAX_ENTRIES, MAX_INLINE_ENTRIES  # noqa: E402
from mtkit.serve.languages import Directions  # noqa: E402
from tests.support.fake_service import FakeService, client, ready  # noqa: E402
from tests.support.serve import Server, keyed_server  # noqa: E402
from tests.support.spm import BYTE_PIECES  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")

ALICE, BOB = "alice-k3y", "bob-k3y"
LINES = ["a big dog runs in the park", "the man plays", "a child plays with the red ball"]
TERMS = {"dog": "Hund", "red ball": "greenen treeen"}


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("glossaries")
    srv = keyed_server(cli_model, tmp, f"{ALICE} name=alice\n{BOB} name=bob\n", "--batch-wait-ms", "5")
    yield srv
    srv.stop()


def post(server: Server, body: dict[str, Any], key: str = ALICE, path: str = "/translate") -> Any:
    return server.post(path, json=body, headers={"Authorization": f"Bearer {key}"})


def translations(server: Server, body: dict[str, Any], key: str = ALICE) -> list[str]:
    answer = post(server, body, key)
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"]


def starts_word(text: str, term: str) -> int:
    """How often `term` begins a word of `text` (the tiny random model may run on into bytes after it)."""
    return len(re.findall(rf"(?<!\w){re.escape(term)}", text))


def test_a_requests_own_entries_are_enforced(server):
    plain = translations(server, {"text": LINES})
    held = translations(server, {"text": LINES, "glossary": TERMS})
    assert starts_word(held[0], "Hund") == 1 and starts_word(plain[0], "Hund") == 0
    assert starts_word(held[2], "greenen treeen") == 1 and starts_word(plain[2], "greenen treeen") == 0
    assert held[1] == plain[1]  # no term: as without a glossary
    assert translations(server, {"text": LINES, "glossary": [list(pair) for pair in TERMS.items()]}) == held


@pytest.mark.parametrize(
    ("glossary", "said"),
    [
        ([["dog", "Hund"], ["cat", ""]], "glossary, entry 2: the target term is empty."),
        ([["dog", "Hund"], ["cat"]], "glossary: entry 2 is not a (source, target) pair of strings."),
        ({"dog": "Hund", "Dog": "Hund"}, "glossary, entry 2: the source term 'Dog' is already entry 1."),
        ({"dog": 3}, "glossary: entry 1 is not a (source, target) pair of strings."),
        ({"dog": "Hu\nnd"}, "glossary, entry 1: the target term holds a control character or line break."),
        ("dog=Hund", 'glossary must be an object {"source term": "target term"} or a list of pairs.'),
        ({}, "glossary has no entries; leave it out to translate without one."),
    ],
)
def test_a_bad_entry_is_one_sentence_naming_it(server, glossary, said):
    answer = post(server, {"text": ["a dog"], "glossary": glossary})
    assert answer.status_code == 422 and answer.json()["error"] == said


def test_a_requests_own_glossary_is_size_limited(server):
    many = {f"w{k}": "x" for k in range(MAX_INLINE_ENTRIES + 1)}
    answer = post(server, {"text": ["a dog"], "glossary": many})
    assert answer.status_code == 413 and "/v2/glossaries" in answer.json()["error"]
    long = post(server, {"text": ["a dog"], "glossary": {"dog": "x" * 1025}})
    assert long.status_code == 422 and "entry 1: a term is longer than 1024 characters" in long.json()["error"]


def test_a_stored_glossary_is_named_by_its_id_and_only_by_its_keys_requests(server):
    entries = "".join(f"{s}\t{t}\n" for s, t in TERMS.items())
    made = post(
        server, {"name": "t", "source_lang": "en", "target_lang": "de", "entries": entries}, path="/v2/glossaries"
    )
    assert made.status_code == 201, made.text
    ident = made.json()["glossary_id"]
    by_id = translations(server, {"text": LINES, "glossary_id": ident})
    assert by_id == translations(server, {"text": LINES, "glossary": TERMS})
    assert starts_word(by_id[0], "Hund") == 1
    theirs = post(server, {"text": LINES, "glossary_id": ident}, key=BOB)
    assert theirs.status_code == 404 and "this key has no glossary" in theirs.json()["error"]
    assert server.get("/v2/glossaries", headers={"Authorization": f"Bearer {BOB}"}).json() == {"glossaries": []}
    both = post(server, {"text": ["a dog"], "glossary_id": ident, "glossary": TERMS})
    assert both.status_code == 422 and "not both" in both.json()["error"]


def test_a_stored_glossary_is_size_limited(server):
    def made(entries: str) -> Any:
        body = {"name": "big", "source_lang": "en", "target_lang": "de", "entries": entries}
        return post(server, body, path="/v2/glossaries")

    answer = made("".join(f"w{k}\tx\n" for k in range(MAX_ENTRIES + 1)))
    assert answer.status_code == 413 and f"at most {MAX_ENTRIES} entries" in answer.json()["message"]
    rows = MAX_BYTES // 2000 + 1  # terms of 1,000 characters: past the bytes before the entries
    answer = made("".join(f"{k:04d}{'s' * 996}\t{'t' * 1000}\n" for k in range(rows)))
    assert answer.status_code == 413 and f"at most {MAX_BYTES}" in answer.json()["message"]
    assert made("".join(f"w{k}\tx\n" for k in range(MAX_ENTRIES))).status_code == 201  # the limit itself is taken
    cased = made("dog\tHund\nDog\tHund\n")  # the decoder could not tell which applies
    assert cased.status_code == 400 and "'Dog' is already entry 1" in cased.json()["message"]


class Recorded(FakeService):
    """The fake model as a multilingual one (en into de and fr, by token), recording each batch's glossary."""

    def _load(self) -> None:
        self.vocab = Vocab.from_bytes(train_bpe(["a man runs", "the dog sits"] * 20, BYTE_PIECES + 40,
                                                (">>de<<", ">>fr<<")))  # fmt: skip
        self.set_directions(Directions((("en", "de"), ("en", "fr")), tokens=True))
        self.glossaries_seen: list[Glossary | None] = []

        def decode(lines: list[str], config: DecodeConfig, glossary: Glossary | None, rate: bool) -> list[Translation]:
            self.glossaries_seen.append(glossary)
            return [Translation(i + 1, [(line[::-1], -0.5)]) for i, line in enumerate(lines)]

        self.info = {"model": "fake.pt"}
        self.batcher = Batcher(decode, len, max_tokens=100, wait_s=0, queue_size=4)


def test_a_glossary_of_another_language_pair_is_refused():
    service = Recorded()
    with client(service) as http:
        ready(http)
        made = http.post("/v2/glossaries", json={"name": "fr", "source_lang": "EN", "target_lang": "FR",
                                                 "entries": "dog\tchien"})  # fmt: skip
        assert made.status_code == 201, made.text
        ident = made.json()["glossary_id"]
        wrong = http.post("/translate", json={"text": ["a dog"], "target_lang": "de", "glossary_id": ident})
        assert wrong.status_code == 422 and "is en-fr, not this request's language pair" in wrong.json()["error"]
        deepl = http.post("/v2/translate", json={"text": ["a dog"], "source_lang": "EN", "target_lang": "DE",
                                                 "glossary_id": ident})  # fmt: skip
        assert deepl.status_code == 400 and "The glossary is en-fr" in deepl.json()["message"]
        assert service.glossaries_seen == []  # nothing decoded
        right = http.post("/translate", json={"text": ["a dog"], "target_lang": "fr", "glossary_id": ident})
        assert right.status_code == 200, right.text
        assert service.glossaries_seen == [Glossary.of({"dog": "chien"})]
