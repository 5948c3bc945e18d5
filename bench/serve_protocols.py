"""One sentence's latency through each API `mtkit serve` speaks, on one server, the protocols interleaved.

    python bench/serve_protocols.py --model STUDENT.pt --threads 1 --rounds 300 \\
        --record docs/results/serve-protocols.json

One server (the model's own decoding defaults: a student greedy, with its shortlist) answers each line of
test_2016_flickr (English, in order) through mtkit's own API, OpenNMT-py's, LibreTranslate's, DeepL's and the
OpenAI-compatible one, one request at a time, the protocols' order rotating from one round to the next, so a
shared machine's drift falls on every protocol alike. Reported per protocol: p50, p90, p99 and mean in ms (the
client's time, from sending to the parsed answer), and its overhead over mtkit's own API: the median over rounds of
the difference within a round (ms), and of the ratio. Every protocol must give mtkit's own translation, checked.

With --record, the run is kept as a record (bench/harness.py: command, commit, date, machine, settings, every
request's time, and each protocol's figures), which docs/gen_figures.py renders into docs/serving.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Record, cpu_name, latency, paired_ratio  # bench/ is a script's sys.path[0]
from serve_latency import start_server

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
BASE = "mtkit"

# (name, path, request body for one line, the translation in the answer)
Protocol = tuple[str, str, Callable[[str], Any], Callable[[Any], str]]
PROTOCOLS: list[Protocol] = [
    ("mtkit", "/translate", lambda s: {"text": [s]}, lambda a: a["translations"][0]),
    ("OpenNMT-py", "/translator/translate", lambda s: [{"src": s, "id": 100}], lambda a: a[0][0]["tgt"]),
    ("LibreTranslate", "/translate", lambda s: {"q": s, "source": "en", "target": "de"}, lambda a: a["translatedText"]),
    (
        "DeepL",
        "/v2/translate",
        lambda s: {"text": [s], "source_lang": "EN", "target_lang": "DE"},
        lambda a: a["translations"][0]["text"],
    ),
    (
        "OpenAI",
        "/v1/chat/completions",
        lambda s: {"model": "mtkit-en-de", "messages": [{"role": "user", "content": s}]},
        lambda a: a["choices"][0]["message"]["content"],
    ),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=300, help="test-set lines, each sent through every protocol")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gap-ms", type=float, default=5.0, help="pause between two requests")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=0, help="the server's torch threads (0: PyTorch's)")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    import httpx

    with gzip.open(TEST, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f][: args.warmup + args.rounds]
    serve = ["-m", str(Path(args.model).resolve()), "--languages", "en-de", "--precision", args.precision]
    serve += ["--threads", str(args.threads)] if args.threads else []
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    times: dict[str, list[float]] = {name: [] for name, *_ in PROTOCOLS}
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(ROOT, serve, Path(tmp) / "serve.log")
        try:
            with httpx.Client(timeout=120) as http:
                for k, line in enumerate(lines):
                    found = {}
                    for j in range(len(PROTOCOLS)):
                        name, path, body, text = PROTOCOLS[(k + j) % len(PROTOCOLS)]
                        time.sleep(args.gap_ms / 1000)
                        t0 = time.perf_counter()
                        answer = http.post(url + path, json=body(line))
                        found[name] = text(answer.json()) if answer.status_code == 200 else answer.text
                        if k >= args.warmup:
                            times[name].append(1000 * (time.perf_counter() - t0))
                    if len(set(found.values())) != 1:
                        raise SystemExit(f"the protocols differ on line {k + 1}: {found}")
        finally:
            proc.terminate()
            proc.wait(60)
    results = {}
    for name, *_ in PROTOCOLS:
        ms, q = times[name], latency(times[name])
        overhead = statistics.median(a - b for a, b in zip(ms, times[BASE]))
        paired = paired_ratio(ms, times[BASE])[0]
        results[name] = {
            "p50_ms": round(q["p50"], 2),
            "p99_ms": round(q["p99"], 2),
            "mean_ms": round(q["mean"], 2),
            "overhead_ms": round(overhead, 2),
            "paired_ratio": round(paired, 3),
        }
        print(
            f"{name:16s} p50 {q['p50']:6.1f}  p90 {q['p90']:6.1f}  p99 {q['p99']:6.1f}  mean {q['mean']:6.1f} ms"
            f"  overhead {overhead:+.2f} ms (paired {paired:.3f}x)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    settings = {
        "model": Path(args.model).name,
        "sentences": args.rounds,
        "warmup": args.warmup,
        "threads": args.threads,
        "precision": args.precision,
        "gap_ms": args.gap_ms,
        "test": "test_2016_flickr.en, in order",
    }
    record.write(args.record, settings, times, results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
