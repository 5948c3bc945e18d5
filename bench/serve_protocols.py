"""One sentence's latency through each API `mtkit serve` speaks, on one server, the protocols interleaved.

    python bench/serve_protocols.py --model STUDENT.pt --threads 2 --rounds 300 --write

One server (the model's own decoding defaults: a student greedy, with its shortlist) answers each line of
test_2016_flickr (English, in order) through mtkit's own API, OpenNMT-py's, LibreTranslate's, DeepL's and the
OpenAI-compatible one, one request at a time, the protocols' order rotating from one round to the next, so a
shared machine's drift falls on every protocol alike. Reported per protocol: p50, p90, p99 and mean in ms (the
client's time, from sending to the parsed answer), and its overhead over mtkit's own API: the median over rounds of
the difference within a round (ms), and of the ratio. Every protocol must give mtkit's own translation, checked.

With --write, docs/results/serve-protocols.json keeps the run (command, commit, date, machine, load, settings,
every request's time); docs/gen_figures.py renders its table into docs/serving.md with `table` below.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT / "mtkit" / "data" / "multi30k" / "test_2016_flickr.en.gz"
RECORD = ROOT / "docs" / "results" / "serve-protocols.json"
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


def cpu_flags() -> str:
    """The CPU's vector extensions that matter to PyTorch's kernels (AVX2, AVX-512, AVX512-BF16, AMX)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return ""
    shown = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX512-BF16", "amx_tile": "AMX"}
    return ", ".join(name for flag, name in shown.items() if flag in flags)


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The markdown table: each protocol's latency and its overhead over mtkit's own API (docs/gen_figures.py)."""
    lines = [
        f"| API ({sentences} sentences, one at a time) | p50 ms | p99 ms | mean ms | overhead ms (paired) | "
        "ratio (paired) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        overhead = "-" if row["name"] == BASE else f"{row['overhead_ms']:+.2f}"
        ratio = "-" if row["name"] == BASE else f"{row['paired']:.3f}"
        lines.append(
            f"| {row['name']} | {row['p50']:.1f} | {row['p99']:.1f} | {row['mean']:.1f} | {overhead} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=300, help="test-set lines, each sent through every protocol")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gap-ms", type=float, default=5.0, help="pause between two requests")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=0, help="the server's torch threads (0: PyTorch's)")
    ap.add_argument("--write", action="store_true", help=f"keep the run as {RECORD.relative_to(ROOT)}")
    args = ap.parse_args()
    import httpx
    from procstat import cpu_name  # bench/ is a script's sys.path[0]; here, not at the top: docs/gen_figures.py
    from rounds import latency, paired_ratio  # imports this file for `table` alone
    from serve_latency import start_server

    with gzip.open(TEST, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f][: args.warmup + args.rounds]
    serve = ["-m", str(Path(args.model).resolve()), "--languages", "en-de", "--precision", args.precision]
    serve += ["--threads", str(args.threads)] if args.threads else []
    load_before = os.getloadavg()
    print(f"CPU: {cpu_name()} ({cpu_flags()}), {os.cpu_count()} logical cores; load average before: {load_before}")
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
    load_after = os.getloadavg()
    rows = []
    for name, *_ in PROTOCOLS:
        ms = times[name]
        diffs = [a - b for a, b in zip(ms, times[BASE])]
        row = {"name": name, **latency(ms), "overhead_ms": statistics.median(diffs)}
        row["paired"] = paired_ratio(ms, times[BASE])[0]
        rows.append(row)
        print(
            f"{name:16s} p50 {row['p50']:6.1f}  p90 {row['p90']:6.1f}  p99 {row['p99']:6.1f}  mean {row['mean']:6.1f}"
            f" ms  overhead {row['overhead_ms']:+.2f} ms (paired {row['paired']:.3f}x)"
        )
    print(f"load average after: {load_after}")
    record = {
        "renderer": "bench/serve_protocols.py",
        "what": "one sentence at a time through each API of one `mtkit serve`, interleaved",
        "command": f"python bench/serve_protocols.py --model {Path(args.model).name} --threads {args.threads} "
        f"--rounds {args.rounds} --precision {args.precision} --write",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_name()} ({cpu_flags()}), {os.cpu_count()} logical cores, shared with other jobs",
        "load_average": {"before": load_before[0], "after": load_after[0]},
        "settings": {
            "threads": args.threads,
            "precision": args.precision,
            "gap_ms": args.gap_ms,
            "warmup": args.warmup,
        },
        "test": "test_2016_flickr (English), in order",
        "sentences": args.rounds,
        "words": sum(len(line.split()) for line in lines[args.warmup :]),
        "rows": rows,
        "passes": times,
    }
    if args.write:
        RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RECORD.relative_to(ROOT)}")
    print(json.dumps({name: {k: v for k, v in row.items() if k != "name"} for name, row in zip(times, rows)}))


if __name__ == "__main__":
    main()
