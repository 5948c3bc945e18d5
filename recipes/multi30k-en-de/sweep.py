"""The quick recipe's settings chosen on dev: a sweep of its batch, warmup and dropout, each setting trained on a
fixed number of tokens (or updates) with several seeds, scored on Multi30k's validation set (val), never on test.

    python recipes/multi30k-en-de/sweep.py --tokens 460800 --dry-run     # every command, one a line; runs none
    python recipes/multi30k-en-de/sweep.py --tokens 460800 --record docs/results/quick-sweep.json
    python recipes/multi30k-en-de/sweep.py --steps 600 --max-tokens 768 1024 --warmup 400 600 --dropout 0 0.1 \
        --seeds 1 2 3 --search 0.6:patience 1.0:exact 1.4:exact

A fixed amount of training, not the recipe's 3 minutes, so the scores do not depend on the machine's load.
`--tokens` gives every setting the same training tokens, so a setting with larger batches makes fewer updates.
The recipe's budget is time, and a larger batch makes fewer updates in it as well; equal tokens is the
stand-in that holds on any machine. `--steps` gives every setting the same number of updates, which favours
larger batches. Set the budget to what the 3 minutes reach on the CPU the recipe is tuned for: its log says
how many updates, and 600 updates of 768 tokens are 460,800 tokens.

Every run is the command line itself: `mtkit train`, then `translate` and `score` on val (no `average`: the
quick recipe keeps its last checkpoint). Each setting's dev sacreBLEU is the mean over --seeds, with its
spread. The best setting by mean dev BLEU is printed. The record (bench/harness.py) keeps every run's score,
and is written after every run, so a sweep stopped early keeps what it measured.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from harness import Record, run_mtkit  # noqa: E402  # the benches' record writer

DRY_RUN = False


def mtkit(*args: str) -> str:
    """`mtkit ARGS` from this checkout, its output returned (with --dry-run: printed, not run)."""
    return run_mtkit(args, DRY_RUN)


def dev_bleu(data: Path, run: Path, alpha: float, stop: str, out: Path) -> float:
    """The last checkpoint's sacreBLEU on val, beam 4, GNMT penalty `alpha` and the early stop `stop`."""
    hyp = out / f"val.alpha{alpha}.{stop}.de"
    mtkit("translate", "--model", str(run / "checkpoint_last.pt"), "--input", str(data / "raw" / "valid.en"),
          "--output", str(hyp), "--beam", "4", "--alpha", str(alpha), "--early-stop", stop)  # fmt: skip
    said = mtkit("score", str(hyp), "--ref", str(data / "raw" / "valid.de"), "--lang", "de", "--json")
    return float(json.loads(said)["scores"][0]["score"]) if said else math.nan


def search(text: str) -> tuple[float, str]:
    """`ALPHA:STOP` (e.g. 0.6:patience) as (alpha, stop)."""
    alpha, _, stop = text.partition(":")
    if stop not in ("patience", "exact"):
        raise argparse.ArgumentTypeError(f"a search is ALPHA:patience or ALPHA:exact, got {text!r}")
    return float(alpha), stop


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--steps", type=int, help="updates of every run")
    budget.add_argument("--tokens", type=int, help="training tokens (a batch's --max-tokens) of every run")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[768, 1024])
    parser.add_argument("--warmup", type=int, nargs="+", default=[400, 600])
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument(
        "--search",
        type=search,
        nargs="+",
        default=[(0.6, "patience"), (1.4, "exact")],
        metavar="ALPHA:STOP",
        help="searches tried on dev, each a GNMT length penalty and an early stop (default: the quick recipe's "
        "0.6:patience and the full recipe's 1.4:exact)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--data", help="a data directory `mtkit bpe --vocab-size 8000` made (default: made here)")
    parser.add_argument("--record", help="also write the sweep as a record here, e.g. docs/results/NAME.json")
    parser.add_argument("--dry-run", action="store_true", help="print every mtkit command, one a line; run none")
    return parser.parse_args(argv)


def main() -> None:
    global DRY_RUN
    args = parse_args()
    DRY_RUN = args.dry_run
    record = Record()
    with tempfile.TemporaryDirectory(prefix="quick-sweep-") as name:
        tmp = Path(name)
        data = Path(args.data) if args.data else tmp / "data"
        if not args.data:
            mtkit("prepare", "multi30k-en-de", "--out", str(data))
            mtkit("bpe", str(data), "--vocab-size", "8000")
        scores: dict[str, list[float]] = {}
        results: dict[str, Any] = {}
        runs: list[dict[str, Any]] = []
        # Seed by seed, every setting once a seed: a sweep stopped early has every setting with as many seeds.
        for seed, max_tokens, warmup, dropout in itertools.product(
            args.seeds, args.max_tokens, args.warmup, args.dropout
        ):
            run = tmp / f"run-{max_tokens}-{warmup}-{dropout}-{seed}"
            steps = args.steps or round(args.tokens / max_tokens)
            mtkit("train", str(data), "--out", str(run), "--preset", "small", "--max-tokens", str(max_tokens),
                  "--warmup", str(warmup), "--lr-scale", "0.64", "--dropout", str(dropout), "--label-smoothing", "0.1",
                  "--max-steps", str(steps), "--lr-cooldown", "0.2", "--seed", str(seed), "--keep-last", "1",
                  "--valid-every", str(steps))  # fmt: skip
            for alpha, stop in args.search:
                bleu = dev_bleu(data, run, alpha, stop, run)
                setting = f"max_tokens {max_tokens}, warmup {warmup}, dropout {dropout}, alpha {alpha} {stop}"
                scores.setdefault(setting, []).append(bleu)
                runs.append({"max_tokens": max_tokens, "steps": steps, "warmup": warmup, "dropout": dropout,
                             "alpha": alpha, "early_stop": stop, "seed": seed, "dev_bleu": bleu})  # fmt: skip
                if not DRY_RUN:
                    print(f"{setting}, seed {seed}: dev {bleu:.2f}", flush=True)
            if not DRY_RUN:  # kept after every run: a sweep stopped early leaves what it measured, said so
                results = write(record, args, runs, scores, data)
    if not DRY_RUN:  # (the data directory is gone by now: `write` reads its references)
        print(json.dumps(results))


def write(record: Record, args: argparse.Namespace, runs: list, scores: dict[str, list[float]], data: Path) -> dict:
    """The sweep so far as a record (args.record, if given), with its table's rows (docs/tables.py::quick_sweep);
    returns the summary."""
    summary = {s: {"mean": statistics.fmean(v), "spread": max(v) - min(v), "seeds": len(v)} for s, v in scores.items()}
    best = max(summary, key=lambda s: summary[s]["mean"])
    planned = len(args.seeds) * len(args.max_tokens) * len(args.warmup) * len(args.dropout) * len(args.search)
    print(f"best on dev so far: {best} ({summary[best]['mean']:.2f}, spread {summary[best]['spread']:.2f})")
    settings = {k: v for k, v in vars(args).items() if k not in ("record", "dry_run")}
    results = {"by_setting": summary, "best": best, "runs": f"{len(runs)} of {planned}"}
    rows = [{"name": s, "dev_bleu": scores[s], **summary[s], "best": s == best} for s in scores]
    references = (data / "raw" / "valid.de").read_text(encoding="utf-8").splitlines()
    if args.record:
        kept = record.data(settings, runs, results)
        kept.update(renderer="docs/tables.py::quick_sweep", rows=rows, sentences=len(references),
                    words=sum(len(line.split()) for line in references))  # fmt: skip
        record.write_data(args.record, kept)
    return results


if __name__ == "__main__":
    main()
