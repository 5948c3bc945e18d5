"""The decoder step over a static key/value cache (mtkit/model/static.py), eager and compiled, against mtkit's own
step over its growing cache: paired and interleaved in one process, on one sentence at a time and on batches.

    python bench/static_step.py --model student.pt --src test.en --scenario one --limit 60 --rounds 2
    python bench/static_step.py --model small.pt --src test.en --scenario batch --limit 128 --rounds 2
    python bench/static_step.py --model student.pt --src test.en --scenario one --record docs/results/NAME.json

Steps: `eager` (mtkit's `ModelStep`, what `mtkit translate` runs), `static` (`StaticStep` running `static_states`
as it is) and `compiled` (`StaticStep` running `static_states` through torch.compile: inductor, dynamic shapes,
its C++ wrapper on the CPU; compiled in the warm-up, whose seconds are printed), each handed to one Translator
through the engine's `steps` (mtkit/decode/torch_engine.py), on every call: `--compile` (mtkit/decode/compiled.py) takes
the compiled step for one-sentence searches only. Scenarios: `one`, each sentence alone with the model's
own decoding defaults at beam 1 (a student's: its shortlist), what a lone request costs; `batch`, --batch
sentences a call at beam 4 over the whole vocabulary. The calls take turns (each call's steps in an order that
reverses from call to call and round to round), so a drifting or shared machine's speed falls on all of them.

Printed per step: p50 and mean ms a call, the median over calls of its time over eager's on the same call, the
total time over eager's, and how many outputs equal eager's. `--profile` adds, for eager and compiled, one
profiled pass: the operations a decoder step calls and the share of the time in the products (linear layers and
attention's matrix products). The last line printed is one JSON object; `--record` writes it as a record.
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

STEPS = ("eager", "static", "compiled")
SCENARIOS = ("one", "batch")
# Profiler events that are products: oneDNN's and MKL's linear layers, attention's batched products, int8's.
PRODUCTS = ("mkldnn", "addmm", "aten::mm", "aten::bmm", "linear_dynamic", "quantized", "fbgemm", "onednn")


def compiled_states() -> Any:
    """`static_states` through torch.compile as `--compile` runs it (mtkit/decode/compiled.py): dynamic shapes,
    inductor's C++ wrapper, eager again if compiling fails."""
    from mtkit.decode.compiled import Compiled

    return Compiled()


def factories(steps: list[str]) -> dict[str, Any]:
    """{step: what the engine's `steps` is set to} (None: mtkit's own)."""
    from mtkit.decode.ensemble import static_steps

    made = {"eager": None, "static": static_steps(), "compiled": None}
    if "compiled" in steps:
        made["compiled"] = static_steps(compiled_states())
    return {s: made[s] for s in steps}


def calls_of(lines: list[str], scenario: str, batch: int) -> list[list[str]]:
    size = 1 if scenario == "one" else batch
    return [lines[i : i + size] for i in range(0, len(lines), size)]


def measure(translator: Any, config: Any, calls: list[list[str]], steps: dict[str, Any], rounds: int) -> dict[str, Any]:
    """{step: {"ms": [per call, every round], "outputs": [...], "warmup_s": ...}}, the calls taking turns."""
    engine = translator.engine
    results: dict[str, Any] = {s: {"ms": [], "outputs": [], "warmup_s": 0.0} for s in steps}
    for name, factory in steps.items():
        engine.steps = factory
        start = time.perf_counter()
        for call in calls[:2]:
            translator.translate(call, config)
        results[name]["warmup_s"] = round(time.perf_counter() - start, 2)
    order = list(steps)
    for r in range(rounds):
        for i, call in enumerate(calls):
            for name in order if (i + r) % 2 == 0 else order[::-1]:
                engine.steps = steps[name]
                start = time.perf_counter()
                out = translator.translate(call, config)
                results[name]["ms"].append((time.perf_counter() - start) * 1000)
                if r == 0:
                    results[name]["outputs"] += out
    engine.steps = None
    return results


def profile(translator: Any, config: Any, calls: list[list[str]], factory: Any) -> dict[str, float]:
    """One profiled pass over `calls` with the engine's `steps` = factory: per decoder step, the operations called
    (inside the step and in the search around it) and the CPU time, and the share of that time in products."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from mtkit.decode import step as step_module

    counted = [0]
    original = step_module.ModelStep.log_probs

    def counting(self: Any, last: Any) -> Any:
        counted[0] += 1
        return original(self, last)

    translator.engine.steps = factory
    step_module.ModelStep.log_probs = counting  # type: ignore[method-assign]  # StaticStep inherits it
    try:
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for call in calls:
                translator.translate(call, config)
    finally:
        step_module.ModelStep.log_probs = original  # type: ignore[method-assign]
        translator.engine.steps = None
    ops, cpu_ms = collections.Counter[str](), collections.Counter[str]()
    for event in prof.key_averages():
        kind = "products" if any(p in event.key for p in PRODUCTS) else "other"
        ops[kind] += event.count
        cpu_ms[kind] += event.self_cpu_time_total / 1000
    steps = max(counted[0], 1)
    total = cpu_ms["products"] + cpu_ms["other"]
    return {
        "decoder_steps": counted[0],
        "operations_a_step": round((ops["products"] + ops["other"]) / steps, 1),
        "products_a_step": round(ops["products"] / steps, 1),
        "cpu_ms_a_step": round(total / steps, 3),
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
    parser.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="also one profiled pass of eager and compiled")
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

    import mtkit

    torch.set_num_threads(args.threads)
    translator = mtkit.load_translator(args.model, device="cpu", precision=args.precision, threads=args.threads)
    config = translator.settings(beam=1) if args.scenario == "one" else translator.settings(beam=4, shortlist=False)
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()[: args.limit]
    calls = calls_of(lines, args.scenario, args.batch)
    steps = factories(args.steps)
    found = measure(translator, config, calls, steps, args.rounds)
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
        for name in ("eager", "compiled"):
            factory = steps.get(name) if name in steps else factories([name])[name]
            results[f"{name}_profile"] = profile(translator, config, calls, factory)
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
