"""How long run.json's sha256 chain costs at training start: hashing binarized arrays of a given size.

usage: python bench/provenance_hash.py [--mb 256]

Prints MB/s of mtkit.provenance.sha256_file (what run.json and `average` use) and of
mtkit.files.fingerprint (sha256 plus a line count) on the same file, back to back, and one JSON
line. WMT14 En-De's train arrays are about 0.5-1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from mtkit.files import fingerprint
from mtkit.provenance import sha256_file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.en.bin"
        path.write_bytes(os.urandom(args.mb << 20))
        sha256_file(path)  # warm the page cache: the trainer reads arrays that bpe just wrote or mapped
        t0 = time.perf_counter()
        a = fingerprint(path)["sha256"]
        t1 = time.perf_counter()
        b = sha256_file(path)
        t2 = time.perf_counter()
    assert a == b
    fp, plain = args.mb / (t1 - t0), args.mb / (t2 - t1)
    print(f"sha256_file: {plain:,.0f} MB/s (1 GB of arrays: {1024 / plain:.1f} s); fingerprint: {fp:,.0f} MB/s")
    print(
        json.dumps(
            {"bench": "provenance_hash", "mb": args.mb, "fingerprint_mb_s": round(fp), "sha256_mb_s": round(plain)}
        )
    )


if __name__ == "__main__":
    main()
