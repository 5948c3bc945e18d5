"""API keys with limits under load: no request past a key's limit answered, and no other key slowed by it.

    python bench/serve_key_limits.py --model STUDENT.pt --threads 1 --clients 4 --flooders 8 --flood-rate 200 \
        --rounds 4 --record docs/results/serve-key-limits.json

One `mtkit serve --api-keys FILE` with two keys: `limited` (--rpm requests a minute, --cpd characters a day) and
`free` (no limits). In each round, --clients clients of the free key send --requests one-sentence requests each,
one after another. In the flooded half of a round, the limited key first uses up its requests this minute (the
key hits its limit), then --flooders clients of it offer --flood-rate requests a second in all (each its share,
at fixed times: an offered load, not clients spinning as fast as they are answered) beside the free clients
until they are done. Clean and flooded halves alternate (A B B A) so a shared machine's load hits both. With
two cores or more, the server runs on one and every client on the others (sched_setaffinity), so what the
clients spend is not the server's. Checked: every limited-key request answered 200 falls within its limits (at
most --rpm in any minute, --cpd characters in all), every refusal is 429 with Retry-After, and the free key's
requests are all answered 200. Reported: the limited key's answers by status, the flood's achieved rate, the free
key's p50/p99 clean and flooded, their paired ratio, and the clean halves' own spread (the highest clean p50 over
the lowest) to judge it by. The last line printed is one JSON object; with --record, the run is kept as a record
(bench/harness.py: command, commit, date, machine, settings, every half's latencies and the limited key's
answers).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness import Record, cpu_name, latency, process_cpu_s  # bench/ is a script's sys.path[0]
from serve_latency import start_server

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
LIMITED, FREE = "limited-bench-key", "free-bench-key"


def spend(url: str, rpm: int) -> list[tuple[float, int, int, bool]]:
    """The limited key's requests until its first 429: it has hit its limit (its answers, for the checks)."""
    import httpx

    answers: list[tuple[float, int, int, bool]] = []
    with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {LIMITED}"}) as http:
        for _ in range(rpm + 1):
            answer = http.post(url + "/translate", json={"text": ["A dog runs."]})
            answers.append((time.monotonic(), answer.status_code, len("A dog runs."), "retry-after" in answer.headers))
            if answer.status_code == 429:
                break
    return answers


