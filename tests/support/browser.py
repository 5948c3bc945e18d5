"""Headless Chromium driven through chromedriver's W3C WebDriver API (plain HTTP, with httpx: no selenium).

Debian's `chromium` and `chromium-driver` packages; `missing()` says which is absent, for a skip reason.
The flags are docs/check_site.py's, plus what keeps a test browser from reaching out (no background
networking, component updates or sync) and a fresh profile in a temporary directory.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1100,700",
]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for name, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if shutil.which(name) is None:
            return f"{name} is not installed (apt-get install {package})"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """One chromedriver process and one session of headless Chromium with its own profile in `profile`."""

    def __init__(self, profile: Path) -> None:
        import httpx

        port = free_port()
        self.driver = subprocess.Popen(
            [shutil.which("chromedriver") or "chromedriver", f"--port={port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.http.get("/status").json()["value"]["ready"]:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.driver.kill()
                raise AssertionError("chromedriver did not start")
            time.sleep(0.1)
        options = {"binary": shutil.which("chromium"), "args": [*FLAGS, f"--user-data-dir={profile}"]}
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = self.http.request(method, path, json=body)
        value = answer.json()["value"]
        if answer.status_code != 200:
            raise AssertionError(f"WebDriver {method} {path}: {value}")
        return value

    def _session(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def find(self, css: str) -> str:
        return str(self._session("POST", "/element", {"using": "css selector", "value": css})[ELEMENT])

    def type(self, css: str, text: str) -> None:
        """Keystrokes into the element, as a user types them (each fires the page's input handler)."""
        self._session("POST", f"/element/{self.find(css)}/value", {"text": text})

    def text(self, css: str) -> str:
        return str(self._session("GET", f"/element/{self.find(css)}/text"))

    def script(self, source: str) -> Any:
        return self._session("POST", "/execute/sync", {"script": source, "args": []})

    def wait(self, what: str, condition: Any, timeout: float = 60) -> Any:
        """Poll `condition()` until it returns something true; fail, naming `what`, after `timeout` s."""
        deadline = time.monotonic() + timeout
        while not (found := condition()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.1)
        return found

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._session("GET", "/screenshot")))

    def close(self) -> None:
        try:
            self._session("DELETE", "")
        finally:
            self.http.close()
            self.driver.terminate()
            self.driver.wait(30)
