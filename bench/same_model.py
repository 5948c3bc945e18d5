"""The same `mtkit train` command twice on one machine, the second while busy processes load every core: are the
checkpoints' weights and optimizer state bitwise equal?

    python bench/same_model.py                                # tiny, 30 updates, Multi30k as it ships
    python bench/same_model.py --steps 100 --busy 4 --record docs/results/same-model.json

Both runs are the command line itself, with the same mtkit cache directory (where the measured runtime decisions
are kept per machine: mtkit/runtime/kept.py), so the first run measures (unless this machine already has its
answers) and the second reads. The data is prepared once (`mtkit prepare`, `mtkit bpe`) from the Multi30k that
ships with mtkit. Printed: each run's seconds and decisions, then how many tensors differ and by how much; the
last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Record  # bench/ is a script's sys.path[0]

ROOT = Path(__file__).resolve().parents[1]


def mtkit(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "mtkit", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"mtkit {args[0]} failed: {done.stderr.strip()[-2000:]}")


def busy(n: int) -> list[subprocess.Popen]:
    """n processes that spin on a core each until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def compare(a: Path, b: Path) -> dict[str, float | int]:
    """Tensors of the two checkpoints' weights and optimizer state: how many, how many differ, the largest gap."""
    import torch

    def tensors(path: Path) -> dict[str, torch.Tensor]:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        found = {f"model.{k}": v for k, v in ckpt["model"].items()}
        for i, state in ckpt["optimizer"]["state"].items():
            found |= {f"optimizer.{i}.{k}": v for k, v in state.items() if isinstance(v, torch.Tensor)}
        return found

    ta, tb = tensors(a), tensors(b)
    if ta.keys() != tb.keys():
        raise SystemExit("the two checkpoints hold different tensors")
    differ = [k for k in ta if not torch.equal(ta[k], tb[k])]
    gap = max((float((ta[k].double() - tb[k].double()).abs().max()) for k in differ), default=0.0)
    return {"tensors": len(ta), "differ": len(differ), "max_abs_difference": gap}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=30, help="updates of each run")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="busy processes beside the second run")
    parser.add_argument("--cache", help="mtkit's cache directory for both runs (default: a new, empty one)")
    parser.add_argument("--record", help="also write the figures as a record here, e.g. docs/results/NAME.json")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    with tempfile.TemporaryDirectory(prefix="same-model-") as name:
        tmp = Path(name)
        env = {**os.environ, "MTKIT_CACHE": args.cache or str(tmp / "cache"), "PYTHONPATH": str(ROOT)}
        for pin in ("MTKIT_CPU_MATMUL", "MTKIT_AUTO_PRECISION", "MTKIT_REMEASURE"):  # what auto decides, measured
            env.pop(pin, None)
        mtkit("prepare", "multi30k-en-de", "--out", str(tmp / "data"), env=env)
        mtkit("bpe", str(tmp / "data"), "--vocab-size", "2000", env=env)
        train = ["train", str(tmp / "data"), "--preset", args.preset, "--max-steps", str(args.steps)]
        train += ["--max-tokens", str(args.max_tokens), "--valid-every", str(10**9), "--seed", "1"]
        runs = {}
        for run, load in (("quiet", 0), ("loaded", args.busy)):
            spinners, start = busy(load), time.perf_counter()
            try:
                mtkit(*train, "--out", str(tmp / run), env=env)
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
            first = json.loads((tmp / run / "metrics.jsonl").read_text().splitlines()[0])
            runs[run] = {"busy_processes": load, "seconds": round(time.perf_counter() - start, 1)}
            runs[run] |= {k: first[k] for k in ("precision", "precision_why", "fp32_matmul", "fp32_matmul_why")}
            print(f"{run}: {runs[run]['seconds']} s, {first['precision']}, fp32 products {first['fp32_matmul']}")
        same = compare(tmp / "quiet" / "checkpoint_last.pt", tmp / "loaded" / "checkpoint_last.pt")
    results = {**same, "bitwise_equal": same["differ"] == 0}
    print(f"{same['differ']} of {same['tensors']} tensors differ (largest gap {same['max_abs_difference']:g})")
    settings = {k: v for k, v in vars(args).items() if k not in ("record", "cache")}
    record.write(args.record, settings, runs, results)
    print(json.dumps({"bench": "same_model", **settings, "runs": runs, **results}))


if __name__ == "__main__":
    main()
