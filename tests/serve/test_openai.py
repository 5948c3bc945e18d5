"""The OpenAI-compatible endpoint on a real `mtkit serve`, through the official `openai` client with `base_url`: the
direction from the model id or the prompt, the text from the last user message, streaming, /v1/models, and free chat
refused with OpenAI's error shape."""

from __future__ import annotations

import pytest

for _name in ("httpx", "fastapi", "uvicorn", "openai"):
    pytest.importorskip(_name)

import openai  # noqa: E402

from tests.support.corpora import synthetic_pairs  # noqa: E402
from tests.support.serve import Server, keyed_server  # noqa: E402

LINES = synthetic_pairs(20, seed=11)[0][:3]
KEY = "k3y-for-tests"


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("openai")
    srv = keyed_server(cli_model, tmp, f"{KEY} name=tools\n", "--batch-wait-ms", "5")
    yield srv
    srv.stop()


def native(server: Server, lines: list[str]) -> list[str]:
    answer = server.post("/translate", json={"text": lines}, headers={"Authorization": f"Bearer {KEY}"})
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"]


def client(server: Server, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def ask(server: Server, model: str, messages: list[dict[str, str]]) -> str:
    answer = client(server).chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
    assert answer.choices[0].finish_reason == "stop"
    return answer.choices[0].message.content or ""


def test_the_direction_from_the_model_id_or_the_prompt(server):
    expected = native(server, LINES[:2])
    assert ask(server, "mtkit-en-de", [{"role": "user", "content": LINES[0]}]) == expected[0]
    system = [{"role": "system", "content": "You are a translator. Translate the user's text into German."}]
    assert ask(server, "gpt-4o-mini", [*system, {"role": "user", "content": LINES[1]}]) == expected[1]
    instructed = f"Translate the following text to German:\n\n{LINES[0]}\n{LINES[1]}"
    assert ask(server, "any", [{"role": "user", "content": instructed}]) == "\n".join(expected)
    wrapped = f"Translate the following source text to de.\nSource Text: {LINES[1]}\nTranslated Text:"
    assert ask(server, "any", [{"role": "user", "content": wrapped}]) == expected[1]


def test_streaming_as_server_sent_events(server):
    stream = client(server).chat.completions.create(
        model="mtkit-en-de", messages=[{"role": "user", "content": LINES[2]}], stream=True
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == native(server, [LINES[2]])[0]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_models_list_the_directions(server):
    assert [m.id for m in client(server).models.list()] == ["mtkit-en-de"]
    assert client(server).models.retrieve("mtkit-en-de").owned_by == "mtkit"
    with pytest.raises(openai.NotFoundError):
        client(server).models.retrieve("mtkit-fr-de")


def test_free_chat_is_refused_in_openais_shape(server):
    with pytest.raises(openai.BadRequestError) as refused:
        ask(server, "gpt-4o", [{"role": "user", "content": "What is the capital of France?"}])
    assert "does not chat" in refused.value.message and refused.value.body["type"] == "invalid_request_error"


def test_a_wrong_key_is_an_authentication_error(server):
    with pytest.raises(openai.AuthenticationError):
        client(server, "nope").chat.completions.create(
            model="mtkit-en-de", messages=[{"role": "user", "content": "a dog"}]
        )


def test_the_target_named_in_the_prompt_among_several():
    from mtkit.serve.languages import Directions
    from mtkit.serve.openai import parse_chat
    from mtkit.serve.payload import RequestError

    dirs = Directions((("en", "de"), ("en", "fr")), tokens=True)

    def target(model: str, *messages: tuple[str, str]) -> str:
        return parse_chat({"model": model, "messages": [{"role": r, "content": c} for r, c in messages]}, dirs).target

    assert target("gpt-4o", ("system", "Translate the text into French."), ("user", "a dog")) == "fr"
    assert target("any", ("user", "Please translate to de: a dog")) == "de"
    assert target("mtkit-en-fr", ("user", "a dog")) == "fr"
    chat = parse_chat({"model": "x", "messages": [{"role": "user", "content": "Translate to French:\na dog"}]}, dirs)
    assert (chat.target, chat.text) == ("fr", "a dog")
    with pytest.raises(RequestError, match="does not chat"):
        target("gpt-4o", ("user", "Translate this for me: a dog"))  # no target named among two
