"""Where a beam search's time goes: torch.profiler over mtkit's engine, eager or with the compiled step.

    python bench/decode_profile.py --model M.pt --limit 100             # eager
    python bench/decode_profile.py --model M.pt --limit 100 --compile   # bench/compiled_step.py (compiles first)
    python bench/decode_profile.py --model student.pt --beam 1 --precision int8   # a student's greedy search

Translates --limit lines of the input (beam 4 unless --beam, fairseq length normalisation 0.6, batches of 4,096
source tokens, as bench/translate_speed.py does) once untimed (warm-up, and the compilation with --compile), then
once under the profiler, and prints: the decoder steps, the operations a step runs (PyTorch operations called from
Python, nested ones not counted again; inside the decoder step and in the search around it), the share of the time
in the decoder step and in its products (matrix products and linear layers, oneDNN's or not), and the operations
that took the most time. The profiler adds a few microseconds an operation, so the shares of a step of many small
operations lean towards overhead; the counts are exact. The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from typing import Any

from procstat import cpu_name  # bench/ is a script's sys.path[0]
from translate_speed import DATA, ROOT, read_lines

PRODUCTS = ("mm", "addmm", "bmm", "matmul", "linear", "_linear_pointwise", "_mkl_linear")
STEP = "decoder_step"


def is_product(name: str) -> bool:
    return name.split("::")[-1] in PRODUCTS


def profile(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import torch
    from torch.profiler import ProfilerActivity, record_function

    from mtkit.config import DecodeConfig
    from mtkit.decode import step
    from mtkit.decode.loading import load_translator

    torch.set_num_threads(args.threads)
    translator = load_translator(args.model, device="cpu", precision=args.precision, threads=args.threads)
    if args.compile:
        from compiled_step import CompiledStep, compile_model

        engine = translator.engine
        engine.steps = compile_model(engine.model)  # type: ignore[attr-defined]  # handed to the search
    config = DecodeConfig(beam=args.beam, alpha=0.6, lenpen="fairseq", max_len_a=1.0, max_len_b=50)
    lines = read_lines(args.input, args.limit)
    start = time.perf_counter()
    list(translator.translate_stream(lines, config, 4096))
    warmup = time.perf_counter() - start
    timed = CompiledStep if args.compile else step.ModelStep  # the class whose steps the search calls
    eager_log_probs, steps = timed.log_probs, [0]

    def log_probs(self: Any, last: Any) -> Any:
        steps[0] += 1
        with record_function(STEP):
            return eager_log_probs(self, last)

    timed.log_probs = log_probs  # type: ignore[method-assign]
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        list(translator.translate_stream(lines, config, 4096))
        seconds = time.perf_counter() - start
    events = prof.events()
    total = sum(e.cpu_time_total for e in events if e.cpu_parent is None and e.name != STEP) + sum(
        e.cpu_time_total for e in events if e.name == STEP
    )
    in_step = sum(e.cpu_time_total for e in events if e.name == STEP)
    inside = [e for e in events if e.cpu_parent is not None and e.cpu_parent.name == STEP]
    around = [e for e in events if e.cpu_parent is None and e.name != STEP]
    products = sum(e.self_cpu_time_total for e in events if is_product(e.name))
    # Products' own time plus that of the oneDNN/MKL calls nested under them.
    products += sum(e.cpu_time_total for e in events if e.cpu_parent is not None and is_product(e.cpu_parent.name))
    by_self: Counter[str] = Counter()
    for e in events:
        by_self[e.name] += e.self_cpu_time_total
    n = max(steps[0], 1)
    return {
        "bench": "decode_profile",
        "model": args.model,
        "sentences": len(lines),
        "compiled": args.compile,
        "beam": args.beam,
        "precision": args.precision,
        "warmup_s": round(warmup, 1),
        "profiled_s": round(seconds, 2),
        "decoder_steps": steps[0],
        "ops_per_step_in_decoder_step": round(len(inside) / n, 1),
        "ops_per_step_in_search_around_it": round(len(around) / n, 1),
        "share_in_decoder_step": round(in_step / max(total, 1), 3),
        "share_in_products": round(products / max(total, 1), 3),
        "top_self_ms": {k: round(v / 1000, 1) for k, v in by_self.most_common(12)},
        "cpu": cpu_name(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a trained mtkit model or checkpoint")
    parser.add_argument("--input", default=str(DATA / "test_2016_flickr.en.gz"), help="source text (.gz is fine)")
    parser.add_argument("--limit", type=int, default=100, help="translate the first N lines")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="the compiled decoder step (bench/compiled_step.py)")
    parser.add_argument("--beam", type=int, default=4, help="beam size (1: greedy search)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    result = profile(parser.parse_args())
    for key, value in result.items():
        if key != "top_self_ms":
            print(f"{key:<34} {value}")
    print("most self time (ms):", ", ".join(f"{k} {v}" for k, v in result["top_self_ms"].items()))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
