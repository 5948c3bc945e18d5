"""Load test of `mtkit serve` on loopback, against the same sentences translated in process, with bad clients.

    python bench/serve_load.py --model M.pt --clients 16,64 --requests 4
    python bench/serve_load.py --model M.pt --clients 24,48 --max-connections 24 --requests 5 --bad-clients 0

For each --clients count, that many clients send --requests one-sentence requests each, one after another; every
answer is checked against `Translator.translate` in this process (all sentences at once and, unless --no-chunks,
CLIENTS at a time: the largest batch they can form). Unless --bad-clients 0, each run is paired with one beside a
bad load (`run_spoilers`), A B B A for --rounds 2, the server limited to --server-nofile descriptors. Reported per
run: sentences/s, latency p50/p95/p99, errors, lost requests, answers unlike the batch's, sentences decoded
together, the server's CPU; with the bad load, each bad kind's answers, the sockets' counts and the good clients'
figures over the clean run's; at the end the server's tracebacks and exit code. --record keeps the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import itertools
import json
import multiprocessing
import re
import secrets
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from harness import ROOT, Record, cpu_name, process_cpu_s, serving  # bench/ is a script's sys.path[0]

KEY = secrets.token_urlsafe(24)  # the server needs it: the bad clients "without a key" show that it does


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="an mtkit model or checkpoint file")
    test = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
    ap.add_argument("--input", default=str(test), help="source text, one sentence a line (.gz is fine)")
    ap.add_argument("--clients", default="16,64", help="concurrent client counts, comma-separated")
    ap.add_argument("--requests", type=int, default=4, help="requests each client sends, one after another")
    ap.add_argument("--beam", type=int, help="server and baseline (default: the model's own)")
    ap.add_argument("--max-len-b", type=int, help="server and baseline; 0 keeps an untrained model's output short")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    ap.add_argument("--no-chunks", action="store_true", help="time the batch baseline on all sentences only")
    ap.add_argument("--bad-clients", type=int, default=8, help="clients sending bad requests (0: no bad runs)")
    ap.add_argument("--bad-per-s", type=float, default=200, help="bad requests a second, all together (0: flood)")
    ap.add_argument("--idle-sockets", type=int, default=400, help="idle or slow connections in the bad load")
    ap.add_argument("--abandon-per-s", type=float, default=4, help="8-sentence requests a second whose client leaves")
    ap.add_argument("--server-nofile", type=int, default=256, help="the server's open-file limit (0: as is)")
    ap.add_argument("--max-connections", type=int, default=0, help="the server's limit (0: its default)")
    ap.add_argument("--rounds", type=int, default=2, help="clean/bad pairs per client count, as A B B A ...")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


# ----------------------------------------------------------------------------------------------------- the bad clients
def kinds(key: str, host: str) -> dict[str, tuple[int, bytes]]:
    """kind -> (expected status, `POST /translate` as bytes): refused before any decoding, each in its own way."""
    js, a = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}, b'{"text": ["a"]}'
    found = {
        "foreign_origin": (403, {**js, "Origin": "https://evil.example"}, a),
        "foreign_host": (400, {**js, "Host": "evil.example"}, a),
        "no_api_key": (401, {"Content-Type": "application/json"}, a),
        "text_plain": (415, {**js, "Content-Type": "text/plain"}, a),
        "broken_json": (400, js, b'{"text": ["a"'),
        "deep_nesting": (422, js, b'{"text": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"),
        "huge_number": (422, js, b'{"text": ["a"], "beam": ' + b"9" * 5000 + b"}"),
        "huge_alpha": (422, js, b'{"text": ["a"], "alpha": 1e308}'),
    }
    return {kind: (status, raw(host, headers, body)) for kind, (status, headers, body) in found.items()}


def raw(host: str, headers: dict[str, str], body: bytes) -> bytes:
    head = {"Host": host, **headers, "Content-Length": str(len(body))}
    return ("POST /translate HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode() + body


async def every(gap_s: float, stop: asyncio.Event, act: Callable[[], Awaitable[None]]) -> None:
    """`act()` every `gap_s` seconds (again at once when it took longer) until `stop` is set."""
    while not stop.is_set():
        start = time.perf_counter()
        await act()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, gap_s - (time.perf_counter() - start)))


def run_spoilers(spec: dict[str, Any], ready: Any, stop: Any, results: Any) -> None:
    """The bad load, in a process of its own, until `stop` (a multiprocessing Event): --bad-clients sending --bad-per-s
    bad requests in all, each kind in turn on a kept-alive connection (raw bytes: the load itself costs little),
    --idle-sockets sending nothing or half a request head, reopened when closed, --abandon-per-s requests of 8
    sentences whose connection closes 50 ms after sending. What each met goes to `results`."""
    host, port = spec["url"].removeprefix("http://").rsplit(":", 1)
    requests = kinds(spec["key"], f"{host}:{port}")
    bad: dict[str, Counter] = {kind: Counter() for kind in requests}
    sockets: Counter = Counter()
    heavy = raw(f"{host}:{port}", {"Authorization": f"Bearer {spec['key']}", "Content-Type": "application/json"},
                json.dumps({"text": spec["heavy"]}).encode())  # fmt: skip

    async def bad_client(first: int, gap_s: float, done: asyncio.Event) -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        order = itertools.islice(itertools.cycle(requests), first, None)

        async def one() -> None:
            nonlocal conn
            kind = next(order)
            try:
                reader, writer = conn = conn or await asyncio.open_connection(host, int(port))
                writer.write(requests[kind][1])
                await writer.drain()
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = re.search(r"content-length: *(\d+)", head)
                await reader.readexactly(int(length[1]) if length else 0)
                bad[kind][head.split(" ", 2)[1]] += 1
                if "connection: close" in head:
                    writer.close()
                    conn = None
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                bad[kind][type(exc).__name__] += 1
                conn = None

        await every(gap_s, done, one)
        if conn is not None:
            conn[1].close()

    async def idle(k: int, done: asyncio.Event) -> None:
        while not done.is_set():
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
            except OSError as exc:
                sockets[f"connect_{type(exc).__name__}"] += 1
                await asyncio.sleep(0.5)
                continue
            writer.write(f"POST /translate HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Ty".encode() if k % 2 else b"")
            sockets["opened"] += 1
            reading = asyncio.ensure_future(reader.read(65536))
            await asyncio.wait([reading, asyncio.ensure_future(done.wait())], return_when=asyncio.FIRST_COMPLETED)
            sockets["closed_by_server"] += reading.done()
            reading.cancel()
            writer.close()

    async def abandon() -> None:
        try:
            _, writer = await asyncio.open_connection(host, int(port))
            writer.write(heavy)
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.close()
            sockets["abandoned"] += 1
        except OSError as exc:
            sockets[type(exc).__name__] += 1

    async def main() -> dict[str, Any]:
        done, n = asyncio.Event(), spec["bad_clients"]
        gap_s = n / spec["bad_per_s"] if spec["bad_per_s"] > 0 else 0.0
        tasks = [bad_client(i, gap_s, done) for i in range(n)] + [idle(k, done) for k in range(spec["idle_sockets"])]
        tasks += [every(1 / spec["abandon_per_s"], done, abandon)] if spec["abandon_per_s"] else []
        running = asyncio.gather(*tasks)
        start = time.perf_counter()
        while sockets["opened"] < spec["idle_sockets"] and time.perf_counter() - start < 30:
            await asyncio.sleep(0.05)  # the idle sockets are all open before the good clients start
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        done.set()
        await running
        return {"bad": {k: dict(c) for k, c in bad.items()}, "sockets": dict(sockets)}

    results.put(asyncio.run(main()))


def bad_summary(bad: dict[str, dict[str, int]], wall: float) -> dict[str, Any]:
    """How many bad requests were sent, a second, and each kind's answers; `unexpected`: not its status."""
    sent = sum(sum(c.values()) for c in bad.values())
    expected = {kind: str(status) for kind, (status, _) in kinds(KEY, "").items()}
    unexpected = {kind: {k: v for k, v in c.items() if k != expected[kind]} for kind, c in bad.items()}
    return {"sent": sent, "per_s": round(sent / wall, 1), "answers": bad,
            "unexpected": {kind: c for kind, c in unexpected.items() if c}}  # fmt: skip


