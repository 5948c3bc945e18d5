"""One sentence at a time, in process: a model's latency per sentence through the Python API
(`mtkit.load_translator(...).translate([line])`), variants of its decoding side by side: what a server's lone
request costs without the HTTP layer.

    python bench/one_sentence.py --model student.pt --src test.en --limit 60
    python bench/one_sentence.py --model student.pt --src test.en --rounds 3 --record docs/results/NAME.json

Variants: `fp32` (greedy over the whole vocabulary) and `int8` (`precision="int8"` with the model's own decoding
defaults: its shortlist where it carries one, as a student ships). Both models are loaded in this process and
warmed up, then --rounds rounds take turns (each variant translates every sentence, one call a sentence, then
the next variant; the order reversed every other round), so that a drifting machine's speed falls on both.
Printed: p50, p90 and mean ms a sentence per variant and how many outputs equal the first variant's; the last
line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import Record, cpu_name, latency  # noqa: E402  # bench/ is a script's sys.path[0]

VARIANTS = ("fp32", "int8")


def load(model: str, variant: str, threads: int) -> tuple[Any, Any]:
    """(translator, DecodeConfig) of one variant: greedy; int8 with the model's own defaults (its shortlist)."""
    import mtkit

    translator = mtkit.load_translator(model, device="cpu", precision=variant, threads=threads)
    greedy = mtkit.DecodeConfig(beam=1, shortlist=False)
    if variant == "int8":  # as a student ships: its own defaults, the shortlist where it carries one
        return translator, translator.settings(beam=1)
    return translator, greedy


def measure(model: str, lines: list[str], variants: list[str], rounds: int, threads: int) -> dict[str, Any]:
    """{variant: {"ms": [per sentence, every round], "outputs": [...]}}, the rounds interleaved."""
    import torch

    torch.set_num_threads(threads)
    loaded = {v: load(model, v, threads) for v in variants}
    for translator, config in loaded.values():
        for line in lines[:4]:
            translator.translate([line], config)
    results: dict[str, Any] = {v: {"ms": [], "outputs": []} for v in variants}
    for r in range(rounds):
        for variant in variants if r % 2 == 0 else variants[::-1]:
            translator, config = loaded[variant]
            for line in lines:
                start = time.perf_counter()
                out = translator.translate([line], config)
                results[variant]["ms"].append((time.perf_counter() - start) * 1000)
                if r == 0:
                    results[variant]["outputs"].append(out[0])
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--src", required=True, help="sentences, one a line")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--variants", default="fp32,int8", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    args = parser.parse_args(argv)
    args.variants = args.variants.split(",")
    if unknown := [v for v in args.variants if v not in VARIANTS]:
        parser.error(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    return args


def main() -> None:
    args = parse_args()
    record = Record()
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()[: args.limit]
    results = measure(args.model, lines, args.variants, args.rounds, args.threads)
    print(f"CPU: {cpu_name()}; {len(lines)} sentences, {args.rounds} rounds, torch threads {args.threads}")
    first = results[args.variants[0]]["outputs"]
    summary = {}
    for variant in args.variants:
        ms, outputs = results[variant]["ms"], results[variant]["outputs"]
        q = latency(ms)
        same = sum(a == b for a, b in zip(outputs, first))
        summary[variant] = {"p50": q["p50"], "p90": q["p90"], "mean": q["mean"], "same": same}
        print(
            f"{variant:9s} p50 {q['p50']:6.2f}  p90 {q['p90']:6.2f}  mean {q['mean']:6.2f} ms"
            f"  same output as {args.variants[0]}: {same}/{len(lines)}"
        )
    settings = {"model": Path(args.model).name, "sentences": len(lines), "rounds": args.rounds, "threads": args.threads}
    record.write(args.record, settings, {v: r["ms"] for v, r in results.items()}, summary)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
