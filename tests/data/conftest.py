"""Fixtures of the data tests: a loopback HTTP server for archives (tests/support/archives.py)."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.support.archives import ArchiveServer, handler


@pytest.fixture
def archive_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    state = ArchiveServer(root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
