"""Files through the server: LibreTranslate's /translate_file and /download_file, over mtkit/documents/, on the fake
model (it reverses each line): the structure kept, the link downloadable without a key, every refusal one sentence."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.serve.guard import Access  # noqa: E402
from mtkit.serve.payload import Limits  # noqa: E402
from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
KEY = "k3y-for-tests"
SRT = b"1\n00:00:01,000 --> 00:00:02,000\nA dog runs.\n\n2\n00:00:03,000 --> 00:00:04,500\nA cat sleeps.\n"
TEXT = b"A dog runs.\n\nA cat sleeps.\n"


def post_file(http, name: str, data: bytes, **fields: str):  # noqa: ANN001, ANN201
    form = {"source": "en", "target": "de", **fields}
    return http.post("/translate_file", files={"file": (name, data)}, data=form)


def test_a_file_comes_back_translated_with_its_structure_kept():
    service = EnglishGerman(access=Access(api_key=KEY))
    with client(service) as http:
        ready(http)
        answer = post_file(http, "talk.srt", SRT, api_key=KEY)
        assert answer.status_code == 200, answer.text
        link = answer.json()["translatedFileUrl"]
        assert link.startswith("http://127.0.0.1:5000/download_file/") and link.endswith(".talk.srt")
        got = http.get(link.removeprefix("http://127.0.0.1:5000"))  # no key: the link is what lets one download
        assert got.status_code == 200 and got.headers["content-disposition"] == 'attachment; filename="talk.srt"'
        assert got.content.splitlines()[:2] == SRT.splitlines()[:2]  # the cue's number and timing, byte for byte
        assert b".snur god A" in got.content and b"00:00:03,000 --> 00:00:04,500" in got.content
        text = post_file(http, "notes.txt", TEXT, api_key=KEY)
        assert text.status_code == 200
        path = text.json()["translatedFileUrl"].removeprefix("http://127.0.0.1:5000")
        assert http.get(path).content.split(b"\n\n")[0] == b".snur god A"  # paragraphs kept apart
        assert http.get("/download_file/0123.notes.txt").status_code == 404


def test_file_refusals_are_one_sentence():
    with client(EnglishGerman(limits=Limits(max_file_bytes=100))) as http:
        ready(http)
        for answer, needle in [
            (post_file(http, "a.exe", b"MZ"), "is not a file this server translates"),
            (post_file(http, "big.txt", b"a" * 101), "the limit is 100"),
            (http.post("/translate_file", data={"source": "en", "target": "de"}), "no file parameter"),
            (post_file(http, "a.txt", b"a dog", target="fr"), "en to fr is not a direction"),
            (post_file(http, "a.srt", b"\x00\x01 not subtitles"), "not SubRip"),
        ]:
            assert answer.status_code == 400, answer.text
            (message,) = answer.json().values()
            assert needle in message and message.endswith("."), message
