"""Training throughput of `mtkit train`: target tokens/s, seconds per update, peak memory, FLOPs, fairseq beside it.

Runs the real training loop (mtkit.train.trainer.train) for each preset and precision in a
fresh child process (so that peak RSS belongs to one configuration), on a synthetic corpus
with WMT-like BPE lengths (median ~25 tokens) and the paper's 37k vocabulary, at a fixed
--max-tokens and update-freq 1 (or --max-tokens auto: the paper's ~25k-token update in as few steps as fit on
the GPU, mtkit/train/probe.py). The first --warmup-steps updates are not timed. Figures come
from the loop's own per-update log (log_every=1), so they include everything an update costs.

    python bench/train_throughput.py                       # small and base, fp32, on CPU
    python bench/train_throughput.py --preset base --preset big --precision bf16 --device cuda
    # eager against torch.compile, paired (each preset and precision runs both, one after the other):
    python bench/train_throughput.py --preset small --preset base --compile on --compile off
    # against fairseq: Multi30k as `mtkit prepare` + `mtkit bpe --vocab-size 8000` make it, and
    # fairseq 0.12 (bench/peers/setup.sh + prep_multi30k.sh, PEERS=/tmp/peers) right after each mtkit run:
    python bench/train_throughput.py --data DATA/multi30k-en-de --precision fp32 --precision bf16 --fairseq

Prints one line per configuration and, last, one JSON line with every figure. Target tokens are
the non-pad decoder outputs, EOS included: fairseq's `wps`. FLOPs per target token count
6 x (encoder params x source tokens + (decoder params + output projection) x target tokens) /
target tokens (matrix products only; attention scores, ~1% at Multi30k's lengths, are not counted),
and the fraction of peak divides the achieved FLOP/s by the device's: --peak-gflops, else on a CPU the
rate of a large product measured on the spot (`cpu_matmul_peak`: MKL's AVX2 code on an AMD EPYC gave
the ~188 GFLOP/s once quoted as this CPU's fp32 peak; oneDNN reaches ~500 there) and on GPUs the dense bf16 peak.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}  # dense bf16
FAIRSEQ_ARCH = {"small": "small", "base": "big"}  # bench/peers/train_throughput.sh's names: big = the paper's base
PEERS = Path(__file__).resolve().parent / "peers"  # the scripts; --peers names their working directory


def make_corpus(out: Path, sentences: int, vocab: int, seed: int) -> Path:
    """Random ids with WMT-like lengths; a small real SentencePiece model stands in for the vocabulary."""
    from mtkit.data.binarize import BinaryWriter
    from mtkit.data.vocab import train_bpe

    rng = np.random.default_rng(seed)
    (out / "bin").mkdir(parents=True, exist_ok=True)
    for split, n in (("train", sentences), ("valid", 64)):
        src_len = np.clip(rng.lognormal(np.log(25), 0.55, n), 1, 250).astype(int)
        tgt_len = np.clip(src_len * rng.uniform(0.8, 1.25, n), 1, 250).astype(int)
        for lang, lengths in (("en", src_len), ("de", tgt_len)):
            with BinaryWriter(out / "bin" / f"{split}.{lang}", vocab) as w:
                w.add_many([rng.integers(4, vocab, length) for length in lengths])
    # A stand-in (--vocab sizes the model, the ids are random); 260 of its 270 ids are special and byte pieces.
    (out / "spm.model").write_bytes(train_bpe(["a b c d e f g h"] * 10, vocab_size=270))
    (out / "bpe.json").write_text(json.dumps({"src_lang": "en", "tgt_lang": "de", "vocab_size": vocab}))
    return out


def flops_per_token_pair(model) -> tuple[int, int]:
    """Parameters that multiply each source token, and each target token (output projection included)."""
    enc = sum(p.numel() for p in model.encoder.parameters())
    dec = sum(p.numel() for p in model.decoder.parameters()) + model.tgt_embed.table.weight.numel()
    return enc, dec


def count_tokens(trainer) -> list[tuple[int, int]]:
    """Wrap the loop's accumulate so that each update's (source, target) real tokens are recorded."""
    real_accumulate, counts = trainer.accumulate, []

    def counting(model, split, group, *rest, **kwargs):
        src = sum(int(split.src_sizes[i].sum()) + len(i) for i in group)  # + EOS per sentence
        tgt = sum(int(split.tgt_sizes[i].sum()) + len(i) for i in group)
        counts.append((src, tgt))
        return real_accumulate(model, split, group, *rest, **kwargs)

    trainer.accumulate = counting
    return counts


def run_one(args: argparse.Namespace) -> dict:
    """One configuration, in this process: train warmup+steps updates and read the loop's own log."""
    import torch

    from mtkit.config import get_preset, model_config
    from mtkit.data.dataset import open_data
    from mtkit.train import plan, trainer

    # The synthetic corpus has no real 37k-piece SentencePiece model; the check that the model
    # and spm.model agree is irrelevant to speed, so it is switched off here (and only here).
    plan.check_vocab = lambda *a: None
    counts = count_tokens(trainer)
    preset = get_preset(args.preset[0])
    model_cfg = model_config(preset.name, open_data(args.data).vocab_size)
    auto = args.max_tokens == "auto"  # the paper's ~25k-token update, one step where it fits (mtkit/train/probe.py)
    train_cfg = dataclasses.replace(
        preset.train,
        max_tokens="auto" if auto else int(args.max_tokens),
        max_tokens_fallback=preset.train.max_tokens if isinstance(preset.train.max_tokens, int) else 4096,
        update_freq=1,
        update_tokens=25_000 if auto else 0,
        precision=args.precision[0],
        compile=args.compile[0],
        max_steps=args.warmup_steps + args.steps,
        log_every=1,
        valid_every=10**9,
        save_every_steps=0,
        save_every_minutes=0.0,
        warmup=4000,
    )
    run = Path(args.workdir) / f"run-{preset.name}-{args.precision[0]}-compile-{args.compile[0]}"
    result = trainer.train(args.data, run, model_cfg, train_cfg, device=args.device, threads=args.threads)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    start = next(r for r in records if r["event"] == "start")
    resolved = start["precision"]
    timed = [r for r in records if r["event"] == "train" and r["step"] > args.warmup_steps]
    seconds = sum(r["s_per_update"] for r in timed)
    src_tokens, tgt_tokens = (sum(c[k] for c in counts[args.warmup_steps :]) for k in (0, 1))
    enc, dec = flops_per_token_pair(result.model)
    flops = 6 * (enc * src_tokens + dec * tgt_tokens)
    out = {
        "preset": preset.name,
        "precision": args.precision[0],
        "resolved": resolved,
        "compile": start.get("compile"),  # on | off, as resolved
        "compile_s": start.get("compile_s"),
        "shapes": start.get("shapes"),  # batch shapes an epoch (bucketed when compiling)
        "pad_eff": start.get("pad_eff"),
        "fp32_matmul": start.get("fp32_matmul"),  # the CPU backend auto picked (it may differ run to run on some CPUs)
        "cpu_heap": start.get("cpu_heap"),  # keep: freed memory reused (mtkit/heap.py); MTKIT_CPU_HEAP=default: not
        "device": args.device,
        "max_tokens": start["max_tokens"],  # as resolved: auto's answer
        "update_freq": start["update_freq"],
        "max_tokens_why": start.get("max_tokens_why"),
        "vocab": model_cfg.vocab_size,
        "params": sum(p.numel() for p in result.model.parameters()),
        "threads": torch.get_num_threads(),
        "steps": len(timed),
        "tgt_tokens_per_s": round(tgt_tokens / seconds, 1),
        "tokens_per_s": round((src_tokens + tgt_tokens) / seconds, 1),
        "s_per_update": round(seconds / len(timed), 4),
        "flops_per_tgt_token": round(flops / tgt_tokens),
        "gflops": round(flops / seconds / 1e9, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    peak = args.peak_gflops * 1e9
    if torch.cuda.is_available() and args.device != "cpu":
        name = torch.cuda.get_device_name()
        peak = peak or next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0) * 1e12
        out.update(gpu=name, peak_gpu_mem_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1))
    if not peak and args.device == "cpu":
        peak = cpu_matmul_peak(resolved)
    out["peak_gflops"] = round(peak / 1e9, 1)
    # the usual yardstick: 6 x parameters x target tokens per second, as a share of the peak
    out["mfu_6n"] = round(6 * out["params"] * tgt_tokens / seconds / peak, 4) if peak else None
    out["fraction_of_peak"] = round(flops / seconds / peak, 4) if peak else None
    return out


