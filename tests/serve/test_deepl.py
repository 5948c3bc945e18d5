"""DeepL's API v2 on a real `mtkit serve`, through the official `deepl` client pointed at it with `server_url`:
translate (codes mapped, detection, markup), languages, usage, glossaries (each key its own, their terms enforced in
translations and documents), errors in DeepL's codes (403, 456, 400, 404)."""

from __future__ import annotations

import re

import pytest

for _name in ("httpx", "fastapi", "uvicorn", "deepl"):
    pytest.importorskip(_name)

import deepl  # noqa: E402

from tests.support.corpora import synthetic_pairs  # noqa: E402
from tests.support.serve import Server, keyed_server  # noqa: E402

LINES = synthetic_pairs(20, seed=11)[0][:3]
ALICE, BOB, SMALL = "alice-k3y", "bob-k3y", "small-k3y"


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deepl")
    keys = f"{ALICE} name=alice\n{BOB} name=bob\n{SMALL} name=small characters_per_day=40\n"
    srv = keyed_server(cli_model, tmp, keys, "--batch-wait-ms", "5")
    deepl.http_client.max_network_retries = 0  # a refusal is the answer under test, not something to retry
    yield srv
    srv.stop()


def native(server: Server, lines: list[str]) -> list[str]:
    answer = server.post("/translate", json={"text": lines}, headers={"Authorization": f"Bearer {ALICE}"})
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"]


def client(server: Server, key: str = ALICE) -> deepl.Translator:
    return deepl.Translator(key, server_url=server.url)


def test_translate_text_as_the_client_sends_it(server):
    translator = client(server)
    expected = native(server, LINES)
    one = translator.translate_text(LINES[0], target_lang="DE")
    assert one.text == expected[0] and one.detected_source_lang == "EN"
    many = translator.translate_text(LINES, source_lang="EN", target_lang="de")
    assert [r.text for r in many] == expected and all(r.billed_characters > 0 for r in many)
    options = translator.translate_text(
        LINES[0], target_lang="DE", split_sentences="nonewlines", preserve_formatting=True, context="A caption."
    )
    assert options.text == expected[0]


def test_html_goes_through_the_markup(server):
    result = client(server).translate_text(f"<p>{LINES[0]} <b>x</b></p>", target_lang="DE", tag_handling="html")
    assert result.text.startswith("<p>") and "<b>" in result.text and result.text.endswith("</p>")


def test_languages_and_usage(server):
    translator = client(server, SMALL)
    assert [(lang.code, lang.name) for lang in translator.get_source_languages()] == [("EN", "English")]
    assert [lang.code for lang in translator.get_target_languages()] == ["DE"]
    before = translator.get_usage().character
    assert before.limit == 40
    translator.translate_text("a dog", target_lang="DE")
    assert translator.get_usage().character.count == before.count + len("a dog")


def test_a_key_past_its_characters_a_day_gets_456_and_others_go_on(server):
    with pytest.raises(deepl.QuotaExceededException):
        client(server, SMALL).translate_text("x" * 41, target_lang="DE")
    assert client(server, BOB).translate_text("a dog", target_lang="DE").text


def test_a_wrong_key_is_an_authorization_failure(server):
    with pytest.raises(deepl.AuthorizationException):
        client(server, "not-a-key").translate_text("a dog", target_lang="DE")


def words(text: str, term: str) -> int:
    """How often `term` begins a word of `text` (the tiny random model may run on into bytes after it)."""
    return len(re.findall(rf"(?<!\w){re.escape(term)}", text))


