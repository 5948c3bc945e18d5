"""API keys with limits under load: no request past a key's limit answered, and no other key slowed by it.

    python bench/serve_key_limits.py --model STUDENT.pt --threads 1 --clients 4 --flooders 8 --flood-rate 200 \
        --rounds 4 --record docs/results/serve-key-limits.json

One `mtkit serve --api-keys FILE`, the server on one core and the clients on the others (with --decoder-process: its
decoder process alone on one core, the server's HTTP side with the clients on the others). Each round, --clients
clients of a free key send --requests one-sentence requests each, in turn; in its flooded half (A B B A), a key
limited to --rpm requests a minute and --cpd characters a day first hits its limit, then --flooders clients of it
offer --flood-rate requests a second, at fixed times, from a process of their own; the limited key's window is
used up so that no request of it leaves the window while a flooded half runs (`refill_wait`), so that what the
flood costs is refusals alone, never a translation answered mid-half. Checked: no limited request
answered past a limit, every refusal 429 with Retry-After. Reported: the free key's p50/p99, clean and flooded,
paired and beside the clean halves' spread, and the server's CPU per refusal (its HTTP side's, with a decoder process).
--record keeps the run.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import math
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from harness import (
    ROOT,
    Record,
    cpu_name,
    latency,
    pin,
    pin_decoder,
    process_cpu_s,
    serving,
)  # bench/ is a script's sys.path[0]

TEST = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
LIMITED, FREE = "limited-bench-key", "free-bench-key"
WINDOW_S = 60.0  # the server's window of a key's requests a minute (mtkit/serve/keys.py)
Answer = tuple[float, int, int, bool]  # (time, status, characters, has Retry-After)


def send(http: Any, line: str) -> Answer:
    answer = http.post("/translate", json={"text": [line]})
    return time.monotonic(), answer.status_code, len(line), "retry-after" in answer.headers


def client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {key}"})


def refill_wait(answered: list[float], now: float, hold_s: float) -> float:
    """How long to wait before using up the limited key's window so that it stays used up for the next `hold_s`
    seconds. Were a request of its window to leave it meanwhile, the flood would get an answer mid-half: a
    translation decoded, work that is not a refusal's, counted against the refusals. Then wait until the whole
    window has left (`answered`: when its requests were answered), and fill a new one."""
    live = sorted(t for t in answered if t > now - WINDOW_S)
    if not live or live[0] + WINDOW_S >= now + hold_s:
        return 0.0
    return live[-1] + WINDOW_S - now


def spend(url: str, rpm: int, answered: list[float], hold_s: float) -> list[Answer]:
    """The limited key's requests until its first 429: it has hit its limit, and keeps it for `hold_s` seconds
    (`refill_wait`); its answers, for the checks."""
    time.sleep(refill_wait(answered, time.monotonic(), hold_s))
    answers: list[Answer] = []
    with client(url, LIMITED) as http:
        while len(answers) <= rpm and (not answers or answers[-1][1] != 429):
            answers.append(send(http, "A dog runs."))
    return answers


def flood(url: str, lines: list[str], args: argparse.Namespace, stop: Any, out: Any) -> None:
    """The limited key's clients, each sending its share of --flood-rate at fixed times until `stop`; at the lowest
    priority, so that the flood's own clients (HTTP clients in Python, a core's share at this rate) do not take the
    free clients' core from them: a real flood comes from other machines, and what is measured is what it costs the
    server."""
    os.nice(19)
    limited: list[Answer] = []
    every = args.flooders / args.flood_rate

    def flooder(k: int) -> None:
        with client(url, LIMITED) as http:
            n, start = 0, time.perf_counter() + k * every / args.flooders
            while not stop.wait(max(0.0, start + n * every - time.perf_counter())):
                n += 1
                limited.append(send(http, lines[(k * 7919 + n) % len(lines)]))  # list.append: thread-safe

    threads = [threading.Thread(target=flooder, args=(k,)) for k in range(args.flooders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(limited)


def run_half(
    url: str,
    pid: int,
    lines: list[str],
    args: argparse.Namespace,
    flooded: bool,
    answered: list[float] | None = None,
    hold_s: float = 0.0,
) -> tuple[dict, list]:
    """One half-round's figures (the free clients' latencies, the server's CPU...) and the limited key's answers;
    `answered`: when the limited key's requests were answered so far, `hold_s` how long the half may take."""
    free_ms: list[float] = []

    def free_client(k: int) -> None:
        with client(url, FREE) as http:
            for r in range(args.requests):
                t0 = time.perf_counter()
                if (status := send(http, lines[(k * args.requests + r) % len(lines)])[1]) != 200:
                    raise SystemExit(f"the free key got {status}")
                free_ms.append(1000 * (time.perf_counter() - t0))

    spent = spend(url, args.rpm, answered or [], hold_s) if flooded else []
    fork = multiprocessing.get_context("fork")  # the flooders' process inherits this one's cores
    stop, out = fork.Event(), fork.Queue()
    flooders = [fork.Process(target=flood, args=(url, lines, args, stop, out))] if flooded else []
    clients = [threading.Thread(target=free_client, args=(k,)) for k in range(args.clients)]
    start, cpu = time.perf_counter(), process_cpu_s(pid)
    for t in [*flooders, *clients]:
        t.start()
    for t in clients:
        t.join()
    stop.set()
    limited = out.get() if flooded else []
    for p in flooders:
        p.join()
    seconds, cpu = time.perf_counter() - start, process_cpu_s(pid) - cpu
    return {"flooded": flooded, "free_ms": [round(ms, 2) for ms in free_ms], "seconds": round(seconds, 2),
            "limited_answers": dict(Counter(str(status) for _, status, _, _ in spent + limited)),
            "flood_per_s": round(len(limited) / seconds, 1), "server_cpu_s": round(cpu, 2),
            "refusals": sum(1 for _, status, _, _ in limited if status == 429),
            "flood_answered": sum(1 for _, status, _, _ in limited if status == 200)}, spent + limited  # fmt: skip