def cpu_matmul_peak(precision: str) -> float:
    """FLOP/s of a large product (4096 x 1024 x 4096) in `precision` on this CPU, best of 5, through the faster of
    PyTorch's default and oneDNN (mtkit/runtime/matmul.py): the measured peak that MFU is a fraction of."""
    import time

    import torch
    import torch.nn.functional as F

    from mtkit.kernels.linear import onednn_linear
    from mtkit.runtime.matmul import onednn_works

    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    x, w = torch.randn(4096, 1024, dtype=dtype), torch.randn(4096, 1024, dtype=dtype)
    kernels = [F.linear] + ([onednn_linear] if onednn_works() and dtype == torch.float32 else [])
    best = float("inf")
    with torch.no_grad():
        for kernel in kernels:
            kernel(x, w, None)
            for _ in range(5):
                start = time.perf_counter()
                kernel(x, w, None)
                best = min(best, time.perf_counter() - start)
    return 2 * 4096 * 1024 * 4096 / best


def run_fairseq(preset: str, steps: int, peers: Path) -> dict:
    """fairseq 0.12's figures from the peers' script (its own Multi30k data and venv under $PEERS)."""
    import os

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", action="append", help="Preset(s) to measure (default: small and base).")
    parser.add_argument("--precision", action="append", help="fp32, bf16, fp16 (default: fp32).")
    parser.add_argument(
        "--compile", action="append", help="auto, on, off; several: each measured, paired (default: auto)."
    )
    parser.add_argument("--steps", type=int, default=20, help="Timed updates per configuration.")
    parser.add_argument("--warmup-steps", type=int, default=3, help="Untimed updates first.")
    parser.add_argument(
        "--max-tokens",
        default="4096",
        help="Tokens per batch and side (update-freq 1), or auto: the paper's ~25k-token update in as few steps as "
        "fit, probed at start (on a CPU the preset's value, 7 steps for base).",
    )
    parser.add_argument("--vocab", type=int, default=37000, help="Vocabulary size (the paper's joint BPE: 37k).")
    parser.add_argument("--sentences", type=int, default=20000, help="Sentence pairs in the synthetic corpus.")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto.")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default).")
    parser.add_argument(
        "--peak-gflops",
        type=float,
        default=0.0,
        help="Device peak for the fraction of peak (0: the GPU's by name; on CPU a product measured on the spot).",
    )
    parser.add_argument(
        "--fairseq", action="store_true", help="Also run fairseq 0.12 (peers script) after each preset."
    )
    parser.add_argument(
        "--fairseq-steps",
        type=int,
        default=0,
        help="fairseq updates (0: 60 for small, 20 for base; the first 10 are not timed).",
    )
    parser.add_argument("--peers", default="/tmp/peers", help="$PEERS of bench/peers/setup.sh (its venv and data).")
    parser.add_argument("--data", help="Use this binarized data directory instead of a synthetic corpus.")
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args)))
        return
    presets, precisions = args.preset or ["small", "base"], args.precision or ["fp32"]
    compiles = args.compile or ["auto"]
    if args.fairseq and not args.data:
        print(
            "note: --fairseq without --data compares fairseq's Multi30k with mtkit's synthetic corpus", file=sys.stderr
        )
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or str(make_corpus(Path(tmp) / "data", args.sentences, args.vocab, seed=1))
        results = []
        for preset in presets:
            for precision in precisions:
                for compile in compiles:
                    results.append(run_child(args, preset, precision, data, tmp, compile))
            if args.fairseq:
                steps = args.fairseq_steps or {"small": 60}.get(preset, 20)
                results.append(run_fairseq(preset, steps, Path(args.peers)))
                print_fairseq(results, preset)
    print(json.dumps({"bench": "train_throughput", "results": results}))


