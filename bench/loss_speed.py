"""The label-smoothed loss alone: mtkit's chunked, fused loss against the plain autograd version.

Forward + backward over (tokens x vocabulary) logits, as the training step runs them, each variant
in its own child process so that its peak RSS (VmHWM) is its own; A and B alternate, best of --reps.

    python bench/loss_speed.py                      # 4,096 tokens, vocabularies 8k and 37k, fp32
    python bench/loss_speed.py --dtype bf16 --vocab 37000

Prints one line per configuration and a JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def autograd_sums(logits, target, eps: float):
    """mtkit's loss before issue 9: full float32 log-probabilities through autograd."""
    import torch.nn.functional as F

    from mtkit.config import PAD

    lprobs = F.log_softmax(logits.float(), dim=-1)
    real = target.ne(PAD)
    nll = -lprobs.gather(1, target.unsqueeze(1)).squeeze(1)
    smooth = -lprobs.mean(dim=-1)
    return ((1.0 - eps) * nll + eps * smooth).masked_fill(~real, 0.0).sum(), nll.detach().masked_fill(~real, 0).sum()


def run_one(variant: str, tokens: int, vocab: int, dtype: str, reps: int) -> dict:
    import torch

    from mtkit.train.loss import label_smoothed_sums

    fn = label_smoothed_sums if variant == "fused" else autograd_sums
    g = torch.Generator().manual_seed(0)
    base = (3 * torch.randn(tokens, vocab, generator=g)).to(getattr(torch, {"fp32": "float32"}.get(dtype, "bfloat16")))
    target = torch.randint(4, vocab, (tokens,), generator=g)
    target[-tokens // 12 :] = 0  # about 8% padding, as in token-bucketed batches
    before = vm_hwm_mb()
    best = float("inf")
    for _ in range(reps):
        logits = base.clone().requires_grad_()
        start = time.perf_counter()
        loss, _ = fn(logits, target, 0.1)
        (loss / tokens).backward()
        best = min(best, time.perf_counter() - start)
        del logits, loss
    return {
        "variant": variant,
        "tokens": tokens,
        "vocab": vocab,
        "dtype": dtype,
        "seconds": round(best, 4),
        "peak_rss_over_inputs_mb": round(vm_hwm_mb() - before, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=4096, help="Target tokens (rows of logits).")
    parser.add_argument("--vocab", type=int, action="append", help="Vocabulary size(s) (default: 8000 and 37000).")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"), help="The logits' dtype.")
    parser.add_argument("--reps", type=int, default=3, help="Timed repetitions in each child (best is kept).")
    parser.add_argument("--rounds", type=int, default=2, help="A/B rounds (fresh children each).")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    vocabs = args.vocab or [8000, 37000]
    if args.one:
        print(json.dumps(run_one(args.one, args.tokens, vocabs[0], args.dtype, args.reps)))
        return
    results = []
    for vocab in vocabs:
        best: dict[str, dict] = {}
        for _ in range(args.rounds):
            for variant in ("autograd", "fused"):
                cmd = [
                    sys.executable,
                    __file__,
                    "--one",
                    variant,
                    "--tokens",
                    str(args.tokens),
                    "--vocab",
                    str(vocab),
                    "--dtype",
                    args.dtype,
                    "--reps",
                    str(args.reps),
                ]
                r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
                if variant not in best or r["seconds"] < best[variant]["seconds"]:
                    best[variant] = r
        a, b = best["autograd"], best["fused"]
        print(
            f"{args.tokens} tokens x {vocab} {args.dtype}: autograd {a['seconds'] * 1e3:.0f} ms, "
            f"+{a['peak_rss_over_inputs_mb']:.0f} MB; fused {b['seconds'] * 1e3:.0f} ms, "
            f"+{b['peak_rss_over_inputs_mb']:.0f} MB; {a['seconds'] / b['seconds']:.2f}x faster"
        )
        results += [a, b]
    print(json.dumps({"bench": "loss_speed", "results": results}))


if __name__ == "__main__":
    main()
