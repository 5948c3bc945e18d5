"""Ways of running a model's decoder step against eager fp32, as a user runs them through `mtkit.load_translator`:
`compile="on"` (the encoder, and greedy search's steps over a static key/value cache, compiled ahead of time by
AOTInductor for searches of one sentence: mtkit/decode/exported.py; in earlier records one step a call, and before
that the step through torch.compile) and `precision="int8"`, paired and interleaved in one process, on one
sentence at a time (what a server's lone request costs without the HTTP layer) and on batches.

    python bench/static_step.py --model student.pt --src test.en --scenario one --limit 60 --rounds 2
    python bench/static_step.py --model student.pt --src test.en --steps eager,int8 --threads 2   # fp32 and int8
    python bench/static_step.py --model small.pt --src test.en --scenario batch --limit 128 --rounds 2
    python bench/static_step.py --model student.pt --src test.en --scenario one --record docs/results/NAME.json

Steps: `eager` (`compile="off"`, what `mtkit translate` runs by default), `compiled` (`compile="on"`; its
compilation happens in the warm-up, whose seconds are printed) and `int8` (eager at `precision="int8"`; the others
take --precision); `packed-any-rows`, a lever's check: eager with every weight packed for oneDNN read at any number
of rows, as before `PackedWeight.min_rows` (mtkit/runtime/packing.py) kept products of few rows on MKL;
`int8-256-rows`, another: int8 with its output layer in blocks of 256 rows (`PROJECT_ROWS`), as before
`INT8_BLOCK_BYTES` (mtkit/decode/step.py) sized int8's blocks by the bytes of their logits.
Scenarios: `one`, each sentence alone with the model's own decoding defaults at beam 1 (a student's: its
shortlist), what a lone request costs; `batch`, --batch
sentences a call at beam 4 over the whole vocabulary (which `--compile` leaves eager). The calls take turns (each
call's steps in an order that reverses from call to call and round to round), so a drifting or shared machine's
speed falls on all of them. (At the commit of docs/results/static-step-student.json and static-step-small.json the
script handed the engine its steps directly and measured a third, `static`: the static cache's step run eagerly.)

Printed per step: p50 and mean ms a call, the median over calls of its time over eager's on the same call, the
total time over eager's, and how many outputs equal eager's. `--profile` adds, for each step, one profiled pass:
the operations called a sentence and the share of the CPU time in the products (linear layers and attention's
matrix products). The last line printed is one JSON object; `--record` writes it as a record.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import Record, cpu_name  # noqa: E402  # bench/ is a script's sys.path[0]

STEPS = ("eager", "compiled", "int8", "packed-any-rows", "int8-256-rows")
SCENARIOS = ("one", "batch")
# Profiler events that are products: oneDNN's and MKL's linear layers, attention's batched products, int8's.
PRODUCTS = ("mkldnn", "addmm", "aten::mm", "aten::bmm", "linear_dynamic", "quantized", "fbgemm", "onednn")


def calls_of(lines: list[str], scenario: str, batch: int) -> list[list[str]]:
    size = 1 if scenario == "one" else batch
    return [lines[i : i + size] for i in range(0, len(lines), size)]


def load(model: str, steps: list[str], precision: str, threads: int) -> dict[str, Any]:
    """{step: its translator}, each opened by `mtkit.load_translator` as a user would."""
    import mtkit

    translators = {
        name: mtkit.load_translator(
            model,
            device="cpu",
            precision="int8" if name.startswith("int8") else precision,
            threads=threads,
            compile="on" if name == "compiled" else "off",
        )
        for name in steps
    }
    if "packed-any-rows" in translators:  # every packed weight read from one row up, whatever was measured
        for module in translators["packed-any-rows"].engine.model.modules():
            if getattr(module, "packed", None) is not None:
                module.packed.min_rows = 1
    if "int8-256-rows" in translators:  # its output layer's blocks as fp32's (ModelStep.block_rows)
        translators["int8-256-rows"].engine.model.output_proj.quantizes_each_call = False
    return translators


def measure(translators: dict[str, Any], config: Any, calls: list[list[str]], rounds: int) -> dict[str, Any]:
    """{step: {"ms": [per call, every round], "outputs": [...], "warmup_s": ...}}, the calls taking turns."""
    results: dict[str, Any] = {s: {"ms": [], "outputs": [], "warmup_s": 0.0} for s in translators}
    for name, translator in translators.items():
        start = time.perf_counter()
        for call in calls[:2]:
            translator.translate(call, config)
        results[name]["warmup_s"] = round(time.perf_counter() - start, 2)
    order = list(translators)
    for r in range(rounds):
        for i, call in enumerate(calls):
            for name in order if (i + r) % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                out = translators[name].translate(call, config)
                results[name]["ms"].append((time.perf_counter() - start) * 1000)
                if r == 0:
                    results[name]["outputs"] += out
    return results


def profile(translator: Any, config: Any, calls: list[list[str]]) -> dict[str, float]:
    """One profiled pass over `calls`: the operations called a sentence, the CPU time a sentence, and the share of
    that time in products."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for call in calls:
            translator.translate(call, config)
    ops, cpu_ms = collections.Counter[str](), collections.Counter[str]()
    for event in prof.key_averages():
        kind = "products" if any(p in event.key for p in PRODUCTS) else "other"
        ops[kind] += event.count
        cpu_ms[kind] += event.self_cpu_time_total / 1000
    sentences = max(sum(len(call) for call in calls), 1)
    total = cpu_ms["products"] + cpu_ms["other"]
    return {
        "operations_a_sentence": round((ops["products"] + ops["other"]) / sentences, 1),
        "products_a_sentence": round(ops["products"] / sentences, 1),
        "cpu_ms_a_sentence": round(total / sentences, 3),
        "share_in_products": round(cpu_ms["products"] / total, 3) if total else 0.0,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--src", required=True, help="sentences, one a line")
    parser.add_argument("--scenario", choices=SCENARIOS, default="one")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32, help="sentences a call in the batch scenario")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--precision", choices=("fp32", "int8"), default="fp32", help="of eager and compiled")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="also one profiled pass of each step")
    parser.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    args = parser.parse_args(argv)
    args.steps = args.steps.split(",")
    if unknown := [s for s in args.steps if s not in STEPS]:
        parser.error(f"unknown step(s) {', '.join(unknown)}: choose from {', '.join(STEPS)}")
    if args.steps[0] != "eager":
        parser.error("--steps starts with eager: the others are measured against it")
    return args