def test_glossaries_are_each_keys_own(server):
    alice, bob = client(server, ALICE), client(server, BOB)
    glossary = alice.create_glossary("animals", "EN", "DE", {"dog": "Hund", "cat": "Katze"})
    assert glossary.entry_count == 2 and glossary.ready
    assert [g.glossary_id for g in alice.list_glossaries()] == [glossary.glossary_id]
    assert alice.get_glossary_entries(glossary) == {"dog": "Hund", "cat": "Katze"}
    assert alice.get_glossary_languages()[0].source_lang == "en"  # lowercase, as DeepL lists them
    assert bob.list_glossaries() == []
    with pytest.raises(deepl.GlossaryNotFoundException):
        bob.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="Glossary not found"):  # nor can another key translate with it
        bob.translate_text("a dog", source_lang="EN", target_lang="DE", glossary=glossary.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        bob.delete_glossary(glossary.glossary_id)
    alice.delete_glossary(glossary)
    assert alice.list_glossaries() == []
    with pytest.raises(deepl.DeepLException, match="Glossary not found"):  # deleted: no longer applied
        alice.translate_text("a dog", source_lang="EN", target_lang="DE", glossary=glossary)


def test_a_glossarys_terms_come_out_and_other_sentences_are_as_without_one(server):
    alice = client(server, ALICE)
    glossary = alice.create_glossary("terms", "EN", "DE", {"dog": "Hund", "red ball": "greenen treeen"})
    lines = ["a big dog runs in the park", "the man plays", "a child plays with the red ball"]
    plain = [r.text for r in alice.translate_text(lines, source_lang="EN", target_lang="DE")]
    held = [r.text for r in alice.translate_text(lines, source_lang="EN", target_lang="DE", glossary=glossary)]
    assert words(held[0], "Hund") == 1 and words(plain[0], "Hund") == 0  # enforced, not what the model says
    assert words(held[2], "greenen treeen") == 1 and words(plain[2], "greenen treeen") == 0  # two words, as one
    assert held[1] == plain[1]  # no term: as without a glossary
    html = alice.translate_text("<p>a <b>dog</b> runs</p>", source_lang="EN", target_lang="DE", tag_handling="html",
                                glossary=glossary)  # fmt: skip
    assert words(html.text, "Hund") == 1 and html.text.startswith("<p>")
    fields = {"text": "a dog", "target_lang": "DE", "glossary_id": glossary.glossary_id}  # DeepL's rule: a glossary
    answer = server.post("/v2/translate", data=fields, headers={"Authorization": f"DeepL-Auth-Key {ALICE}"})
    assert answer.status_code == 400 and "source_lang" in answer.json()["message"]  # needs a source language


def test_a_documents_glossary_is_enforced_too(server, tmp_path):
    alice = client(server, ALICE)
    glossary = alice.create_glossary("doc", "EN", "DE", {"dog": "Hund"})
    source = tmp_path / "talk.srt"
    source.write_text("1\n00:00:01,000 --> 00:00:02,000\na big dog runs\n", encoding="utf-8")
    output = tmp_path / "talk.de.srt"
    alice.translate_document_from_filepath(source, output, source_lang="EN", target_lang="DE", glossary=glossary)
    assert words(output.read_text(encoding="utf-8"), "Hund") == 1
    with pytest.raises(deepl.DeepLException, match="Glossary not found"):
        client(server, BOB).translate_document_upload(source.read_bytes(), source_lang="EN", target_lang="DE",
                                                      filename="a.srt", glossary=glossary.glossary_id)  # fmt: skip


def test_what_the_model_cannot_do_is_refused_not_ignored(server):
    translator = client(server)
    with pytest.raises(deepl.DeepLException, match="formality"):
        translator.translate_text("a dog", target_lang="DE", formality="more")
    with pytest.raises(deepl.DeepLException, match="target_lang"):
        translator.translate_text("a dog", target_lang="FR")
    with pytest.raises(deepl.DeepLException, match="output_format"):
        translator.translate_document_upload(b"a dog", target_lang="DE", filename="a.txt", output_format="docx")


def test_documents_upload_status_and_download(server, tmp_path):
    translator = client(server)
    source = tmp_path / "talk.srt"
    source.write_text(f"1\n00:00:01,000 --> 00:00:02,000\n{LINES[0]}\n\n2\n00:00:03,000 --> 00:00:04,000\n"
                      f"{LINES[1]}\n", encoding="utf-8")  # fmt: skip
    output = tmp_path / "talk.de.srt"
    status = translator.translate_document_from_filepath(source, output, target_lang="DE")
    assert status.done and status.billed_characters >= len(LINES[0]) + len(LINES[1])  # cues joined by a space
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["1", "00:00:01,000 --> 00:00:02,000"] and "00:00:03,000 --> 00:00:04,000" in lines
    handle = translator.translate_document_upload(source.read_bytes(), target_lang="DE", filename="b.srt")
    with pytest.raises(deepl.DeepLException, match="Not found"):  # another key's document is none of its own
        client(server, BOB).translate_document_get_status(handle)
    translator.translate_document_wait_until_done(handle)
    assert translator.translate_document_download(handle).content.startswith(b"1\n00:00:01,000")


def test_deepl_codes_and_the_languages_listed():
    from types import SimpleNamespace

    from mtkit.serve.deepl import base, languages
    from mtkit.serve.languages import Directions

    assert [base(c, "target_lang") for c in ("EN-GB", "en-us", "PT-BR", "ZH-HANS", "de")] == [
        "en",
        "en",
        "pt",
        "zh",
        "de",
    ]
    service = SimpleNamespace(directions=Directions((("de", "en"), ("de", "pt")), tokens=True))
    assert [lang["language"] for lang in languages(service, "target")] == ["EN-GB", "EN-US", "PT-BR", "PT-PT"]  # type: ignore[arg-type]
    assert languages(service, "source") == [{"language": "DE", "name": "German"}]  # type: ignore[arg-type]
