"""`mtkit serve` over real HTTP: the same translations as `mtkit translate`, own answers under concurrency, 4xx."""

from __future__ import annotations

import json
import threading

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from mtkit.decode.loading import load_translator
from tests.support.corpora import synthetic_pairs
from tests.support.serve import translated
from tests.support.spm import BYTE_PIECES

LINES = synthetic_pairs(40, seed=11)[0][:6] + [""]


@pytest.fixture(scope="module")
def expected(cli_model) -> list[tuple[str, float]]:
    """`mtkit translate --scores` on LINES: (translation, score) per line."""
    texts, scores = translated(cli_model, LINES)
    return list(zip(texts, scores, strict=True))


def test_translate_agrees_with_mtkit_translate(server, expected):
    answer = server.post("/translate", json={"text": LINES})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["translations"] == [text for text, _ in expected]
    assert body["scores"] == pytest.approx([score for _, score in expected], abs=1e-3)
    assert body["model"] == "checkpoint_10.pt"


def test_opennmt_endpoint_agrees_with_mtkit_translate(server, expected):
    answer = server.post("/translator/translate", json=[{"src": line, "id": 100} for line in LINES])
    assert answer.status_code == 200, answer.text
    (items,) = answer.json()
    assert [item["src"] for item in items] == LINES
    assert [item["tgt"] for item in items] == [text for text, _ in expected]
    assert [item["pred_score"] for item in items] == pytest.approx([s for _, s in expected], abs=1e-3)
    assert {item["n_best"] for item in items} == {1}


def test_request_settings_and_nbest(server):
    answer = server.post("/translate", json={"text": LINES[:2], "beam": 3, "nbest": 3})
    assert answer.status_code == 200, answer.text
    nbest = answer.json()["nbest"]
    assert [len(h) for h in nbest] == [3, 3]
    assert [h[0]["text"] for h in nbest] == answer.json()["translations"]
    greedy = load_translator(server.model, device="cpu").translate(LINES[:2], beam=1)
    assert server.post("/translate", json={"text": LINES[:2], "beam": 1}).json()["translations"] == greedy


def test_concurrent_clients_get_their_own_answers(server, expected):
    """Twelve clients at once, each with its own lines (one or two), batched together by the server."""
    answers: dict[int, object] = {}

    def client(i: int) -> None:
        picked = [i % len(LINES), (i * 3 + 1) % len(LINES)][: 1 + i % 2]
        answer = server.post("/translate", json={"text": [LINES[j] for j in picked]})
        answers[i] = (picked, answer.status_code, answer.json())

    threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(answers) == list(range(12))
    for picked, status, body in answers.values():  # type: ignore[misc]
        assert status == 200, body
        assert body["translations"] == [expected[j][0] for j in picked]


def test_health_and_info(server):
    health = server.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ready"
    info = server.get("/info").json()
    (model,) = info["models"]
    assert model["step"] == 10 and model["kind"] == "checkpoint"
    assert model["architecture"]["d_model"] == 64 and model["parameters"] > 0
    assert model["vocab_size"] == 120 + BYTE_PIECES  # conftest's cli_model
    assert info["decode"]["beam"] == 4 and info["limits"]["max_lines"] == 8


BAD = [
    (b'{"text": ["a"', 400, "not valid JSON"),
    (b"", 400, "empty"),
    (b'{"text": ["\xff\xfe"]}', 400, "not valid UTF-8"),
    (b'{"text": ["\\ud800"]}', 422, "not valid Unicode"),
    (b'{"text": "a sentence"}', 422, "text must be a list of strings"),
    (b'{"text": ["a", 3]}', 422, "text must be a list of strings"),
    (b'{"text": []}', 422, "empty list"),
    (b'["a"]', 422, "JSON object"),
    (b'{"txt": ["a"]}', 422, "unknown field(s) txt"),
    (b'{"text": ["a"], "beam": "4"}', 422, "beam must be of type int"),
    (b'{"text": ["a"], "beam": true}', 422, "beam must be of type int"),
    (b'{"text": ["a"], "beam": 0}', 422, "beam must be a positive integer"),
    (b'{"text": ["a"], "beam": 1000}', 422, "more than this server allows"),
    (b'{"text": ["a"], "lenpen": "x"}', 422, "lenpen must be one of"),
    (json.dumps({"text": ["a"] * 9}).encode(), 413, "the limit is 8"),
    (json.dumps({"text": ["a" * 401]}).encode(), 413, "the limit is 400"),
    (b'{"text": ["' + b"a" * 100_000 + b'"]}', 413, "the limit is"),
]


@pytest.mark.parametrize("body,status,says", BAD, ids=[f"{s}-{m}" for _, s, m in BAD])
def test_bad_requests_get_one_sentence(server, body, status, says):
    answer = server.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert says in error and error.endswith(".") and "\n" not in error


OPENNMT_BAD = [
    ([], 422, "empty list"),
    ({"src": "a"}, 422, "JSON list"),
    ([{"id": 100}], 422, 'has no "src"'),
    ([{"src": 3, "id": 100}], 422, 'every "src" must be a string'),
    ([{"src": "a", "id": "x"}], 422, '"id" must be an integer'),
]


@pytest.mark.parametrize("data,status,says", OPENNMT_BAD, ids=[m for _, _, m in OPENNMT_BAD])
def test_bad_opennmt_requests(server, data, status, says):
    answer = server.post("/translator/translate", json=data)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["error"]


def test_unknown_path_and_method(server):
    assert server.get("/nope").status_code == 404
    answer = server.get("/translate")
    assert answer.status_code == 405 and "not allowed" in answer.json()["error"]
    assert server.get("/health").status_code == 200  # still serving
