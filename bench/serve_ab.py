"""One sentence's latency through `mtkit serve` variants, A against B, their requests interleaved.

    python bench/serve_ab.py --model student.pt --beam 1 --precision int8 --threads 2 \\
        --variant base=/tmp/mtkit-main --variant new=. --variant new-wait0=.:--batch-wait-ms=0 --requests 400

A variant is NAME=CODE_DIR[:serve options, comma-separated]: CODE_DIR is a checkout of mtkit (e.g. `git
worktree add /tmp/mtkit-main main`) whose `mtkit serve` runs with --model, --beam, --precision and --threads
and those options. Every variant's server is started first (one after the other, each loading its model);
then one client sends one request of --sentence at a time, to each server in turn (the order rotating from one
round to the next), --gap-ms apart, so that a shared machine's drift falls on all variants alike: bench/
serve_latency.py runs its servers one after the other, and on a 2-core VM two runs of the same code differed by
more than the change measured. The idle servers wait in their event loops meanwhile (no CPU).

Reported per variant: p50, p90, p99 and mean in ms (the client's time, from sending to the parsed answer), and
against the first variant the median over rounds of the ratio within a round ("paired", below 1.0 is faster).
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from harness import cpu_name, latency, paired_ratio  # bench/ is a script's sys.path[0]
from serve_latency import start_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--variant", action="append", required=True, help="NAME=CODE_DIR[:serve options, comma-separated]")
    ap.add_argument("--sentence", default="A man is riding a bike.")
    ap.add_argument("--requests", type=int, default=300, help="timed requests to each variant")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gap-ms", type=float, default=10.0, help="pause between two requests")
    ap.add_argument("--beam", type=int, default=0, help="0: the model's own (a student: greedy, its shortlist)")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=0, help="the servers' torch threads (0: PyTorch's)")
    args = ap.parse_args()
    import httpx

    common = ["-m", str(Path(args.model).resolve()), "--precision", args.precision]
    common += ["--beam", str(args.beam)] if args.beam else []
    common += ["--threads", str(args.threads)] if args.threads else []
    variants: list[tuple[str, Path, list[str]]] = []
    for spec in args.variant:
        name, _, rest = spec.partition("=")
        code, _, options = rest.partition(":")
        variants.append((name, Path(code).resolve(), [o for o in options.split(",") if o]))
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    body = {"text": [args.sentence]}
    servers: list[tuple[subprocess.Popen, str]] = []
    times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for i, (_, code, options) in enumerate(variants):
                servers.append(
                    start_server(
                        code, common + [o for opt in options for o in opt.split("=", 1)], Path(tmp) / f"{i}.log"
                    )
                )
            with httpx.Client(timeout=120) as http:
                for k in range(args.warmup + args.requests):
                    turn = k % len(variants)
                    for j in range(len(variants)):
                        i = (turn + j) % len(variants)
                        time.sleep(args.gap_ms / 1000)
                        t0 = time.perf_counter()
                        answer = http.post(servers[i][1] + "/translate", json=body)
                        answer.json()
                        if answer.status_code != 200:
                            raise SystemExit(f"{variants[i][0]}: {answer.status_code} {answer.text}")
                        if k >= args.warmup:
                            times[variants[i][0]].append(1000 * (time.perf_counter() - t0))
        finally:
            for proc, _ in servers:
                proc.terminate()
            for proc, _ in servers:
                proc.wait(60)
    first = variants[0][0]
    result = {}
    for name, _, options in variants:
        ms = times[name]
        q = latency(ms)
        paired = paired_ratio(ms, times[first])[0]
        result[name] = {**q, "paired": paired}
        print(
            f"{name:24s} p50 {q['p50']:6.1f}  p90 {q['p90']:6.1f}  p99 {q['p99']:6.1f}  mean {q['mean']:6.1f} ms"
            f"  paired vs {first}: {paired:.3f}x  {' '.join(options)}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(json.dumps({"cpu": cpu_name(), "requests": args.requests, "variants": result}))


if __name__ == "__main__":
    main()