# ----------------------------------------------------------------------------------------------------- the good clients
def decoding(args: argparse.Namespace) -> dict[str, int]:
    return {k: v for k, v in (("beam", args.beam), ("max_len_b", args.max_len_b)) if v is not None}


def batch_baseline(args: argparse.Namespace, lines: list[str], chunks: list[int]) -> tuple[list[str], dict]:
    """The sentences translated in this process all at once, then `chunk` at a time: the translations, the speeds."""
    from mtkit import load_translator

    translator = load_translator(args.model, device="cpu", threads=args.threads, **decoding(args))
    figures: dict[str, Any] = {}
    reference: list[str] = []
    for chunk in [len(lines), *chunks]:
        start = time.perf_counter()
        out = [t for i in range(0, len(lines), chunk) for t in translator.translate(lines[i : i + chunk])]
        wall = time.perf_counter() - start
        name = "all" if chunk == len(lines) else f"{chunk}_at_a_time"
        figures[name] = {"sentences": len(lines), "wall_s": round(wall, 3),
                         "sentences_per_s": round(len(lines) / wall, 2)}  # fmt: skip
        print(f"batch (in process), {name}: {figures[name]}", flush=True)
        reference = reference or out
    return reference, figures


async def health(http: Any, url: str) -> dict[str, Any]:
    """/health's body; a connection the server closed as idle (under the bad load) is tried again."""
    for _ in range(9):
        try:
            return dict((await http.get(url + "/health")).json())
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    return dict((await http.get(url + "/health")).json())


