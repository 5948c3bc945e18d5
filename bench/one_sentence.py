"""One sentence at a time, in process: a model's latency per sentence through `Translator.translate`, variants
of its decoding side by side (what a server's lone request costs without the HTTP layer).

    python bench/one_sentence.py --model student.pt --src test.en --limit 60
    python bench/one_sentence.py --model student.pt --src test.en --variants fp32,int8,compiled --threads 2

Variants: `fp32` (the whole vocabulary), `int8` (`--precision int8` with the model's shortlist if it carries
one, as a student ships), `compiled` (fp32 with its decoder step under torch.compile: bench/compiled_step.py;
warmed up on every sentence first, since each new shape compiles). Every variant's model is loaded in this
process and warmed up, then --rounds rounds take turns (each variant translates every sentence, one request a
sentence, then the next variant), so that a drifting machine's speed falls on all of them. Printed: p50, p90 and
mean ms a sentence per variant, and how many outputs equal the first variant's; the last line is one JSON object.
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

from procstat import cpu_name  # noqa: E402  # bench/ is a script's sys.path[0]
from rounds import latency  # noqa: E402

VARIANTS = ("fp32", "int8", "compiled")


def load(model: str, variant: str, threads: int) -> tuple[Any, Any]:
    """(translator, DecodeConfig) of one variant: greedy, the shortlist only for int8 (where the model has one)."""
    from mtkit.config import DecodeConfig
    from mtkit.decode.loading import load_translator

    precision = "int8" if variant == "int8" else "fp32"
    translator = load_translator(model, device="cpu", precision=precision, threads=threads)
    if variant == "compiled":
        from compiled_step import compile_model  # bench/ is a script's sys.path[0]

        engine = translator.engine
        engine.steps = compile_model(engine.model)  # type: ignore[attr-defined]
    greedy = DecodeConfig(beam=1, shortlist=False)
    if variant == "int8":  # as a student ships: its own defaults, the shortlist where it carries one
        return translator, translator.settings(beam=1)
    return translator, greedy


def measure(model: str, lines: list[str], variants: list[str], rounds: int, threads: int) -> dict[str, Any]:
    """{variant: {"ms": [per sentence, every round], "outputs": [...]}}, the rounds interleaved."""
    import torch

    torch.set_num_threads(threads)
    loaded = {v: load(model, v, threads) for v in variants}
    for variant, (translator, config) in loaded.items():  # compiled: every sentence's shapes compile here
        for line in lines if variant == "compiled" else lines[:4]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--src", required=True, help="sentences, one a line")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--variants", default="fp32,int8", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()[: args.limit]
    results = measure(args.model, lines, variants, args.rounds, args.threads)
    print(f"CPU: {cpu_name()}; {len(lines)} sentences, {args.rounds} rounds, torch threads {args.threads}")
    first = results[variants[0]]["outputs"]
    summary = {}
    for variant in variants:
        ms, outputs = results[variant]["ms"], results[variant]["outputs"]
        q = latency(ms)
        same = sum(a == b for a, b in zip(outputs, first))
        summary[variant] = {"p50": q["p50"], "p90": q["p90"], "mean": q["mean"], "same": same}
        print(
            f"{variant:9s} p50 {q['p50']:6.2f}  p90 {q['p90']:6.2f}  mean {q['mean']:6.2f} ms"
            f"  same output as {variants[0]}: {same}/{len(lines)}"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
