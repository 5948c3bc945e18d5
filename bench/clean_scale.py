"""Scale of `mtkit clean`: pairs a second and peak memory as the corpus grows, to show that memory stays bounded.

    python bench/clean_scale.py --pairs 1000000 2000000      # two sizes: memory should grow by 8 bytes a pair
    python bench/clean_scale.py --pairs 200000 --langid       # language identification too (the dear rule)

The corpus is synthetic: Multi30k's English and German training captions (--data) joined at random in twos and
threes, so that almost every pair is new and the duplicate rules keep nearly every hash (their worst case), with
a share of copies, markup and exact duplicates for the other rules. Each size is cleaned in a fresh process with
every rule but --langid (unless given) and --max-char-ratio 3, and reports the pairs a second, the peak resident
memory of that process (getrusage) and the kept pairs. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make(data: Path, pairs: int, out: Path, seed: int = 1) -> tuple[Path, Path]:
    with gzip.open(data / "multi30k-en-de" / "train.en.gz", "rt", encoding="utf-8") as f:
        en = f.read().splitlines()
    with gzip.open(data / "multi30k-en-de" / "train.de.gz", "rt", encoding="utf-8") as f:
        de = f.read().splitlines()
    rng = random.Random(seed)
    src, tgt = out / "big.en", out / "big.de"
    with open(src, "w", encoding="utf-8") as fs, open(tgt, "w", encoding="utf-8") as ft:
        for _ in range(pairs):
            picks = [rng.randrange(len(en)) for _ in range(rng.choice((2, 3)))]
            s, t = " ".join(en[j] for j in picks), " ".join(de[j] for j in picks)
            roll = rng.random()
            if roll < 0.02:
                t = s
            elif roll < 0.04:
                s, t = f"<p>{s}</p>", f"<p>{t}</p>"
            fs.write(s + "\n")
            ft.write(t + "\n")
            if roll > 0.98:  # an exact duplicate
                fs.write(s + "\n")
                ft.write(t + "\n")
    return src, tgt


def child(src: str, tgt: str, prefix: str, langid: bool) -> None:
    from mtkit.data.webclean import WebCleanConfig, clean_files

    config = WebCleanConfig(True, True, True, 0, 3.0, True, True, langid)
    t0 = time.perf_counter()
    record = clean_files(Path(src), Path(tgt), "en", "de", Path(prefix), config)
    seconds = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "pairs": record["pairs_in"],
                "kept": record["kept"],
                "seconds": round(seconds, 1),
                "pairs_per_s": round(record["pairs_in"] / seconds),
                "peak_rss_mib": round(peak_mib, 1),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[1_000_000, 2_000_000])
    parser.add_argument("--langid", action="store_true")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.langid)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.pairs:
            src, tgt = make(args.data, n, Path(tmp))
            cmd = [sys.executable, __file__, "--child", str(src), str(tgt), f"{tmp}/out"]
            done = subprocess.run(cmd + (["--langid"] if args.langid else []), capture_output=True, text=True)
            if done.returncode:
                sys.exit(done.stderr)
            results.append(json.loads(done.stdout.splitlines()[-1]))
            r = results[-1]
            print(
                f"{r['pairs']:>10,} pairs: {r['pairs_per_s']:>7,} pairs/s, peak RSS {r['peak_rss_mib']:7.1f} MiB, "
                f"kept {r['kept']:,}",
                flush=True,
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(json.dumps({"langid": args.langid, "load_average": load, "results": results}))


if __name__ == "__main__":
    sys.exit(main())