async def load(url: str, pid: int, clients: int, args: argparse.Namespace, lines: list[str], reference: list[str],
               bad_clients: int) -> dict[str, Any]:  # fmt: skip
    """`clients` clients, each --requests requests of its own sentences, beside `bad_clients` bad ones."""
    latency: list[float] = []
    errors: Counter = Counter()
    answered = differ = 0
    order = itertools.cycle(range(len(lines)))
    work = [[next(order) for _ in range(args.requests)] for _ in range(clients)]

    async def client(http: httpx.AsyncClient, picked: list[int]) -> None:
        nonlocal answered, differ
        for i in picked:
            start = time.perf_counter()
            try:
                answer = await http.post(url + "/translate", json={"text": [lines[i]]})
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] += 1
                continue
            latency.append(1000 * (time.perf_counter() - start))
            if answer.status_code != 200:
                errors[str(answer.status_code)] += 1
            elif len(got := answer.json()["translations"]) == 1:
                answered += 1
                differ += got[0] != reference[i]

    spoilers, spoiled = None, {"bad": {}, "sockets": {}}
    if bad_clients:  # in a process of their own: this event loop times the good clients only
        ctx = multiprocessing.get_context("spawn")
        ready, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
        spec = {**vars(args), "url": url, "key": KEY, "heavy": lines[:8], "bad_clients": bad_clients}
        spoilers = ctx.Process(target=run_spoilers, args=(spec, ready, stop, results), daemon=True)
        spoilers.start()
        await asyncio.to_thread(ready.wait, 60)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits, headers={"Authorization": f"Bearer {KEY}"}) as http:
        before = (await health(http, url))["decoded"]
        start, cpu = time.perf_counter(), process_cpu_s(pid)
        await asyncio.gather(*(client(http, w) for w in work))
        wall, cpu = time.perf_counter() - start, process_cpu_s(pid) - cpu
        if spoilers is not None:
            stop.set()
            spoiled = await asyncio.to_thread(results.get, True, 120)
            spoilers.join(60)
        end = await health(http, url)
    batches = end["decoded"]["batches"] - before["batches"]
    q = statistics.quantiles(latency, n=100, method="inclusive") if len(latency) > 1 else latency * 99
    return {
        "clients": clients, "requests": len(work) * args.requests, "answered": answered,
        "wall_s": round(wall, 3), "sentences_per_s": round(answered / wall, 2),
        **{f"p{p}_ms": round(q[p - 1], 1) if q else None for p in (50, 95, 99)},
        "errors": dict(errors), "lost": len(work) * args.requests - answered - sum(errors.values()),
        "differ_from_batch": differ, "server_batches": batches,
        "sentences_per_batch": round((end["decoded"]["sentences"] - before["sentences"]) / max(batches, 1), 2),
        "server_cpu_s": round(cpu, 2), "server_dropped": end.get("dropped"), "latency_ms": latency,
        **({"bad_clients": bad_clients, "bad": bad_summary(spoiled["bad"], wall),
            "sockets": spoiled["sockets"]} if bad_clients else {}),
    }  # fmt: skip