def flood(url: str, lines: list[str], args: argparse.Namespace, stop: Any, out: Any) -> None:
    """The limited key's clients, in a process of their own (so their Python takes nothing from the free clients'
    interpreter): each sends its share of --flood-rate at fixed times until `stop`; their answers go to `out`."""
    import httpx

    limited: list[tuple[float, int, int, bool]] = []  # (time, status, characters, has Retry-After)
    lock = threading.Lock()

    def flooder(k: int) -> None:
        every = args.flooders / args.flood_rate
        with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {LIMITED}"}) as http:
            n, start = 0, time.perf_counter() + k * every / args.flooders
            while not stop.wait(max(0.0, start + n * every - time.perf_counter())):
                line = lines[(k * 7919 + n) % len(lines)]
                n += 1
                answer = http.post(url + "/translate", json={"text": [line]})
                with lock:
                    limited.append((time.monotonic(), answer.status_code, len(line), "retry-after" in answer.headers))

    threads = [threading.Thread(target=flooder, args=(k,)) for k in range(args.flooders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(limited)


def run_half(url: str, pid: int, lines: list[str], args: argparse.Namespace, flooded: bool) -> dict:
    """One half-round: the free clients' latencies, the server's CPU seconds, and (flooded) the limited key's answers
    with their times."""
    import httpx

    free_ms: list[float] = []
    lock = threading.Lock()

    def free_client(k: int) -> None:
        with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {FREE}"}) as http:
            for r in range(args.requests):
                line = lines[(k * args.requests + r) % len(lines)]
                t0 = time.perf_counter()
                answer = http.post(url + "/translate", json={"text": [line]})
                if answer.status_code != 200:
                    raise SystemExit(f"the free key got {answer.status_code}: {answer.text}")
                with lock:
                    free_ms.append(1000 * (time.perf_counter() - t0))

    spent = spend(url, args.rpm) if flooded else []
    fork = multiprocessing.get_context("fork")  # the flooders' process inherits this one's cores
    stop, out = fork.Event(), fork.Queue()
    flooders = fork.Process(target=flood, args=(url, lines, args, stop, out)) if flooded else None
    clients = [threading.Thread(target=free_client, args=(k,)) for k in range(args.clients)]
    start, cpu = time.perf_counter(), process_cpu_s(pid)
    if flooders is not None:
        flooders.start()
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    stop.set()
    limited = out.get() if flooders is not None else []
    if flooders is not None:
        flooders.join()
    seconds, cpu = time.perf_counter() - start, process_cpu_s(pid) - cpu
    return {"free_ms": free_ms, "limited": spent + limited, "flood_per_s": len(limited) / seconds, "seconds": seconds,
            "server_cpu_s": cpu, "refusals": sum(1 for _, status, _, _ in limited if status == 429)}  # fmt: skip


def pin(server_pid: int) -> str:
    """The server on the first core this process may use, this process (every client) on the others; or, with one
    core, nothing pinned. Every thread of the server is pinned (a thread made later inherits its maker's cores)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return f"not pinned: {len(cores)} core"
    os.sched_setaffinity(0, cores[1:])
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cores[:1])
    return f"server on core {cores[0]}, clients on core(s) {','.join(map(str, cores[1:]))}"


def check_limits(answers: list[tuple[float, int, int, bool]], rpm: int, cpd: int) -> dict:
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
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    with gzip.open(TEST, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    halves: dict[str, list[float]] = {"clean": [], "flooded": []}
    limited: list[tuple[float, int, int, bool]] = []
    passes: list[dict] = []  # each half: flooded or not, the free key's latencies, the limited key's statuses
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"
        keys.write_text(f"{LIMITED} name=limited requests_per_minute={args.rpm} characters_per_day={args.cpd}\n"
                        f"{FREE} name=free\n", encoding="utf-8")  # fmt: skip
        keys.chmod(0o600)
        serve = ["-m", str(Path(args.model).resolve()), "--languages", "en-de", "--api-keys", str(keys)]
        serve += ["--queue-size", "256"] + (["--threads", str(args.threads)] if args.threads else [])
        proc, url = start_server(ROOT, serve, Path(tmp) / "serve.log")
        try:
            pinned = pin(proc.pid)
            print(pinned)
            order = [flood for r in range(args.rounds) for flood in ((False, True) if r % 2 == 0 else (True, False))]
            for flood in order:
                half = run_half(url, proc.pid, lines, args, flood)
                halves["flooded" if flood else "clean"].append(latency(half["free_ms"])["p50"])
                limited += half["limited"]
                statuses = Counter(str(status) for _, status, _, _ in half["limited"])
                passes.append({"flooded": flood, "free_ms": [round(ms, 2) for ms in half["free_ms"]],
                               "limited_answers": dict(statuses), "seconds": round(half["seconds"], 2),
                               "flood_per_s": round(half["flood_per_s"], 1), "refusals": half["refusals"],
                               "server_cpu_s": round(half["server_cpu_s"], 2)})  # fmt: skip
                print(f"{'flooded' if flood else 'clean':8s} free key {len(half['free_ms'])} requests: "
                      f"p50 {latency(half['free_ms'])['p50']:.1f} ms, p99 {latency(half['free_ms'])['p99']:.1f} ms; "
                      f"limited key {dict(statuses)}, {half['flood_per_s']:.0f}/s; "
                      f"server CPU {half['server_cpu_s']:.2f} s")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(60)
    checked = check_limits(limited, args.rpm, args.cpd)
    ratio = statistics.median(f / c for f, c in zip(halves["flooded"], halves["clean"]))
    spread = max(halves["clean"]) / min(halves["clean"])  # how far apart halves run with nothing changed
    # The free clients' work is the same in every half: what the server spent more in a flooded half than in its
    # round's clean one, over that half's refusals, is what a refusal cost it, HTTP and all.
    rounds = [passes[i : i + 2] for i in range(0, len(passes), 2)]
    extra = statistics.median(
        (f["server_cpu_s"] - c["server_cpu_s"]) / f["refusals"]
        for f, c in (sorted(pair, key=lambda p: not p["flooded"]) for pair in rounds)
    )
    print(f"limited key: {checked}")
    print(f"free key p50, flooded / clean (paired rounds): {ratio:.3f}x; load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"cpu": cpu_name(), "limited": checked, "free_p50_ms": halves, "paired": ratio}))
    free = {name: latency([ms for p in passes if p["flooded"] == (name == "flooded") for ms in p["free_ms"]])
            for name in ("clean", "flooded")}  # fmt: skip
    results = {
        "limited key": {**checked, "answered_past_a_limit": max(0, checked["most_200_in_a_minute"] - args.rpm)},
        "free key, clean": {"p50_ms": round(free["clean"]["p50"], 1), "p99_ms": round(free["clean"]["p99"], 1)},
        "free key, flooded": {"p50_ms": round(free["flooded"]["p50"], 1), "p99_ms": round(free["flooded"]["p99"], 1)},
        "free key p50, flooded / clean": round(ratio, 3),
        "free key p50, highest clean / lowest clean": round(spread, 3),
        "flood, requests a second": round(statistics.median(p["flood_per_s"] for p in passes if p["flooded"]), 1),
        "slowed (paired ratio past the clean spread)": ratio > spread,
        "server CPU a refusal, ms (flooded - clean, paired)": round(1000 * extra, 3),
    }
    names = ("clients", "requests", "flooders", "flood_rate", "rpm", "cpd", "rounds", "threads")
    settings = {k: getattr(args, k) for k in names}
    settings.update(model=Path(args.model).name, test="test_2016_flickr.en, one line a request", cores=pinned)
    record.write(args.record, settings, passes, results)
    if checked["past_a_limit"] or checked["refusals_without_retry_after"] or checked["other_statuses"]:
        raise SystemExit("a limit was not kept (see above)")


if __name__ == "__main__":
    main()
