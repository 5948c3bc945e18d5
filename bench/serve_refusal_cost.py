"""What the server itself pays to refuse a request of a key past its requests a minute (429), API by API.

    python bench/serve_refusal_cost.py --refusals 4000 --rounds 4 --record docs/results/serve-refusal-cost.json

The app of `mtkit serve --api-keys FILE` is driven in this process, straight through ASGI (no sockets, no HTTP
client, no model: a refusal needs none), with one request of each API sent by a key whose requests this minute
are used up: mtkit's own /translate, LibreTranslate's /translate (its JSON), DeepL's /v2/translate, OpenAI's
/v1/chat/completions and OpenNMT-py's /translator/translate, each with one test-set line as its text. Measured:
the process's CPU time per refusal (`time.process_time`), for each API in turns (rounds), and for a bare ASGI
app that answers 429 at once (`driver`: what this driver itself costs, to subtract). Checked: every answer is 429
with Retry-After, and whether the request's body was read at all (`body_read`: the share of refusals whose ASGI
receive was called). The last line printed is one JSON object; with --record, the run is kept as a record.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Record, cpu_name  # bench/ is a script's sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
KEY = "limited-bench-key"


def requests(line: str) -> dict[str, tuple[str, dict[str, str], bytes]]:
    """Each API's request: its path, its headers beyond Host, its body."""
    bearer = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    chat = {"model": "mtkit-en-de", "messages": [{"role": "user", "content": f"Translate into German: {line}"}]}
    bodies = {
        "mtkit": ("/translate", bearer, {"text": [line]}),
        "libretranslate": ("/translate", bearer, {"q": line, "source": "en", "target": "de"}),
        "deepl": ("/v2/translate", {**bearer, "authorization": f"DeepL-Auth-Key {KEY}"},
                  {"text": [line], "target_lang": "DE"}),
        "openai": ("/v1/chat/completions", bearer, chat),
        "opennmt": ("/translator/translate", bearer, [{"src": line}]),
    }  # fmt: skip
    return {name: (path, headers, json.dumps(body).encode()) for name, (path, headers, body) in bodies.items()}


async def refuse(app: Callable[..., Any], path: str, headers: dict[str, str], body: bytes, n: int) -> tuple[float, int]:
    """`n` requests through `app`: the CPU seconds they took, and how many had their body read."""
    raw = [(b"host", b"127.0.0.1:5000"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read, sent
        if sent:
            return {"type": "http.disconnect"}
        read, sent = read + 1, True
        return {"type": "http.request", "body": body, "more_body": False}

    answers: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answers.append(message)

    start = time.process_time()
    for _ in range(n):
        sent = False
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                 "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": list(raw),
                 "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 5000)}  # fmt: skip
        await app(scope, receive, send)
    cpu = time.process_time() - start
    bad = [a["status"] for a in answers if a["status"] != 429 or b"retry-after" not in dict(a["headers"])]
    if bad or len(answers) != n:
        raise SystemExit(f"{path}: expected {n} answers 429 with Retry-After, got {len(answers)} ({bad[:3]})")
    return cpu, read


async def bare(scope: Any, receive: Any, send: Any) -> None:
    """The driver's own cost: an app that answers 429 at once."""
    await send({"type": "http.response.start", "status": 429, "headers": [(b"retry-after", b"1")]})
    await send({"type": "http.response.body", "body": b""})


def build_app(keys: Path) -> Callable[..., Any]:
    from mtkit.serve.app import create_app
    from mtkit.serve.guard import Access
    from mtkit.serve.keys import KeyFile
    from mtkit.serve.service import ServeSettings, Service

    access = Access(key_file=KeyFile(str(keys)))
    access.keys.usage.admit(access.keys.find(KEY))  # type: ignore[arg-type]  # its one request this minute
    service = Service(ServeSettings(models=("unused.pt",), access=access, languages=(("en", "de"),)))
    return create_app(service)  # its lifespan never runs: no model is loaded, and none is needed to refuse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--refusals", type=int, default=4000, help="refusals of each API in each round")
    ap.add_argument("--rounds", type=int, default=4, help="rounds; the APIs in turns, reversed every other round")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    with gzip.open(TEST, "rt", encoding="utf-8") as f:
        line = next(f).strip()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"
        keys.write_text(f"{KEY} name=limited requests_per_minute=1\n", encoding="utf-8")
        keys.chmod(0o600)
        app = build_app(keys)
        shapes = requests(line)
        names = ["driver", *shapes]
        passes: list[dict[str, Any]] = []
        loop = asyncio.new_event_loop()
        for path, headers, body in shapes.values():  # a warm-up, and every API's answer checked once
            loop.run_until_complete(refuse(app, path, headers, body, 50))
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                path, headers, body = shapes.get(name, shapes["mtkit"])
                cpu, read = loop.run_until_complete(refuse(bare if name == "driver" else app, path, headers, body,
                                                           args.refusals))  # fmt: skip
                passes.append({"round": r, "api": name, "refusals": args.refusals, "cpu_s": round(cpu, 4),
                               "body_read": read})  # fmt: skip
                print(f"round {r} {name:15s} {1e6 * cpu / args.refusals:7.1f} us CPU a refusal, body read {read}x")
        loop.close()
    results: dict[str, Any] = {}
    driver = statistics.median(p["cpu_s"] / p["refusals"] for p in passes if p["api"] == "driver")
    for name in names:
        mine = [p for p in passes if p["api"] == name]
        us = statistics.median(1e6 * p["cpu_s"] / p["refusals"] for p in mine)
        read = sum(p["body_read"] for p in mine) / sum(p["refusals"] for p in mine)
        results[name] = {"us_cpu_a_refusal": round(us, 1), "body_read": round(read, 3)}
        if name != "driver":
            results[name]["us_cpu_less_driver"] = round(us - 1e6 * driver, 1)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"cpu": cpu_name(), "results": results}))
    settings = {"refusals": args.refusals, "rounds": args.rounds, "requests_per_minute": 1,
                "text": "test_2016_flickr.en's first line",
                "driven": "in-process ASGI calls, one event loop"}  # fmt: skip
    record.write(args.record, settings, passes, results)


if __name__ == "__main__":
    main()
