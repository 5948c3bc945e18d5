"""Training throughput of `mtkit train`: source+target tokens/s, seconds per update, peak memory.

Runs the real training loop (mtkit.train.trainer.train) for each preset and precision in a
fresh child process (so that peak RSS belongs to one configuration), on a synthetic corpus
with WMT-like BPE lengths (median ~25 tokens) and the paper's 37k vocabulary, at a fixed
--max-tokens and update-freq 1. The first --warmup-steps updates are not timed. Figures come
from the loop's own per-update log (log_every=1), so they include everything an update costs.

    python bench/train_throughput.py                       # small and base, fp32, on CPU
    python bench/train_throughput.py --preset base --preset big --precision bf16 --device cuda

Prints one line per configuration and, last, one JSON line with every figure. On CUDA it also
reports the model FLOPs utilisation: 6 x (encoder params x source tokens + (decoder params +
output projection) x target tokens) per second over the device's peak (attention scores,
a few percent at these lengths, are not counted, so MFU is slightly understated).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}  # dense bf16


def make_corpus(out: Path, sentences: int, vocab: int, seed: int) -> Path:
    """Random ids with WMT-like lengths; a small real SentencePiece model stands in for the vocabulary."""
    import sentencepiece as spm

    from mtkit.data.binarize import BinaryWriter

    rng = np.random.default_rng(seed)
    (out / "bin").mkdir(parents=True, exist_ok=True)
    for split, n in (("train", sentences), ("valid", 64)):
        src_len = np.clip(rng.lognormal(np.log(25), 0.55, n), 1, 250).astype(int)
        tgt_len = np.clip(src_len * rng.uniform(0.8, 1.25, n), 1, 250).astype(int)
        for lang, lengths in (("en", src_len), ("de", tgt_len)):
            with BinaryWriter(out / "bin" / f"{split}.{lang}", vocab) as w:
                for length in lengths:
                    w.add(rng.integers(4, vocab, length))
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f g h"] * 10), model_writer=model,
                                   vocab_size=16, model_type="bpe", pad_id=0, unk_id=1, bos_id=2, eos_id=3,
                                   hard_vocab_limit=False, minloglevel=2)
    (out / "spm.model").write_bytes(model.getvalue())
    (out / "bpe.json").write_text(json.dumps({"src_lang": "en", "tgt_lang": "de", "vocab_size": vocab}))
    return out


def flops_per_token_pair(model) -> tuple[int, int]:
    """Parameters that multiply each source token, and each target token (output projection included)."""
    enc = sum(p.numel() for p in model.encoder.parameters())
    dec = sum(p.numel() for p in model.decoder.parameters()) + model.tgt_embed.table.weight.numel()
    return enc, dec


def run_one(args: argparse.Namespace) -> dict:
    """One configuration, in this process: train warmup+steps updates and read the loop's own log."""
    import torch

    from mtkit.config import get_preset, model_config
    from mtkit.train import trainer

    # The synthetic corpus has no real 37k-piece SentencePiece model; the check that the model
    # and spm.model agree is irrelevant to speed, so it is switched off here (and only here).
    trainer._check_vocab = lambda *a: None
    preset = get_preset(args.preset[0])
    model_cfg = model_config(preset.name, args.vocab)
    train_cfg = dataclasses.replace(preset.train, max_tokens=args.max_tokens, update_freq=1, update_tokens=0,
                                    precision=args.precision[0], max_steps=args.warmup_steps + args.steps,
                                    log_every=1, valid_every=10**9, save_every_steps=0, save_every_minutes=0.0,
                                    warmup=4000)
    run = Path(args.workdir) / f"run-{preset.name}-{args.precision[0]}"
    result = trainer.train(args.data, run, model_cfg, train_cfg, device=args.device, threads=args.threads)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    timed = [r for r in records if r["event"] == "train" and r["step"] > args.warmup_steps]
    seconds = sum(r["s_per_update"] for r in timed)
    tokens = sum(r["tokens_per_s"] * r["s_per_update"] for r in timed)
    out = {"preset": preset.name, "precision": args.precision[0], "device": args.device, "max_tokens": args.max_tokens,
           "params": sum(p.numel() for p in result.model.parameters()), "threads": torch.get_num_threads(),
           "steps": len(timed), "tokens_per_s": round(tokens / seconds, 1), "s_per_update": round(seconds / len(timed), 4),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if torch.cuda.is_available() and args.device != "cpu":
        enc, dec = flops_per_token_pair(result.model)
        flops = 6 * (enc + dec) * tokens / 2 / seconds  # tokens counts both sides; about half are target
        name = torch.cuda.get_device_name()
        peak = args.peak_tflops or next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)
        out.update(gpu=name, peak_gpu_mem_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1),
                   model_tflops=round(flops / 1e12, 2), mfu=round(flops / (peak * 1e12), 4) if peak else None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", action="append", help="Preset(s) to measure (default: small and base).")
    parser.add_argument("--precision", action="append", help="fp32, bf16, fp16 (default: fp32).")
    parser.add_argument("--steps", type=int, default=20, help="Timed updates per configuration.")
    parser.add_argument("--warmup-steps", type=int, default=3, help="Untimed updates first.")
    parser.add_argument("--max-tokens", type=int, default=4096, help="Tokens per batch and side.")
    parser.add_argument("--vocab", type=int, default=37000, help="Vocabulary size (the paper's joint BPE: 37k).")
    parser.add_argument("--sentences", type=int, default=20000, help="Sentence pairs in the synthetic corpus.")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto.")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default).")
    parser.add_argument("--peak-tflops", type=float, default=0.0, help="Device peak for MFU (0: from the GPU name).")
    parser.add_argument("--data", help="Use this binarized data directory instead of a synthetic corpus.")
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args)))
        return
    presets, precisions = args.preset or ["small", "base"], args.precision or ["fp32"]
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or str(make_corpus(Path(tmp) / "data", args.sentences, args.vocab, seed=1))
        results = []
        for preset in presets:
            for precision in precisions:
                cmd = [sys.executable, __file__, "--one", "--preset", preset, "--precision", precision, "--data", data,
                       "--workdir", tmp, "--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps),
                       "--max-tokens", str(args.max_tokens), "--vocab", str(args.vocab), "--device", args.device,
                       "--threads", str(args.threads), "--peak-tflops", str(args.peak_tflops)]
                child = subprocess.run(cmd, capture_output=True, text=True)
                if child.returncode != 0:
                    print(f"{preset} {precision}: failed\n{child.stderr[-2000:]}", file=sys.stderr)
                    results.append({"preset": preset, "precision": precision, "error": child.stderr[-300:]})
                    continue
                r = json.loads(child.stdout.strip().splitlines()[-1])
                results.append(r)
                extra = f", MFU {r['mfu']:.1%}" if r.get("mfu") else ""
                print(f"{preset:>6} {precision}: {r['tokens_per_s']:>9,.0f} src+tgt tokens/s, {r['s_per_update']:.3f} "
                      f"s/update, peak RSS {r['peak_rss_mb']:,.0f} MB ({r['params'] / 1e6:.1f} M params, "
                      f"{r['threads']} threads{extra})")
    print(json.dumps({"bench": "train_throughput", "results": results}))


if __name__ == "__main__":
    main()
