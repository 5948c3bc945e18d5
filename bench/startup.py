"""Start-up: a new process from `import mtkit` to its first translation, with each `--compile` choice, paired.

    python bench/startup.py --model student.pt --rounds 5
    python bench/startup.py --model student.pt --choices off,on,auto --record docs/results/NAME.json

Each start is a fresh Python process (`python -c`) that imports mtkit, opens the model with `load_translator(...,
compile=CHOICE, threads=--threads)` and translates one sentence: what a user waits for before `mtkit translate`
or `mtkit serve` answers. All of them share one mtkit cache directory (--cache, else a new temporary one) which a
first, untimed start of each choice fills (the compiled packages, the kept measurements): its seconds are printed
and recorded as `first_start_s`, the cold start. The timed rounds then take the choices in turns, the order
reversed from round to round. Printed per choice: the median seconds of a start and of each part (import, open,
first translation), and the median over rounds of its start minus the first choice's in the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import Record, cpu_name  # noqa: E402  # bench/ is a script's sys.path[0]

SENTENCE = "A man in a blue shirt is standing on a ladder cleaning windows."
START = """
import json, sys, time
start = time.perf_counter()
import mtkit
imported = time.perf_counter()
translator = mtkit.load_translator(sys.argv[1], device="cpu", compile=sys.argv[2], threads=int(sys.argv[3]))
opened = time.perf_counter()
translator.translate([sys.argv[4]])
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "open_s": opened - imported, "first_s": done - opened,
                  "start_s": done - start}))
"""


def start(model: str, choice: str, threads: int, cache: str) -> dict[str, float]:
    """One fresh process's seconds, by part."""
    env = {**os.environ, "MTKIT_CACHE": cache, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", START, model, choice, str(threads), SENTENCE],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    parts: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return parts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--choices", default="off,on", help="comma-separated --compile choices; the first is the base")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", help="mtkit's cache directory for every start (default: a new temporary one)")
    ap.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    choices = args.choices.split(",")
    cache = args.cache or tempfile.mkdtemp(prefix="mtkit-startup-")
    first = {c: round(start(args.model, c, args.threads, cache)["start_s"], 2) for c in choices}
    passes: dict[str, list[dict[str, float]]] = {c: [] for c in choices}
    for r in range(args.rounds):
        for c in choices if r % 2 == 0 else choices[::-1]:
            passes[c].append(start(args.model, c, args.threads, cache))
    print(f"CPU: {cpu_name()}; {args.rounds} rounds, threads {args.threads}; cold first starts {first}")
    base = passes[choices[0]]
    results: dict[str, Any] = {}
    for c in choices:
        row = {part: round(statistics.median(p[part] for p in passes[c]), 2) for part in passes[c][0]}
        row["over_first_choice_paired_s"] = round(
            statistics.median(a["start_s"] - b["start_s"] for a, b in zip(passes[c], base)), 2
        )
        row["first_start_s"] = first[c]
        results[c] = row
        print(c, json.dumps(row))
    settings = {"model": Path(args.model).name, "choices": choices, "rounds": args.rounds, "threads": args.threads}
    record.write(args.record, settings, passes, results)


if __name__ == "__main__":
    main()
