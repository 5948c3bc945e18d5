"""The server's CPU per request and one sentence's latency, `mtkit serve` on the stdlib event loop against uvloop.

    python bench/serve_loop_cost.py --model STUDENT.pt --threads 1 --requests 400 --rounds 6 \
        --record docs/results/serve-event-loop.json

Two `mtkit serve` processes of this checkout, started alike but for uvicorn's event loop: mtkit's ("asyncio"),
and "uvloop", which the second process puts in every `uvicorn.Config` it makes (uvicorn patched there, mtkit's
code untouched; a server on uvloop keeps no connection limit, docs/serving.md, so this is a measurement, not a
setting). Both run on one core and the client on another (sched_setaffinity, with two cores or more). In each
round, the client sends, to each server in turn (the order alternating A B, B A), --requests requests of each kind
one after another on one kept-alive connection: a refusal (a key past its requests a minute: 429 from its header),
/health, and one sentence to translate (an idle key). The server's CPU (user and system, every thread, from /proc)
over each batch, divided by its requests, is that kind's CPU a request; the client's time of each sentence its
latency. Reported per kind: each loop's median over rounds, and uvloop / asyncio paired round by round (median,
lowest, highest; below 1.0, uvloop spends less). The last line printed is one JSON object; with --record, the run
is kept as a record (bench/harness.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import Record, cpu_name, latency, paired_ratio, process_cpu_s  # bench/ is a script's sys.path[0]
from serve_key_limits import FREE, LIMITED, ROOT, pin, spend
from serve_latency import start_server

LOOPS = ("asyncio", "uvloop")
# `python -m mtkit serve` with every uvicorn.Config made on the loop named by the first argument.
START = """import functools, sys, uvicorn
loop, init = sys.argv.pop(1), uvicorn.Config.__init__
uvicorn.Config.__init__ = functools.wraps(init)(lambda self, *a, **k: init(self, *a, **{**k, "loop": loop}))
from mtkit.cli import main
main()
"""


def start(loop: str, serve: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    """`mtkit serve SERVE...` on `loop`, on an ephemeral port; returns once /health says ready."""
    return start_server(ROOT, serve, log, launch=("-c", START, loop), name=loop)


def batch(url: str, pid: int, kind: str, n: int, sentence: str) -> tuple[float, list[float]]:
    """n requests of `kind` one after another: the server's CPU seconds a request, and each request's ms."""
    import httpx

    key = LIMITED if kind == "refusal" else FREE
    expect = 429 if kind == "refusal" else 200
    ms: list[float] = []
    if kind == "refusal":
        spend(url, 1)  # a moving minute: the key's one request made now, every request of the batch is past it
    with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {key}"}) as http:
        http.get(url + "/health")  # the connection opened before the clock starts
        cpu = process_cpu_s(pid)
        for _ in range(n):
            t0 = time.perf_counter()
            if kind == "health":
                answer = http.get(url + "/health")
            else:
                answer = http.post(url + "/translate", json={"text": [sentence]})
            ms.append(1000 * (time.perf_counter() - t0))
            if answer.status_code != expect:
                raise SystemExit(f"{kind}: {answer.status_code} {answer.text}")
        return (process_cpu_s(pid) - cpu) / n, ms


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=400, help="requests of each kind to each server in a round")
    ap.add_argument("--sentences", type=int, default=100, help="sentences to translate to each server in a round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--sentence", default="A man is riding a bike.")
    ap.add_argument("--threads", type=int, default=0, help="the servers' torch threads (0: PyTorch's)")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    kinds = {"refusal": args.requests, "health": args.requests, "sentence": args.sentences}
    cpu: dict[str, dict[str, list[float]]] = {k: {loop: [] for loop in LOOPS} for k in kinds}
    p50: dict[str, list[float]] = {loop: [] for loop in LOOPS}
    passes: list[dict] = []
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"
        keys.write_text(f"{LIMITED} name=limited requests_per_minute=1\n{FREE} name=free\n", encoding="utf-8")
        keys.chmod(0o600)
        serve = ["-m", str(Path(args.model).resolve()), "--languages", "en-de", "--api-keys", str(keys)]
        serve += ["--threads", str(args.threads)] if args.threads else []
        try:
            for loop in LOOPS:
                servers[loop] = start(loop, serve, Path(tmp) / f"{loop}.log")
            pinned = pin(servers["asyncio"][0].pid)  # the server on one core, the client on the others
            core = os.sched_getaffinity(servers["asyncio"][0].pid)
            for task in Path(f"/proc/{servers['uvloop'][0].pid}/task").iterdir():
                os.sched_setaffinity(int(task.name), core)  # the other server on the same core
            print(pinned)
            for r in range(args.rounds):
                for loop in LOOPS if r % 2 == 0 else LOOPS[::-1]:
                    proc, url = servers[loop]
                    row: dict = {"round": r, "loop": loop}
                    for kind, n in kinds.items():
                        per, ms = batch(url, proc.pid, kind, n, args.sentence)
                        cpu[kind][loop].append(per)
                        row[f"{kind}_cpu_us"] = round(1e6 * per, 1)
                        if kind == "sentence":
                            p50[loop].append(latency(ms)["p50"])
                            row["sentence_ms"] = [round(t, 2) for t in ms]
                    passes.append(row)
                    print(f"round {r} {loop:7s} " + ", ".join(f"{k} {row[f'{k}_cpu_us']:.0f} us" for k in kinds)
                          + f"; sentence p50 {p50[loop][-1]:.2f} ms")  # fmt: skip
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(60)
    results: dict[str, dict[str, float]] = {}
    for kind in kinds:
        mid, low, high = paired_ratio(cpu[kind]["uvloop"], cpu[kind]["asyncio"])
        results[f"server CPU a {kind}, us"] = {
            **{loop: round(1e6 * statistics.median(cpu[kind][loop]), 1) for loop in LOOPS},
            "uvloop / asyncio (paired)": round(mid, 3), "lowest": round(low, 3), "highest": round(high, 3),
        }  # fmt: skip
    mid, low, high = paired_ratio(p50["uvloop"], p50["asyncio"])
    results["one sentence's latency p50, ms"] = {
        **{loop: round(statistics.median(p50[loop]), 2) for loop in LOOPS},
        "uvloop / asyncio (paired)": round(mid, 3), "lowest": round(low, 3), "highest": round(high, 3),
    }  # fmt: skip
    for name, row in results.items():
        print(f"{name}: {row}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"cpu": cpu_name(), **results}))
    settings = {k: getattr(args, k) for k in ("requests", "sentences", "rounds", "sentence", "threads")}
    settings.update(model=Path(args.model).name, cores=pinned, connection="one kept-alive connection a batch")
    record.write(args.record, settings, passes, results)


if __name__ == "__main__":
    main()
