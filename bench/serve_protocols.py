"""Latency of real sentences through `mtkit serve`, through each API it speaks, on one server, interleaved.

    python bench/serve_protocols.py --model STUDENT.pt --threads 1 --rounds 300 \\
        --record docs/results/serve-protocols.json
    python bench/serve_protocols.py --model M.pt --threads 2 --in-process --health --batch-wait-ms 0

One server (the model's own decoding defaults) answers each line of test_2016_flickr (English, in order) through
mtkit's API, OpenNMT-py's, LibreTranslate's, DeepL's and OpenAI's, one request at a time, --gap-ms apart, in an
order shuffled for each line (the same shuffle in every run), so that no row always follows another. (It was a
rotation before, in which mtkit's API always came right after the in-process row, whose own copy of the weights
pushes the server's out of the caches.) --in-process adds `Translator.translate` in this process (the model alone,
same precision and threads), --health `GET /health` (nothing decoded); --decoder-process serves with it (its cost:
the mtkit API's overhead over the in-process row, against a run without it); --compile serves (and translates in
process) with that `--compile`. Every row must give mtkit's API's translation.
Reported per row: p50, p90, p99 and mean in ms (the client's time), and the median over rounds of its difference
to mtkit's API within a round (ms) and of the ratio. --record keeps the run (bench/harness.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import ROOT, Record, cpu_name, latency, paired_ratio, serving  # bench/ is a script's sys.path[0]

TEST = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
BASE = "mtkit"

# (name, path, request body for one line, the translation in the answer)
Protocol = tuple[str, str, Callable[[str], Any], Callable[[Any], str]]
PROTOCOLS: list[Protocol] = [
    ("mtkit", "/translate", lambda s: {"text": [s]}, lambda a: a["translations"][0]),
    ("OpenNMT-py", "/translator/translate", lambda s: [{"src": s, "id": 100}], lambda a: a[0][0]["tgt"]),
    ("LibreTranslate", "/translate", lambda s: {"q": s, "source": "en", "target": "de"}, lambda a: a["translatedText"]),
    ("DeepL", "/v2/translate", lambda s: {"text": [s], "source_lang": "EN", "target_lang": "DE"},
     lambda a: a["translations"][0]["text"]),
    ("OpenAI", "/v1/chat/completions", lambda s: {"model": "mtkit-en-de", "messages": [{"role": "user", "content": s}]},
     lambda a: a["choices"][0]["message"]["content"]),
]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=300, help="test-set lines, each sent through every protocol")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gap-ms", type=float, default=5.0, help="pause between two requests")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--compile", default="off", help="the server's --compile (and the in-process translator's)")
    ap.add_argument("--threads", type=int, default=0, help="the server's torch threads (0: PyTorch's)")
    ap.add_argument("--batch-wait-ms", type=float, help="the server's batching window (default: the server's)")
    ap.add_argument("--in-process", action="store_true", help="also Translator.translate in this process")
    ap.add_argument("--health", action="store_true", help="also GET /health (nothing decoded)")
    ap.add_argument("--decoder-process", action="store_true", help="serve with --decoder-process")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def rows(http: Any, url: str, args: argparse.Namespace) -> dict[str, Callable[[str], str | None]]:
    """Each row's one request for a line, giving its translation (an error's text; None: nothing translated)."""

    def post(path: str, body: Callable[[str], Any], text: Callable[[Any], str]) -> Callable[[str], str]:
        def send(line: str) -> str:
            answer = http.post(url + path, json=body(line))
            return text(answer.json()) if answer.status_code == 200 else answer.text

        return send

    found: dict[str, Callable[[str], str | None]] = {name: post(*rest) for name, *rest in PROTOCOLS}
    if args.in_process:
        from mtkit import load_translator

        translator = load_translator(
            args.model, device="cpu", precision=args.precision, threads=args.threads, compile=args.compile
        )
        found["in-process Translator.translate"] = lambda line: translator.translate([line])[0]
    if args.health:

        def health(line: str) -> None:
            http.get(url + "/health").raise_for_status()

        found["GET /health"] = health
    return found


def main() -> None:
    args = parse_args()
    record = Record()
    import httpx

    with gzip.open(TEST, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f][: args.warmup + args.rounds]
    serve = ["-m", args.model, "--languages", "en-de", "--precision", args.precision, "--compile", args.compile]
    serve += ["--threads", str(args.threads)] if args.threads else []
    serve += ["--batch-wait-ms", str(args.batch_wait_ms)] if args.batch_wait_ms is not None else []
    serve += ["--decoder-process"] if args.decoder_process else []
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp, serving(serve, Path(tmp) / "serve.log") as (_, url):
        with httpx.Client(timeout=120) as http:
            send = rows(http, url, args)
            times: dict[str, list[float]] = {name: [] for name in send}
            for k, line in enumerate(lines):
                found = {}
                for name in random.Random(k).sample(list(send), len(send)):
                    time.sleep(args.gap_ms / 1000)
                    t0 = time.perf_counter()
                    found[name] = send[name](line)
                    if k >= args.warmup:
                        times[name].append(1000 * (time.perf_counter() - t0))
                if len(set(found.values()) - {None}) != 1:
                    raise SystemExit(f"the rows differ on line {k + 1}: {found}")
    results = {}
    for name, ms in times.items():
        q = latency(ms)
        overhead = statistics.median(a - b for a, b in zip(ms, times[BASE]))
        paired = paired_ratio(ms, times[BASE])[0]
        results[name] = {"p50_ms": round(q["p50"], 2), "p99_ms": round(q["p99"], 2), "mean_ms": round(q["mean"], 2),
                         "overhead_ms": round(overhead, 2), "paired_ratio": round(paired, 3)}  # fmt: skip
        print(
            f"{name:32s} p50 {q['p50']:6.1f}  p90 {q['p90']:6.1f}  p99 {q['p99']:6.1f}  mean {q['mean']:6.1f} ms"
            f"  overhead {overhead:+.2f} ms (paired {paired:.3f}x)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    settings = {k: getattr(args, k) for k in ("warmup", "threads", "precision", "gap_ms", "batch_wait_ms",
                                              "decoder_process", "compile")}  # fmt: skip
    settings.update(model=Path(args.model).name, sentences=args.rounds, test="test_2016_flickr.en, in order")
    record.write(args.record, settings, times, results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