def compare(clean: dict[str, Any], mixed: dict[str, Any]) -> dict[str, Any]:
    """The good clients' figures with the bad load over without (1.0: unaffected); the server's CPU per bad request."""
    ratio = {k: round(mixed[k] / clean[k], 3) for k in ("sentences_per_s", "p50_ms", "p95_ms", "p99_ms")
             if clean.get(k) and mixed.get(k) is not None}  # fmt: skip
    sent = mixed["bad"]["sent"]
    extra = round(1000 * (mixed["server_cpu_s"] - clean["server_cpu_s"]) / sent, 2) if sent else None
    return {**ratio, "server_cpu_ms_per_bad_request": extra}


def main() -> None:
    args = parse_args()
    record = Record()
    counts = [int(c) for c in args.clients.split(",")]
    with (gzip.open if args.input.endswith(".gz") else open)(args.input, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in itertools.islice(f, max(counts) * args.requests)]
    reference, baseline = batch_baseline(args, lines, [] if args.no_chunks else counts)
    options = {"threads": args.threads or None, "max_connections": args.max_connections or None, **decoding(args)}
    serve = ["-m", args.model, "--queue-size", "256"]
    serve += [f"--{k.replace('_', '-')}={v}" for k, v in options.items() if v is not None]
    runs, mixed, effect, passes = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        with serving(serve, log, env={"MTKIT_SERVE_API_KEY": KEY}, nofile=args.server_nofile) as (proc, url):
            for clients in counts:  # clean and bad runs paired and interleaved, A B B A, so shared load hits both
                for r in range(args.rounds if args.bad_clients else 1):
                    for bad in [(0, args.bad_clients), (args.bad_clients, 0)][r % 2] if args.bad_clients else (0,):
                        run = asyncio.run(load(url, proc.pid, clients, args, lines, reference, bad))
                        passes.append({"clients": clients, "bad": bad, "latency_ms": run.pop("latency_ms")})
                        (mixed if bad else runs).append(run)
                        print(f"serve, {clients} clients{f' + {bad} bad' if bad else ''}, round {r + 1}: {run}")
                    if args.bad_clients:
                        effect.append({"clients": clients, "round": r + 1, **compare(runs[-1], mixed[-1])})
                        print(f"  good clients, with the bad load / without: {effect[-1]}", flush=True)
        text = log.read_text(encoding="utf-8", errors="replace")
    results = {"batch": baseline, "serve": runs, "serve_with_bad": mixed, "good_with_bad_over_without": effect,
               "server_log_tracebacks": text.count("Traceback"), "server_exit_code": proc.returncode}  # fmt: skip
    print(json.dumps({"cpu": cpu_name(), **results}))
    settings = {k: v for k, v in vars(args).items() if k not in ("model", "input", "record")}
    settings.update(model=Path(args.model).name, input=Path(args.input).name)
    record.write(args.record, settings, passes, results)


if __name__ == "__main__":
    main()
