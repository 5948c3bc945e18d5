"""The bad clients of `bench/serve_load.py`: bad requests, idle and slow sockets, requests abandoned unanswered.

Each runs until its `stop` event is set, beside the good clients, and counts what happened:

- `bad_client`: requests refused before any decoding, of each kind of BAD in turn (raw bytes on
  a kept-alive socket, so that the load generator itself costs the shared CPUs little).
- `idle_sockets`: N connections that send nothing, or half a request head (slowloris), reopened
  as soon as the server closes one: the pressure of issue 46 row 2 (400 idle sockets).
- `abandoning_client`: whole heavy requests whose client hangs up before the answer (row 3).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections import Counter
from typing import Any

API_KEY = "set-by-serve-load"  # replaced by bench/serve_load.py before any request is made
AUTH: dict[str, str] = {}
JSON: dict[str, str] = {}


def set_key(key: str) -> None:
    """The server's API key: bad kinds "without a key" show that it needs one; the others send it."""
    global API_KEY
    API_KEY = key
    AUTH.update({"Authorization": f"Bearer {key}"})
    JSON.update({**AUTH, "Content-Type": "application/json"})
    BAD.update(bad_kinds())


def bad_kinds() -> dict[str, tuple[int, dict[str, str], bytes]]:
    """kind -> (expected status, headers, body): refused before any decoding, each in its own way."""
    return {
        "foreign_origin": (403, {**JSON, "Origin": "https://evil.example"}, b'{"text": ["a"]}'),
        "foreign_host": (400, {**JSON, "Host": "evil.example"}, b'{"text": ["a"]}'),
        "no_api_key": (401, {"Content-Type": "application/json"}, b'{"text": ["a"]}'),
        "text_plain": (415, {**AUTH, "Content-Type": "text/plain"}, b'{"text": ["a"]}'),
        "broken_json": (400, JSON, b'{"text": ["a"'),
        "deep_nesting": (422, JSON, b'{"text": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"),
        "huge_number": (422, JSON, b'{"text": ["a"], "beam": ' + b"9" * 5000 + b"}"),
        "huge_alpha": (422, JSON, b'{"text": ["a"], "alpha": 1e308}'),
    }


BAD: dict[str, tuple[int, dict[str, str], bytes]] = {}


def raw_request(kind: str, host: str) -> bytes:
    _, headers, body = BAD[kind]
    head = {"Host": host, **headers, "Content-Length": str(len(body))}
    return ("POST /translate HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode() + body


async def bad_client(url: str, kinds: list[str], gap_s: float, stop: asyncio.Event, out: dict[str, Counter]) -> None:
    """Send bad requests of each kind in turn, one every `gap_s` seconds, until `stop` is set; count the statuses."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    requests = {kind: raw_request(kind, f"{host}:{port}") for kind in kinds}
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    for kind in itertools.cycle(kinds):
        if stop.is_set():
            break
        start = time.perf_counter()
        try:
            if conn is None:
                conn = await asyncio.open_connection(host.strip("[]"), int(port))
            reader, writer = conn
            writer.write(requests[kind])
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
            length = re.search(r"content-length: *(\d+)", head)
            await reader.readexactly(int(length.group(1)) if length else 0)
            out[kind][head.split(" ", 2)[1]] += 1
            if "connection: close" in head:
                writer.close()
                conn = None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            out[kind][type(exc).__name__] += 1
            conn = None
        left = gap_s - (time.perf_counter() - start)
        if left > 0:
            try:
                await asyncio.wait_for(stop.wait(), left)
            except asyncio.TimeoutError:
                pass
    if conn is not None:
        conn[1].close()


def bad_summary(bad: dict[str, Counter], wall: float) -> dict[str, Any]:
    """How many bad requests were sent, per second, and each kind's answers; `unexpected`: not its status."""
    sent = sum(sum(c.values()) for c in bad.values())
    unexpected = {
        kind: {k: v for k, v in answers.items() if k != str(BAD[kind][0])}
        for kind, answers in bad.items()
        if set(answers) - {str(BAD[kind][0])}
    }
    return {
        "sent": sent,
        "per_s": round(sent / wall, 1),
        "answers": {kind: dict(c) for kind, c in bad.items()},
        "unexpected": unexpected,
    }


async def idle_sockets(host: str, port: int, n: int, stop: asyncio.Event, out: Counter) -> None:
    """`n` connections that send nothing (or, every other one, half a request head), each reopened when the
    server closes it, until `stop`; counts the closes and the failed connects."""

    async def one(k: int) -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError as exc:
                out[f"connect_{type(exc).__name__}"] += 1
                await asyncio.sleep(0.5)
                continue
            if k % 2:
                writer.write(f"POST /translate HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Ty".encode())
            out["opened"] += 1
            reading = asyncio.ensure_future(reader.read(65536))
            await asyncio.wait([reading, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                out["closed_by_server"] += 1
            reading.cancel()
            writer.close()

    await asyncio.gather(*(one(k) for k in range(n)))


async def abandoning_client(
    host: str, port: int, lines: list[str], per_s: float, stop: asyncio.Event, out: Counter
) -> None:
    """Whole requests of `lines` sent `per_s` a second, each connection closed 50 ms later, before its answer."""
    body = json.dumps({"text": lines}).encode()
    head = f"POST /translate HTTP/1.1\r\nHost: {host}:{port}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in JSON.items())
    request = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    while not stop.is_set():
        start = time.perf_counter()
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.close()
            out["abandoned"] += 1
        except OSError as exc:
            out[type(exc).__name__] += 1
        try:
            await asyncio.wait_for(stop.wait(), max(0.0, 1 / per_s - (time.perf_counter() - start)))
        except asyncio.TimeoutError:
            pass


def run_spoilers(spec: dict[str, Any], ready: Any, stop: Any, results: Any) -> None:
    """Every bad client of `spec` in this process (bench/serve_load.py starts it, so that the good clients'
    event loop times only them) until `stop` (a multiprocessing Event) is set; the counts go to `results`."""
    set_key(spec["api_key"])

    async def main() -> dict[str, Any]:
        done = asyncio.Event()
        bad: dict[str, Counter] = {kind: Counter() for kind in BAD}
        sockets: Counter = Counter()
        url, kinds, n = spec["url"], list(BAD), spec["bad_clients"]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        gap_s = n / spec["bad_per_s"] if spec["bad_per_s"] > 0 else 0.0
        rotated = [kinds[i % len(kinds) :] + kinds[: i % len(kinds)] for i in range(n)]
        tasks = [asyncio.ensure_future(bad_client(url, k, gap_s, done, bad)) for k in rotated]
        if spec["idle_sockets"]:
            tasks.append(asyncio.ensure_future(idle_sockets(host, int(port), spec["idle_sockets"], done, sockets)))
        if spec["abandon_per_s"]:
            heavy, per_s = spec["heavy"], spec["abandon_per_s"]
            tasks.append(asyncio.ensure_future(abandoning_client(host, int(port), heavy, per_s, done, sockets)))
        start = time.perf_counter()
        while sockets["opened"] < spec["idle_sockets"] and time.perf_counter() - start < 30:
            await asyncio.sleep(0.05)  # the idle sockets are all open before the good clients start
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        done.set()
        await asyncio.gather(*tasks)
        return {"bad": {k: dict(c) for k, c in bad.items()}, "sockets": dict(sockets)}

    results.put(asyncio.run(main()))
