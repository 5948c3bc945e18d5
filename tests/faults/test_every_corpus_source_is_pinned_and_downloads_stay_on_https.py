"""Every file of every named corpus has a pinned sha256 or a stated reason why not; no redirect leaves https.

The redirect tests run a real urllib chain against a loopback HTTP server. The test has no TLS
certificate, so a test handler carries the `https://` requests over plain HTTP to that server;
everything else (the 302s, urllib's redirect handling, mtkit's refusal) is the real code.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import logging
import threading
import urllib.request

import pytest

from mtkit.data.corpora import UNPINNED_WHY, Registry, default_registry, unpinned
from mtkit.data.corpus_model import Corpus, Member, Part, Source
from mtkit.data.fetch import RECORDED, Fetcher, build_opener
from mtkit.data.prepare import PrepareOptions, prepare
from mtkit.errors import MtkitError

BODY = b"the file's bytes\n" * 100


class PlainTLS(urllib.request.HTTPSHandler):
    """https:// URLs carried over plain HTTP to the loopback server (the test has no certificate)."""

    def https_open(self, req):  # type: ignore[no-untyped-def]
        return self.do_open(http.client.HTTPConnection, req)


@pytest.fixture
def redirecting_server():
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            requests.append(self.path)
            port = self.server.server_address[1]
            where = {"/to-http": f"http://127.0.0.1:{port}/file", "/to-https": f"https://127.0.0.1:{port}/file"}
            if self.path in where:
                self.send_response(302)
                self.send_header("Location", where[self.path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = BODY if self.path.startswith("/file") or self.path.endswith((".en", ".de")) else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", requests
    server.shutdown()
    server.server_close()


def _fetcher(tmp_path) -> Fetcher:
    fetcher = Fetcher(tmp_path / "cache", retries=0, backoff=0.01, timeout=10)
    fetcher.opener = build_opener(PlainTLS())
    return fetcher


def test_a_redirect_from_https_to_http_is_refused(redirecting_server, tmp_path) -> None:
    """fault: an https download redirected to http; expected: one sentence, the http URL never asked, nothing cached."""
    host, requests = redirecting_server
    source = Source("file.tgz", f"https://{host}/to-http", sha256=hashlib.sha256(BODY).hexdigest())
    with pytest.raises(MtkitError, match="which leaves https"):
        _fetcher(tmp_path).fetch(source)
    assert requests == ["/to-http"]  # the plain-http target was never asked for
    assert not any(p.is_file() and p.stat().st_size for p in (tmp_path / "cache").rglob("*"))


def test_a_redirect_that_stays_on_https_is_followed(redirecting_server, tmp_path) -> None:
    """fault: none (the control); expected: an https -> https redirect is followed and the file verified."""
    host, requests = redirecting_server
    source = Source("file.tgz", f"https://{host}/to-https", sha256=hashlib.sha256(BODY).hexdigest())
    got = _fetcher(tmp_path).fetch(source)
    assert requests == ["/to-https", "/file"] and got.path.read_bytes() == BODY


def test_every_source_of_every_named_corpus_is_pinned_or_says_why_not() -> None:
    """fault: a corpus file without a sha256; expected: each is pinned, or listed in UNPINNED_WHY with a reason."""
    registry = default_registry()
    for corpus in registry:
        for source in corpus.sources:
            assert source.sha256 or UNPINNED_WHY.get(source.filename, "").strip(), (corpus.name, source.filename)
            assert source.url.startswith("https://"), source.url
    assert unpinned(registry) == {name: UNPINNED_WHY[name] for name in unpinned(registry)}
    assert set(unpinned(registry)) == set(UNPINNED_WHY)  # no stale entry either


def test_prepare_says_which_downloads_are_unpinned(redirecting_server, tmp_path, caplog) -> None:
    """fault: prepare of a corpus with unpinned files; expected: a warning for each: why, and what was recorded."""
    host, _ = redirecting_server
    sources = tuple(Source(f"t.{lang}", f"http://{host}/t.{lang}", group="test") for lang in ("en", "de"))
    part = Part("t", (("en", Member("t.en")), ("de", Member("t.de"))))
    corpus = Corpus(
        "tiny-en-de", "en", "de", "a test corpus", (("train", (part,)), ("valid", (part,))), sources, vocab_size=8
    )
    opts = PrepareOptions(out=tmp_path / "out", cache=tmp_path / "cache", retries=0, workers=1)
    with caplog.at_level(logging.WARNING, logger="mtkit.data.prepare"):
        record = prepare("tiny-en-de", opts, registry=Registry({"tiny-en-de": corpus}))
    assert {s["checksum"] for s in record["sources"]} == {RECORDED}
    warned = [r.getMessage() for r in caplog.records if "has no pinned sha256" in r.getMessage()]
    assert len(warned) == 2 and all("no published checksum" in w and "recorded now" in w for w in warned)
