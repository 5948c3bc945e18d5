"""GET /'s file translation, its script run for real: the page's own script, in Node with a stand-in for the few
page elements it touches, against a real `mtkit serve`. Choosing a file sends it to /translate_file and offers
the translation as a link on this server, which downloads the translated file; a file the server does not take
shows the server's sentence. Skipped where Node (18 or newer: fetch, FormData, File) is not installed; the
Chromium tests (test_page.py) drive the whole page where a browser is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from mtkit.serve.page import HEADERS, PAGE, SCRIPT, _hash  # noqa: E402
from tests.support.serve import Server, keyed_server  # noqa: E402

NODE = shutil.which("node")
KEY = "page-k3y"
SRT = "1\n00:00:01,000 --> 00:00:02,000\na big dog runs\n\n2\n00:00:03,000 --> 00:00:04,000\nthe man plays\n"

# The elements the script touches, as plain objects: a select's value is the first option's unless set; events
# are the listeners the script added, awaited. The script runs as the browser runs it, at the end of the body.
HARNESS = r"""
const [base, scriptPath, fileName, fileText, key] = process.argv.slice(2);
const elements = {};
function element(id) {
  if (!elements[id]) {
    const e = {id, textContent: "", hidden: false, style: {}, files: [], listeners: {}, options: [], accept: ""};
    e.addEventListener = (type, fn) => { (e.listeners[type] ??= []).push(fn); };
    e.append = (...o) => { e.options.push(...o); };
    e.prepend = (o) => { e.options.unshift(o); };
    Object.defineProperty(e, "value", {get: () => e._value ?? (e.options[0] || {}).value ?? "",
                                       set: (v) => { e._value = v; }});
    elements[id] = e;
  }
  return elements[id];
}
globalThis.document = {getElementById: element};
globalThis.sessionStorage = {getItem: () => key, setItem() {}};
globalThis.Option = class { constructor(text, value) { this.text = text; this.value = value; } };
globalThis.location = {href: base + "/"};
const served = globalThis.fetch;
globalThis.fetch = (path, init) => served(new URL(path, base), init);
new Function(require("fs").readFileSync(scriptPath, "utf8"))();
(async () => {
  await new Promise((done) => setTimeout(done, 1500));  // /info, /languages and /frontend/settings answered
  element("file").files = [new File([fileText], fileName)];
  await Promise.all(element("file").listeners.change.map((fn) => fn()));
  const link = element("download");
  console.log(JSON.stringify({href: link.href, download: link.download, shown: !link.hidden, text: link.textContent,
    error: element("error").textContent, accept: element("file").accept, status: element("file-status").textContent}));
})();
"""


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("page-files")
    srv = keyed_server(cli_model, tmp, f"{KEY} name=page\n")
    yield srv
    srv.stop()


def choose(server: Server, tmp_path: Path, name: str, text: str, key: str = KEY) -> dict:
    """What the page shows after its file input got `name` holding `text`."""
    if NODE is None:
        pytest.skip("node is not installed (apt-get install nodejs): the page's script is not run")
    (tmp_path / "harness.js").write_text(HARNESS, encoding="utf-8")
    (tmp_path / "page.js").write_text(SCRIPT, encoding="utf-8")
    args = [NODE, str(tmp_path / "harness.js"), server.url, str(tmp_path / "page.js"), name, text, key]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_chosen_file_comes_back_translated_as_a_link_on_this_server(server, tmp_path):
    shown = choose(server, tmp_path, "talk.srt", SRT)
    assert shown["error"] == "" and shown["status"] == "" and shown["shown"], shown
    assert ".srt" in shown["accept"].split(",") and ".docx" in shown["accept"].split(",")
    assert shown["href"].startswith("/download_file/") and shown["download"] == "talk.srt"
    translated = server.get(shown["href"])  # the link needs no key: its random name is one
    assert translated.status_code == 200, translated.text
    lines = translated.text.splitlines()
    assert lines[:2] == ["1", "00:00:01,000 --> 00:00:02,000"] and "00:00:03,000 --> 00:00:04,000" in lines
    assert "a big dog runs" not in translated.text  # translated, not sent back


def test_a_file_the_server_does_not_take_shows_its_sentence(server, tmp_path):
    shown = choose(server, tmp_path, "tool.exe", "MZ")
    assert not shown["shown"] and "'tool.exe' is not a file this server translates" in shown["error"], shown
    shown = choose(server, tmp_path, "talk.srt", SRT, key="")  # no key: the server's sentence, the key box shown
    assert not shown["shown"] and "API key" in shown["error"], shown


def test_the_page_serves_the_file_input_and_allows_its_script():
    assert '<input id="file" type="file">' in PAGE and '<a id="download" hidden></a>' in PAGE
    assert SCRIPT in PAGE and _hash(SCRIPT) in HEADERS["Content-Security-Policy"]  # the browser runs this script
    assert "connect-src 'self'" in HEADERS["Content-Security-Policy"]  # its upload goes to this server only