def main() -> None:
    args = parse_args()
    record = Record()
    import torch

    torch.set_num_threads(args.threads)
    translators = load(args.model, args.steps, args.precision, args.threads)
    first = translators["eager"]
    config = first.settings(beam=1) if args.scenario == "one" else first.settings(beam=4, shortlist=False)
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()[: args.limit]
    calls = calls_of(lines, args.scenario, args.batch)
    found = measure(translators, config, calls, args.rounds)
    eager = found["eager"]
    print(f"CPU: {cpu_name()}; {len(lines)} sentences in {len(calls)} calls, {args.rounds} rounds, "
          f"threads {args.threads}; {config}")  # fmt: skip
    results: dict[str, Any] = {}
    for name in args.steps:
        ms, outputs = found[name]["ms"], found[name]["outputs"]
        paired = statistics.median(a / b for a, b in zip(ms, eager["ms"]))
        row = {
            "p50_ms_a_call": round(statistics.median(ms), 2),
            "mean_ms_a_call": round(statistics.fmean(ms), 2),
            "time_over_eager_paired_median": round(paired, 3),
            "time_over_eager_total": round(sum(ms) / sum(eager["ms"]), 3),
            "same_outputs_as_eager": f"{sum(a == b for a, b in zip(outputs, eager['outputs']))} of {len(outputs)}",
            "warmup_s": found[name]["warmup_s"],
        }
        if args.scenario == "batch":
            row["sentences_per_s"] = round(len(lines) * args.rounds / (sum(ms) / 1000), 2)
        results[name] = row
        print(name, json.dumps(row))
    if args.profile:
        for name, translator in translators.items():
            results[f"{name}_profile"] = profile(translator, config, calls)
            print(f"{name} profile", json.dumps(results[f"{name}_profile"]))
    settings = {
        "model": Path(args.model).name,
        "scenario": args.scenario,
        "decode": str(config),
        "precision": args.precision,
        "sentences": len(lines),
        "calls": len(calls),
        "rounds": args.rounds,
        "threads": args.threads,
        "torch": str(torch.__version__),
    }
    record.write(args.record, settings, {s: found[s]["ms"] for s in args.steps}, results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
