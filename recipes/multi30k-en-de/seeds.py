"""The Multi30k recipe run with several seeds, one after the other, kept as a record: each seed's updates, minutes
of training, model.pt's dev and test sacreBLEU and test chrF2, and the mean and spread over the seeds (one seed's
BLEU says little: the seeds of one setting differ by about a point).

    python recipes/multi30k-en-de/seeds.py --quick --seeds 1 2 3 --record docs/results/quick-recipe.json
    python recipes/multi30k-en-de/seeds.py --seeds 1 2 3 --record docs/results/NAME.json   # 25 minutes a seed
    python recipes/multi30k-en-de/seeds.py --quick --dry-run                                # the commands only

Each seed is `bash run.sh [--quick] [--minutes M] --seed N --out OUT/seed-N`, the recipe itself; nothing else
runs meanwhile (a wall-clock budget buys fewer updates on a busy machine: the record keeps the load before each
seed). model.pt is what the recipe chose (by dev BLEU, or the last checkpoint with --quick), its test score the one
its results.md shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench"))

from harness import Record  # noqa: E402  # the benches' record writer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--quick", action="store_true", help="run.sh --quick: 3 minutes of training")
    parser.add_argument("--minutes", type=float, help="run.sh --minutes: the training budget")
    parser.add_argument("--out", help="keep each seed's OUT under this directory (default: a temporary one)")
    parser.add_argument("--record", help="also write the runs as a record here, e.g. docs/results/NAME.json")
    parser.add_argument("--dry-run", action="store_true", help="print each seed's run.sh command; run none")
    return parser.parse_args(argv)


def recipe(args: argparse.Namespace, seed: int, out: Path) -> list[str]:
    """The recipe's command line for `seed`, its files into `out`."""
    options = ["--quick"] if args.quick else []
    options += ["--minutes", f"{args.minutes:g}"] if args.minutes else []
    return ["bash", str(HERE / "run.sh"), *options, "--seed", str(seed), "--out", str(out)]


def seed_row(seed: int, out: Path, wall_s: float, load: float) -> dict[str, Any]:
    """One seed's figures from the files the recipe wrote: its scores, and the run's log."""
    from results import dev_bleu, metric, scored  # the recipe's own reading of its scores (results.py, beside this)

    scores, _, chosen = scored(out)
    log = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    done = [r for r in log if r["event"] == "done"][-1]
    start = [r for r in log if r["event"] == "start"][-1]
    return {
        "name": f"seed {seed}",
        "model": chosen,
        "updates": done["step"],
        "training_minutes": round(done["hours"] * 60, 2),
        "recipe_minutes": round(wall_s / 60, 2),
        "precision": start.get("precision"),
        "load_before": load,
        "dev_bleu": dev_bleu(scores, chosen),
        "test_bleu": metric(scores[("test", chosen)], "BLEU")["score"],
        "test_chrf": metric(scores[("test", chosen)], "chrF")["score"],
        "signature": metric(scores[("test", chosen)], "BLEU")["signature"],
    }


def main() -> None:
    args = parse_args()
    record = Record()
    with tempfile.TemporaryDirectory(prefix="recipe-seeds-") as name:
        base = Path(args.out or name)
        rows = []
        for seed in args.seeds:
            command = recipe(args, seed, base / f"seed-{seed}")
            if args.dry_run:
                print(shlex.join(command))
                continue
            load = round(os.getloadavg()[0], 2)
            started = time.monotonic()
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise SystemExit(f"seed {seed}: run.sh failed: {done.stderr.strip()[-2000:]}")
            rows.append(seed_row(seed, base / f"seed-{seed}", time.monotonic() - started, load))
            print(json.dumps(rows[-1]), flush=True)
        if args.dry_run:
            return
        references = (base / f"seed-{args.seeds[0]}" / "data" / "raw" / "test.de").read_text(encoding="utf-8")
    bleu = [r["test_bleu"] for r in rows]
    results = {
        "test_bleu": {
            "mean": round(statistics.fmean(bleu), 2),
            "min": min(bleu),
            "max": max(bleu),
            "spread": round(max(bleu) - min(bleu), 2),
            "seeds": len(bleu),
        },  # fmt: skip
        "updates": {"min": min(r["updates"] for r in rows), "max": max(r["updates"] for r in rows)},
        "training_minutes": max(r["training_minutes"] for r in rows),
        "recipe_minutes": max(r["recipe_minutes"] for r in rows),
    }
    print(json.dumps(results))
    if args.record:
        settings = {"seeds": args.seeds, "quick": args.quick, "minutes": args.minutes or (3 if args.quick else 25)}
        data = record.data(settings, rows, results)
        data.update(renderer="docs/tables.py::recipe_seeds", rows=rows, sentences=len(references.splitlines()),
                    words=len(references.split()))  # fmt: skip
        record.write_data(args.record, data)


if __name__ == "__main__":
    main()