def exit_status(code: int) -> str:
    """'exit status N', or the signal that ended the process ('killed by SIGSEGV')."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def run_child(args: argparse.Namespace, preset: str, precision: str, data: str, tmp: str, compile: str) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--one",
        "--preset",
        preset,
        "--precision",
        precision,
        "--compile",
        compile,
        "--data",
        data,
        "--workdir",
        tmp,
        "--steps",
        str(args.steps),
        "--warmup-steps",
        str(args.warmup_steps),
        "--max-tokens",
        str(args.max_tokens),
        "--vocab",
        str(args.vocab),
        "--device",
        args.device,
        "--threads",
        str(args.threads),
        "--peak-gflops",
        str(args.peak_gflops),
    ]
    child = subprocess.run(cmd, capture_output=True, text=True)
    if child.returncode != 0:
        # How it ended as well as its last words: on an H200 a compiled step once died after ~140 s leaving only
        # an inductor warning on stderr (no Python error), which says nothing without the exit status.
        how = exit_status(child.returncode)
        print(f"{preset} {precision} compile {compile}: failed ({how})\n{child.stderr[-2000:]}", file=sys.stderr)
        if child.stdout.strip():
            print(f"its last output: {child.stdout[-1000:]}", file=sys.stderr)
        return {"preset": preset, "precision": precision, "compile": compile, "exit": how, "error": child.stderr[-300:]}
    r = json.loads(child.stdout.strip().splitlines()[-1])
    peak = f", {r['fraction_of_peak']:.0%} of peak" if r.get("fraction_of_peak") else ""
    print(
        f"{preset:>6} {precision}->{r['resolved']} compile {r['compile']}"
        f"{' (' + str(r['compile_s']) + ' s)' if r.get('compile_s') else ''}, {r['shapes']} shapes, "
        f"pad_eff {r['pad_eff']}, {r['update_freq']} x {r['max_tokens']:,} tokens: "
        f"{r['tgt_tokens_per_s']:>8,.0f} tgt tokens/s "
        f"({r['tokens_per_s']:,.0f} src+tgt), {r['s_per_update']:.3f} s/update, peak RSS {r['peak_rss_mb']:,.0f} MB, "
        f"{r['flops_per_tgt_token'] / 1e6:.0f} MFLOP/tgt token, {r['gflops']:.0f} GFLOP/s{peak}"
        + (f", MFU(6N) {r['mfu_6n']:.1%} " if r.get("mfu_6n") else " ")
        + f"({r['params'] / 1e6:.1f} M params, {r['threads']} threads, fp32 products: {r.get('fp32_matmul')}, "
        f"heap: {r.get('cpu_heap')})"
        + (f", {r['gpu']}: peak GPU memory {r['peak_gpu_mem_mb']:,.0f} MB" if "gpu" in r else "")
    )
    return r


def print_fairseq(results: list[dict], preset: str) -> None:
    """fairseq's line, and each mtkit configuration of this preset as a ratio to it (added to its record)."""
    fs = results[-1]
    if "error" in fs:
        print(f"{preset:>6} fairseq: failed: {fs['error']}", file=sys.stderr)
        return
    print(
        f"{preset:>6} fairseq fp32: {fs['tgt_tokens_per_s']:>8,.0f} tgt tokens/s, {fs['s_per_update']:.3f} s/update, "
        f"peak RSS {fs['peak_rss_mb'] or 0:,.0f} MB"
    )
    for r in results[:-1]:
        if r.get("preset") == preset and "tgt_tokens_per_s" in r and r.get("system") != "fairseq":
            r["vs_fairseq_fp32"] = round(r["tgt_tokens_per_s"] / fs["tgt_tokens_per_s"], 3)
            print(f"{preset:>6} mtkit {r['precision']} / fairseq fp32: {r['vs_fairseq_fp32']:.2f}x target tokens/s")


if __name__ == "__main__":
    main()
