"""What a request past its key's limit costs the server, HTTP and all: its CPU a refusal, this checkout and a baseline.

    git worktree add --detach ../baseline COMMIT
    python bench/serve_refusal_cpu.py --model STUDENT.pt --baseline ../baseline --refusals 3000 --rounds 4 \
        --record docs/results/serve-refusal-cpu.json

Each checkout's `mtkit serve --api-keys` runs on one core (its own code: PYTHONPATH; --no-pin: wherever the system
runs it, as a server usually runs), a key limited to one request
a minute has used it, and one client on the other core sends --refusals requests of that key, one after another
on a kept-alive connection, to each API's translate path in turn (mtkit's and LibreTranslate's /translate, DeepL's
/v2/translate, OpenAI's /v1/chat/completions), reading each answer whole. The server's CPU (user and system, every
thread, from /proc, which counts in ticks of 10 ms: thousands of refusals a figure) over them, divided by their
number, is what a refusal costs it; rounds take the checkouts in
turn (A B, then B A) and the ratio this / baseline is the median of the rounds' ratios (`paired_ratio`). Every
answer must be a 429 with Retry-After. A raw socket client, not httpx: the client's own cost stays off the figure's
noise. --record keeps the run, with both checkouts' commits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from harness import ROOT, Record, commit, cpu_name, paired_ratio, pin, process_cpu_s, serving

LIMITED = "limited-bench-key"
BODY = json.dumps({"text": ["A man in a blue shirt is riding a bike down the street."]}).encode()
PATHS = {  # each API's translate path, and the header its clients send the key in
    "/translate": "Authorization: Bearer",
    "/v2/translate": "Authorization: DeepL-Auth-Key",
    "/v1/chat/completions": "Authorization: Bearer",
}
LENGTH = re.compile(rb"content-length: (\d+)", re.IGNORECASE)


def request(path: str, port: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{PATHS[path]} {LIMITED}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY


def answer(sock: socket.socket, pending: bytearray) -> bytes:
    """One whole answer from the connection (its head, and its body by Content-Length); what follows stays pending."""
    while (end := pending.find(b"\r\n\r\n")) < 0 or len(pending) < end + 4 + _length(pending[:end]):
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("the server closed the connection")
        pending += chunk
    size = end + 4 + _length(pending[:end])
    whole = bytes(pending[:size])
    del pending[:size]
    return whole


def _length(head: bytes | bytearray) -> int:
    found = LENGTH.search(head)
    return int(found[1]) if found else 0


def refusals(url: str, pid: int, path: str, n: int) -> dict:
    """`n` refused requests to `path`, one after another on one connection: the server's CPU and the round trip."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    raw = request(path, int(port))
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        pending = bytearray()
        for _ in range(20):  # warm: the connection, the key's lookups
            sock.sendall(raw)
            answer(sock, pending)
        cpu, start, statuses = process_cpu_s(pid), time.perf_counter(), []
        for _ in range(n):
            sock.sendall(raw)
            got = answer(sock, pending)
            statuses.append((got[9:12].decode(), b"\r\nretry-after: " in got.lower()))
        seconds, cpu = time.perf_counter() - start, process_cpu_s(pid) - cpu
    wrong = [s for s in statuses if s != ("429", True)]
    if wrong:
        raise SystemExit(f"{path}: {len(wrong)} answers were not 429 with Retry-After, e.g. {wrong[0]}")
    return {"us_cpu_a_refusal": round(1e6 * cpu / n, 1), "us_round_trip": round(1e6 * seconds / n, 1)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="any model mtkit serve takes (nothing is translated)")
    ap.add_argument("--baseline", type=Path, help="another checkout of mtkit (a git worktree at another commit)")
    ap.add_argument("--refusals", type=int, default=3000, help="refused requests a path, a round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--no-pin", action="store_true", help="leave the servers and the client where the system puts them")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    record = Record()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    checkouts = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    passes: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        keys = Path(tmp) / "keys"
        keys.write_text(f"{LIMITED} name=limited requests_per_minute=1\n", encoding="utf-8")
        keys.chmod(0o600)
        servers, cores = {}, sorted(os.sched_getaffinity(0))
        for name, checkout in checkouts.items():
            options = ["-m", args.model, "--languages", "en-de", "--api-keys", str(keys), "--threads", "1"]
            proc, url = stack.enter_context(serving(options, Path(tmp) / f"{name}.log", checkout=checkout))
            pinned = "not pinned" if args.no_pin else pin(proc.pid, cores)  # each server on the same core
            host, port = url.removeprefix("http://").rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=60) as sock:  # its one request this minute
                sock.sendall(request("/translate", int(port)))
                answer(sock, bytearray())
            servers[name] = (proc.pid, url)
        for r in range(args.rounds):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for name in order:
                pid, url = servers[name]
                row = {"round": r, "checkout": name}
                row.update({path: refusals(url, pid, path, args.refusals) for path in PATHS})
                passes.append(row)
                print(json.dumps(row), flush=True)
    results: dict = {}
    for name in servers:
        rows = [p for p in passes if p["checkout"] == name]
        results[name] = {path: round(statistics.median(p[path]["us_cpu_a_refusal"] for p in rows), 1) for path in PATHS}
    if "baseline" in servers:
        for path in PATHS:
            this = [p[path]["us_cpu_a_refusal"] for p in passes if p["checkout"] == "this"]
            base = [p[path]["us_cpu_a_refusal"] for p in passes if p["checkout"] == "baseline"]
            if min(base) <= 0:  # the CPU clock ticks every 10 ms: a few refusals may read as none
                results.setdefault("this / baseline (paired)", {})[path] = "too few refusals to time"
                continue
            median, low, high = paired_ratio(this, base)
            results.setdefault("this / baseline (paired)", {})[path] = {
                "median": round(median, 3),
                "lowest": round(low, 3),
                "highest": round(high, 3),
            }
    print(json.dumps(results))
    settings = {
        "refusals": args.refusals,
        "rounds": args.rounds,
        "model": Path(args.model).name,
        "threads": 1,
        "cores": pinned,
        "requests_per_minute": 1,
        "baseline": commit(args.baseline) if args.baseline else None,
    }
    record.write(args.record, settings, passes, results)


if __name__ == "__main__":
    main()