def check_limits(answers: list[Answer], rpm: int, cpd: int) -> dict:
    """The limited key's answers by status; whether any 200 passed a limit; whether every refusal said when."""
    ok_times = sorted(t for t, status, _, _ in answers if status == 200)
    worst_minute = max((bisect.bisect_right(ok_times, t + 60) - i for i, t in enumerate(ok_times)), default=0)
    chars = sum(c for _, status, c, _ in answers if status == 200)
    statuses = Counter(status for _, status, _, _ in answers)
    return {
        "answers": dict(statuses),
        "most_200_in_a_minute": worst_minute,
        "characters_answered": chars,
        "past_a_limit": worst_minute > rpm or chars > cpd,
        "refusals_without_retry_after": sum(1 for _, s, _, r in answers if s == 429 and not r),
        "other_statuses": sum(n for s, n in statuses.items() if s not in (200, 429)),
    }


def sign_test(ratios: list[float]) -> float:
    """The chance, were the flood to change nothing, that at least as many rounds' flooded halves come out slower
    (one-sided sign test: each round slower or not as a coin falls)."""
    n, slower = len(ratios), sum(r > 1 for r in ratios)
    return sum(math.comb(n, k) for k in range(slower, n + 1)) / 2**n


def slowed(ratios: list[float], spread: float) -> bool:
    """Whether the flood slowed the free key: its paired ratio past what the clean halves differ by, or more rounds
    slower than chance allows (sign test p < 0.05), or every round slower (4 of 4 is 1 in 16): a shift within the
    noise that keeps its sign is a shift all the same."""
    return statistics.median(ratios) > spread or sign_test(ratios) < 0.05 or min(ratios) > 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, default=4, help="clients of the free key")
    ap.add_argument("--requests", type=int, default=50, help="one-sentence requests each free client sends")
    ap.add_argument("--flooders", type=int, default=8, help="clients of the limited key, sharing --flood-rate")
    ap.add_argument("--flood-rate", type=float, default=200.0, help="the limited key's requests a second, offered")
    ap.add_argument("--rpm", type=int, default=60, help="the limited key's requests a minute")
    ap.add_argument("--cpd", type=int, default=20000, help="the limited key's characters a day")
    ap.add_argument("--rounds", type=int, default=2, help="clean/flooded pairs, as A B B A")
    ap.add_argument("--threads", type=int, default=0, help="the server's torch threads (0: PyTorch's)")
    ap.add_argument("--decoder-process", action="store_true",
                    help="serve with --decoder-process: the decoder process alone on one core, the server's HTTP side "
                    "with the clients on the others")  # fmt: skip
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    with gzip.open(TEST, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    limited: list[Answer] = []
    passes: list[dict] = []  # each half: flooded or not, the free key's latencies, the limited key's statuses
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"
        keys.write_text(f"{LIMITED} name=limited requests_per_minute={args.rpm} characters_per_day={args.cpd}\n"
                        f"{FREE} name=free\n", encoding="utf-8")  # fmt: skip
        keys.chmod(0o600)
        serve = ["-m", args.model, "--languages", "en-de", "--api-keys", str(keys), "--queue-size", "256"]
        serve += ["--threads", str(args.threads)] if args.threads else []
        serve += ["--decoder-process"] if args.decoder_process else []
        with serving(serve, Path(tmp) / "serve.log") as (proc, url):
            print(pinned := pin_decoder(proc.pid) if args.decoder_process else pin(proc.pid))
            for flooded in [f for r in range(args.rounds) for f in ((False, True) if r % 2 == 0 else (True, False))]:
                answered = [t for t, status, _, _ in limited if status == 200]
                hold_s = 1.5 * max((p["seconds"] for p in passes), default=20.0)  # the longest half, and room
                half, answers = run_half(url, proc.pid, lines, args, flooded, answered, hold_s)
                passes.append(half)
                limited += answers
                q = latency(half["free_ms"])
                print(f"{'flooded' if flooded else 'clean':8s} free key: p50 {q['p50']:.1f} ms, p99 {q['p99']:.1f} "
                      f"ms; limited key {half['limited_answers']}, {half['flood_per_s']:.0f}/s; server CPU "
                      f"{half['server_cpu_s']:.2f} s")  # fmt: skip
    checked = check_limits(limited, args.rpm, args.cpd)
    p50 = {name: [latency(p["free_ms"])["p50"] for p in passes if p["flooded"] == (name == "flooded")]
           for name in ("clean", "flooded")}  # fmt: skip
    ratios = [f / c for f, c in zip(p50["flooded"], p50["clean"])]  # each round's flooded half over its clean one
    ratio = statistics.median(ratios)
    # The free clients' work is the same in every half: what the server spent more in a flooded half than in its
    # round's clean one, over that half's refusals, is what a refusal cost it, HTTP and all.
    pairs = [sorted(passes[i : i + 2], key=lambda p: not p["flooded"]) for i in range(0, len(passes), 2)]
    extra = statistics.median((f["server_cpu_s"] - c["server_cpu_s"]) / f["refusals"] for f, c in pairs)
    free = {name: latency([ms for p in passes if p["flooded"] == (name == "flooded") for ms in p["free_ms"]])
            for name in ("clean", "flooded")}  # fmt: skip
    spread = max(p50["clean"]) / min(p50["clean"])  # how far apart halves run with nothing changed
    results = {
        "limited key": {**checked, "answered_past_a_limit": max(0, checked["most_200_in_a_minute"] - args.rpm)},
        "free key, clean": {"p50_ms": round(free["clean"]["p50"], 1), "p99_ms": round(free["clean"]["p99"], 1)},
        "free key, flooded": {"p50_ms": round(free["flooded"]["p50"], 1), "p99_ms": round(free["flooded"]["p99"], 1)},
        "free key p50, flooded / clean": round(ratio, 3),
        "free key p50, highest clean / lowest clean": round(spread, 3),
        "flood, requests a second": round(statistics.median(p["flood_per_s"] for p in passes if p["flooded"]), 1),
        "flood requests answered in a timed half": sum(p["flood_answered"] for p in passes if p["flooded"]),
        "free key p50, flooded / clean, each round": [round(r, 3) for r in ratios],
        "rounds slower flooded": f"{sum(r > 1 for r in ratios)} of {len(ratios)}",
        "sign test, one-sided p": round(sign_test(ratios), 4),
        "slowed (paired ratio past the clean spread, or more rounds slower than chance)": slowed(ratios, spread),
        "server CPU a refusal, ms (flooded - clean, paired)": round(1000 * extra, 3),
    }
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps(results))
    settings = {k: getattr(args, k) for k in ("clients", "requests", "flooders", "flood_rate", "rpm", "cpd", "rounds")}
    settings.update(threads=args.threads, decoder_process=args.decoder_process, model=Path(args.model).name,
                    cores=pinned, test="test_2016_flickr.en, one line a request")  # fmt: skip
    record.write(args.record, settings, passes, results)
    if checked["past_a_limit"] or checked["refusals_without_retry_after"] or checked["other_statuses"]:
        raise SystemExit("a limit was not kept (see above)")


if __name__ == "__main__":
    main()
