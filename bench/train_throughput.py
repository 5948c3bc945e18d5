"""Training throughput of `mtkit train`: target tokens/s, seconds per update, peak memory, MFU, fairseq beside it.

Runs the command line itself (`python -m mtkit train`) for each preset, precision and compile setting, one
process each (so that its peak RSS is its own), with a log line every update, and reads the figures from the
run's metrics.jsonl: the first --warmup-steps updates are not timed, and every update's own seconds (the loop's
clock: everything an update costs) are kept as the record's passes. The data: --data (a directory `mtkit bpe`
made), else a synthetic corpus made by `mtkit bpe` from random words with WMT-like
sentence lengths (median ~20 words) and the paper's 37k vocabulary. Batches of --max-tokens, one a update
(or --max-tokens auto: the preset's ~25k-token update in as few batches as fit on a GPU, probed at start).

    python bench/train_throughput.py                       # small and base, fp32, on CPU
    python bench/train_throughput.py --preset base --preset big --precision bf16 --device cuda
    python bench/train_throughput.py --preset small --compile off --compile on     # eager against compiled
    # against fairseq 0.12 (bench/peers/setup.sh + prep_multi30k.sh, PEERS=/tmp/peers), right after each preset:
    python bench/train_throughput.py --data DATA --precision fp32 --precision bf16 --fairseq --record OUT.json

Target tokens are the non-pad decoder outputs, EOS included: fairseq's `wps`. MFU(6N) is 6 x parameters x target
tokens/s over the device's peak: --peak-gflops, else a GPU's dense bf16 peak by name, else on a CPU the rate of a
large product in the run's precision measured on the spot. Prints one line per configuration and, last, one JSON
line with every figure; `--record PATH` also writes them as a record (bench/harness.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import Record  # bench/ is a script's sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}  # dense bf16
FAIRSEQ_ARCH = {"small": "small", "base": "big"}  # bench/peers/train_throughput.sh's names: big = the paper's base
PEERS = Path(__file__).resolve().parent / "peers"  # the scripts; --peers names their working directory
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def mtkit(*args: str) -> subprocess.CompletedProcess:
    """`mtkit ARGS` from this checkout, its output captured; a failure ends the bench with mtkit's words."""
    done = subprocess.run([sys.executable, "-m", "mtkit", *args], capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        raise SystemExit(f"mtkit {args[0]} failed ({exit_status(done.returncode)}): {done.stderr.strip()[-2000:]}")
    return done


def make_corpus(out: Path, sentences: int, vocab: int, seed: int) -> Path:
    """A data directory of random words with WMT-like lengths, src -> tgt: its raw text written as `mtkit prepare`
    lays it out (DIR/raw/SPLIT.LANG), then `mtkit bpe` (no Moses normalisation: it runs where sacremoses is
    missing)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {lang: ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(2 * vocab)] for lang in "ed"}
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", sentences), ("valid", 64)):
        lengths = [max(1, min(200, round(rng.lognormvariate(3.0, 0.55)))) for _ in range(n)]
        for lang, name in (("e", "src"), ("d", "tgt")):  # no language: `mtkit bpe` takes them in this order
            text = "".join(
                " ".join(rng.choices(words[lang], k=max(1, round(n_words * rng.uniform(0.8, 1.25))))) + "\n"
                for n_words in lengths
            )
            (raw / f"{split}.{name}").write_text(text, encoding="utf-8")
    mtkit("bpe", str(out), "--vocab-size", str(vocab))
    return out


def cpu_matmul_peak(precision: str) -> float:
    """FLOP/s of a large product (4096 x 1024 x 4096) in `precision` on this CPU, best of 5: the peak MFU is of."""
    import time

    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    x, w = torch.randn(4096, 1024, dtype=dtype), torch.randn(4096, 1024, dtype=dtype)
    best = float("inf")
    with torch.no_grad():
        F.linear(x, w)
        for _ in range(5):
            start = time.perf_counter()
            F.linear(x, w)
            best = min(best, time.perf_counter() - start)
    return 2 * 4096 * 1024 * 4096 / best


def run_one(args: argparse.Namespace, preset: str, precision: str, compile: str, data: str, tmp: str) -> dict:
    """One configuration: `mtkit train` for warmup + steps updates, its figures read from its metrics.jsonl."""
    run = Path(tmp) / f"run-{preset}-{precision}-compile-{compile}"
    batch = (
        ["--max-tokens", "auto"]
        if args.max_tokens == "auto"
        else ["--max-tokens", args.max_tokens, "--update-freq", "1"]
    )
    cmd = [sys.executable, "-m", "mtkit", "train", data, "--out", str(run), "--preset", preset,
           "--precision", precision, "--compile", compile, *batch, "--device", args.device,
           "--threads", str(args.threads), "--max-steps", str(args.warmup_steps + args.steps), "--log-every", "1",
           "--valid-every", str(10**9), "--save-every-steps", "0", "--save-every-minutes", "0", "--warmup", "4000",
           "--restart"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    child = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if child.returncode != 0:  # how it ended as well as its last words: a compiled step once died silently
        how = exit_status(child.returncode)
        print(f"{preset} {precision} compile {compile}: failed ({how})\n{child.stderr[-2000:]}", file=sys.stderr)
        return {"preset": preset, "precision": precision, "compile": compile, "exit": how, "error": child.stderr[-300:]}
    peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    start = next(r for r in records if r["event"] == "start")
    timed = [r for r in records if r["event"] == "train" and r["step"] > args.warmup_steps]
    seconds = [r["s_per_update"] for r in timed]
    tgt = sum(r["tgt_tokens_per_s"] * r["s_per_update"] for r in timed)
    out = {
        "preset": preset,
        "asked_precision": precision,
        **{key: start.get(key) for key in ("precision", "compile", "compile_s", "shapes", "pad_eff", "fp32_matmul")},
        **{key: start.get(key) for key in ("max_tokens", "update_freq", "params", "torch_threads")},
        "device": args.device,
        "steps": len(timed),
        "passes_s": seconds,
        "tgt_tokens_per_s": round(tgt / sum(seconds), 1),
        "s_per_update": round(sum(seconds) / len(seconds), 4),
        # the largest child's peak so far: one configuration's own where it is the largest (each runs alone)
        "peak_rss_mb": round(max(peak_rss, before) / 1024, 1),
    }
    peak = args.peak_gflops * 1e9 or (cpu_matmul_peak(start["precision"]) if args.device == "cpu" else 0.0)
    if str(start.get("device", "")).startswith("cuda"):
        import torch

        out["gpu"] = name = torch.cuda.get_device_name()
        peak = peak or next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0) * 1e12
    out["peak_gflops"] = round(peak / 1e9, 1)
    out["mfu_6n"] = round(6 * out["params"] * out["tgt_tokens_per_s"] / peak, 4) if peak else None
    print(
        f"{preset:>6} {precision}->{out['precision']} compile {out['compile']}, {out['shapes']} shapes, "
        f"{out['update_freq']} x {out['max_tokens']:,} tokens: {out['tgt_tokens_per_s']:>8,.0f} tgt tokens/s, "
        f"{out['s_per_update']:.3f} s/update, peak RSS {out['peak_rss_mb']:,.0f} MB"
        + (f", MFU(6N) {out['mfu_6n']:.1%}" if out["mfu_6n"] else "")
        + f" ({out['params'] / 1e6:.1f} M params, {out['torch_threads']} threads, fp32 products: {out['fp32_matmul']})"
    )
    return out


def run_fairseq(preset: str, steps: int, peers: Path) -> dict:
    """fairseq 0.12's figures from the peers' script (its own Multi30k data and venv under $PEERS)."""
    arch = FAIRSEQ_ARCH[preset]
    cmd = ["bash", str(PEERS / "train_throughput.sh"), arch, str(steps)]
    child = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PEERS": str(peers)})
    steady = re.search(r"steady .*?: (\d+) tgt tok/s, ([\d.]+) s/update", child.stdout)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", child.stdout)
    if child.returncode != 0 or not steady:
        return {"preset": preset, "system": "fairseq", "error": (child.stdout + child.stderr)[-300:]}
    return {
        "preset": preset,
        "system": "fairseq",
        "arch": arch,
        "precision": "fp32",
        "updates": steps,
        "tgt_tokens_per_s": float(steady[1]),
        "s_per_update": float(steady[2]),
        "peak_rss_mb": round(int(rss[1]) / 1024, 1) if rss else None,
    }


def exit_status(code: int) -> str:
    """'exit status N', or the signal that ended the process ('killed by SIGSEGV')."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", action="append", help="Preset(s) to measure (default: small and base).")
    parser.add_argument("--precision", action="append", help="fp32, bf16, fp16, auto (default: fp32).")
    parser.add_argument("--compile", action="append", help="auto, on, off; several: each measured (default: auto).")
    parser.add_argument("--steps", type=int, default=20, help="Timed updates per configuration.")
    parser.add_argument("--warmup-steps", type=int, default=3, help="Untimed updates first.")
    parser.add_argument(
        "--max-tokens", default="4096", help="Tokens per batch and side (one batch an update), or auto."
    )
    parser.add_argument("--vocab", type=int, default=37000, help="Vocabulary of the synthetic corpus (the paper's).")
    parser.add_argument("--sentences", type=int, default=20000, help="Sentence pairs in the synthetic corpus.")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto.")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default).")
    parser.add_argument("--peak-gflops", type=float, default=0.0, help="Device peak for MFU (0: see above).")
    parser.add_argument(
        "--fairseq", action="store_true", help="Also run fairseq 0.12 (peers script) after each preset."
    )
    parser.add_argument("--fairseq-steps", type=int, default=0, help="fairseq updates (0: 60 for small, 20 for base).")
    parser.add_argument("--peers", default="/tmp/peers", help="$PEERS of bench/peers/setup.sh (its venv and data).")
    parser.add_argument("--data", help="A data directory (`mtkit bpe` made it) instead of a synthetic corpus.")
    parser.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    presets, precisions, compiles = (
        args.preset or ["small", "base"],
        args.precision or ["fp32"],
        args.compile or ["auto"],
    )
    if args.fairseq and not args.data:
        print("note: --fairseq without --data compares fairseq's Multi30k with a synthetic corpus", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or str(make_corpus(Path(tmp) / "data", args.sentences, args.vocab, seed=1))
        results = []
        for preset in presets:
            for precision in precisions:
                for compile in compiles:
                    results.append(run_one(args, preset, precision, compile, data, tmp))
            if args.fairseq:
                results.append(
                    run_fairseq(preset, args.fairseq_steps or {"small": 60}.get(preset, 20), Path(args.peers))
                )
                add_fairseq_ratios(results, preset)
    settings = {k: v for k, v in vars(args).items() if k not in ("record", "peers")}
    settings["data"] = Path(args.data).name if args.data else f"synthetic, {args.sentences} pairs, vocab {args.vocab}"
    passes = {
        f"{r['preset']} {r['asked_precision']} compile {r['compile']}": r["passes_s"]
        for r in results
        if "passes_s" in r
    }
    record.write(args.record, settings, passes, results)
    print(json.dumps({"bench": "train_throughput", "results": results}))


def add_fairseq_ratios(results: list[dict[str, Any]], preset: str) -> None:
    """fairseq's line, and each mtkit configuration of this preset as a ratio to it (added to its row)."""
    fs = results[-1]
    if "error" in fs:
        print(f"{preset:>6} fairseq: failed: {fs['error']}", file=sys.stderr)
        return
    print(f"{preset:>6} fairseq fp32: {fs['tgt_tokens_per_s']:>8,.0f} tgt tokens/s, {fs['s_per_update']:.3f} s/update")
    for r in results[:-1]:
        if r.get("preset") == preset and "tgt_tokens_per_s" in r and r.get("system") != "fairseq":
            r["vs_fairseq_fp32"] = round(r["tgt_tokens_per_s"] / fs["tgt_tokens_per_s"], 3)
            print(f"{preset:>6} mtkit {r['precision']} / fairseq fp32: {r['vs_fairseq_fp32']:.2f}x target tokens/s")


if __name__ == "__main__":
    main()
