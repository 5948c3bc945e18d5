"""Fixtures for the data tests: a loopback HTTP server (the archives are in data_fixtures.py).

The server (127.0.0.1, port 0, a thread of the test) serves files from a directory,
honours `Range: bytes=N-`, logs every request, and can be told to cut the connection
once, mid-file, for a given file.
"""

from __future__ import annotations

import http.server
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class Request:
    path: str
    range: str | None


@dataclass
class ArchiveServer:
    root: Path
    requests: list[Request] = field(default_factory=list)
    cut_once: dict[str, int] = field(default_factory=dict)  # file name -> bytes sent before cutting
    url: str = ""

    def gets(self, name: str) -> list[Request]:
        return [r for r in self.requests if r.path == f"/{name}"]


def _handler(server: ArchiveServer):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def do_GET(self) -> None:
            server.requests.append(Request(self.path, self.headers.get("Range")))
            path = server.root / self.path.lstrip("/")
            if not path.is_file():
                self.send_error(404)
                return
            data = path.read_bytes()
            start = 0
            m = re.match(r"bytes=(\d+)-$", self.headers.get("Range") or "")
            if m:
                start = int(m.group(1))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            name = path.name
            if name in server.cut_once:
                cut = server.cut_once.pop(name) - start
                self.wfile.write(body[: max(cut, 0)])
                self.wfile.flush()
                self.close_connection = True
                return  # the connection closes with the body incomplete
            self.wfile.write(body)

    return Handler


@pytest.fixture
def archive_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    state = ArchiveServer(root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
