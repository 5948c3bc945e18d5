"""GET /, the page to try a model, in real headless Chromium: type a sentence, read its translation off the page.

Skipped, with the reason, where Debian's chromium or chromium-driver is not installed. The screenshot is kept
in the test's temporary directory (and where $MTKIT_PAGE_SHOT names a file, there too).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.browser import Browser, missing
from tests.support.serve import Server

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

SENTENCE = "a b c"
KEY = "page-k3y"


def keep(browser: Browser, tmp_path: Path, name: str) -> Path:
    shot = tmp_path / name
    browser.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if target := os.environ.get("MTKIT_PAGE_SHOT"):
        shutil.copyfile(shot, target)
    return shot


def test_typing_a_sentence_shows_its_translation(cli_model, tmp_path):
    server = Server(cli_model, tmp_path, "--languages", "en-de")
    browser = Browser(tmp_path / "profile")
    try:
        expected = server.post("/translate", json={"text": [SENTENCE]}).json()["translations"][0]
        browser.open(server.url + "/")
        browser.wait("the target languages", lambda: browser.text("#target-lang"))
        assert "German (de)" in browser.text("#target-lang")
        browser.wait("the model's name", lambda: "checkpoint_10.pt" in browser.text("#model"))
        browser.type("#source", SENTENCE)
        shown = browser.wait("the translation", lambda: browser.text("#translation"))
        assert shown == expected.strip()
        assert browser.text("#error") == ""
        keep(browser, tmp_path, "page.png")
        # an error is the server's own sentence: a target the model does not have
        browser.script("const t = document.getElementById('target-lang'); t.append(new Option('fr', 'fr'));"
                       "t.value = 'fr'; t.dispatchEvent(new Event('change'));")  # fmt: skip
        error = browser.wait("the error", lambda: browser.text("#error"))
        assert error == "fr is not supported as a target; this server translates into de."
    finally:
        browser.close()
        server.stop()


def test_with_an_api_key_the_page_asks_for_it(cli_model, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    server = Server(cli_model, tmp_path, "--languages", "en-de", "--api-key-file", str(key_file))
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(server.url + "/")
        browser.wait("the key box", lambda: browser.script("return getComputedStyle(keybox).display") == "block")
        assert browser.text("#model") == ""
        browser.type("#key", KEY + "\n")  # Enter: the change event
        browser.wait("the model's name after the key", lambda: "checkpoint_10.pt" in browser.text("#model"))
        assert browser.script("return getComputedStyle(keybox).display") == "none"
        browser.type("#source", SENTENCE)
        assert browser.wait("the translation", lambda: browser.text("#translation"))
        assert browser.text("#error") == ""
    finally:
        browser.close()
        server.stop()
