"""Scale benchmark of `mtkit prepare` + `mtkit bpe`: a synthetic WMT-size corpus, cleaned, encoded, binarized.

    python bench/prepare_scale.py --pairs 4500000          # the WMT14 En-De size (the goal)
    python bench/prepare_scale.py --pairs 100000           # a quick check

The corpus is built from the real Multi30k training pairs (the copy in mtkit/data/multi30k):
each synthetic pair joins 1-4 caption pairs (about 25 words a side on average, like news
text) with variations the normaliser has work on (typographic quotes, dashes, ellipses,
non-breaking spaces, numbers) and the noise the filters are there for (empty sides, over-
long and badly mismatched pairs, invalid UTF-8, duplicates). It then runs the real code
paths, `prepare custom` and `bpe`, and reports per stage the lines per second, the peak
resident memory of the process and of its worker processes (resource.getrusage), and the
wall-clock. The goal (issue 3): 4.5M pairs cleaned + encoded + binarized in under 10
minutes with peak RSS under 2 GiB, on 2 cores. Learning the BPE model is reported on its
own: its cost depends on --sample, not on the corpus size.

The last line of output is one JSON object with all the numbers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MULTI30K = ROOT / "mtkit" / "data" / "multi30k"  # the Multi30k that ships with mtkit

from mtkit.data.bpe import BpeOptions, build  # noqa: E402
from mtkit.data.prepare import PrepareOptions, prepare  # noqa: E402


def _peak_mib() -> dict[str, float]:
    """Peak RSS so far: this process, and the largest of its finished children (the cleaning workers)."""
    scale = 1024 if sys.platform != "darwin" else 1024 * 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / scale
    return {"self": round(own, 1), "children": round(kids, 1)}


def _reset_stage_peak() -> None:
    """Linux: restart this process's peak-RSS counter (VmHWM), so that each stage gets its own peak.

    This also resets what getrusage's ru_maxrss reports for this process, so the overall peak
    is the largest of the stage peaks.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _stage_peak_mib() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children: unlike wall-clock, not inflated by a busy machine."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def synthesize(n: int, out_src: Path, out_tgt: Path, seed: int = 0) -> None:
    """n synthetic en-de pairs from Multi30k, streamed to disk in blocks."""
    en, de = _read_gz(MULTI30K / "train.en.gz"), _read_gz(MULTI30K / "train.de.gz")
    rng = np.random.default_rng(seed)
    block = 50_000
    with open(out_src, "wb") as fs, open(out_tgt, "wb") as ft:
        for start in range(0, n, block):
            m = min(block, n - start)
            k = rng.choice([1, 2, 3, 4], size=m, p=[0.25, 0.4, 0.25, 0.1])
            picks = rng.integers(0, len(en), size=(m, 4))
            kind = rng.random(m)
            nums = rng.integers(0, 100_000, size=m)
            src_lines, tgt_lines = [], []
            prev = ("", "")
            for i in range(m):
                idx = picks[i, : k[i]]
                s = " ".join(en[j] for j in idx)
                t = " ".join(de[j] for j in idx)
                r = kind[i]
                if r < 0.10:  # typographic punctuation for the normaliser
                    s = f"\u201c{s}\u201d \u2013 {nums[i]}\u00a0% \u2026"
                    t = f"\u201e{t}\u201c \u2013 {nums[i]}\u00a0% \u2026"
                elif r < 0.20:
                    s = f"In {nums[i]} ( about {nums[i] // 7} ) : {s}"
                    t = f"Im Jahr {nums[i]} ( etwa {nums[i] // 7} ) : {t}"
                elif r < 0.205:  # empty side
                    t = ""
                elif r < 0.206:  # over 250 words
                    s, t = " ".join([s] * 30), " ".join([t] * 30)
                elif r < 0.216:  # length ratio far above 1.5
                    t = t.split(" ", 1)[0]
                elif r < 0.226 and prev[0]:  # a duplicate of the previous pair
                    s, t = prev
                prev = (s, t)
                src_lines.append(s)
                tgt_lines.append(t)
            fs.write(("\n".join(src_lines) + "\n").encode("utf-8"))
            data = ("\n".join(tgt_lines) + "\n").encode("utf-8")
            if start == 0:
                data = b"Ung\xfcltig\n" + data.split(b"\n", 1)[1]  # one invalid UTF-8 line (Latin-1)
            ft.write(data)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)  # prepare's and bpe's steps
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=100_000, help="synthetic training pairs (4500000 = WMT14 En-De)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="cleaning processes [all cores]")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="SentencePiece encoding threads [all cores]")
    ap.add_argument("--vocab-size", type=int, default=37000)
    ap.add_argument("--sample", type=int, default=None, help="sentences to learn BPE from [mtkit's default]")
    ap.add_argument("--dedup", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None, help="where to put the corpus [a temporary directory]")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    if not MULTI30K.is_dir():
        sys.exit(f"the Multi30k data is expected at {MULTI30K}")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="mtkit-prepare-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "bench": "prepare_scale",
        "pairs": args.pairs,
        "workers": args.workers,
        "threads": args.threads,
        "vocab_size": args.vocab_size,
        "cpus": os.cpu_count(),
    }
    try:
        t0 = time.perf_counter()
        synthesize(args.pairs, work / "in.en", work / "in.de")
        (work / "valid.en").write_text("A man is riding a bike .\nTwo dogs play in the snow .\n")
        (work / "valid.de").write_text("Ein Mann fährt Fahrrad .\nZwei Hunde spielen im Schnee .\n")
        gen_s = time.perf_counter() - t0
        words = sum(len(line.split()) for line, _ in zip(open(work / "in.en", encoding="utf-8"), range(20_000)))
        result["synthesize"] = {
            "s": round(gen_s, 2),
            "mean_words_en_first_20k": round(words / min(20_000, args.pairs), 1),
            "bytes": (work / "in.en").stat().st_size + (work / "in.de").stat().st_size,
        }
        print(f"synthesized {args.pairs} pairs in {gen_s:.1f}s", file=sys.stderr)

        out = work / "data"
        _reset_stage_peak()
        t0, c0 = time.perf_counter(), _cpu_s()
        prep = prepare(
            "custom",
            PrepareOptions(out=out, workers=args.workers, dedup=args.dedup, force=True),
            custom_files={
                "train": (str(work / "in.en"), str(work / "in.de")),
                "valid": (str(work / "valid.en"), str(work / "valid.de")),
            },
            langs=("en", "de"),
        )
        prepare_s, prepare_cpu = time.perf_counter() - t0, _cpu_s() - c0
        peak_after_prepare = {**_peak_mib(), "stage_self": _stage_peak_mib()}
        train = prep["splits"]["train"]
        t = prep["timings"]
        result["prepare"] = {
            "wall_s": round(prepare_s, 2),
            "cpu_s": round(prepare_cpu, 2),
            **t,
            "clean_pairs_per_s": round(train["pairs_in"] / t["clean_s"]),
            "pairs_in": train["pairs_in"],
            "kept": train["kept"],
            "dropped": train["dropped"],
            "peak_rss_mib": peak_after_prepare,
        }
        print(f"prepare: {prepare_s:.1f}s, cleaning {result['prepare']['clean_pairs_per_s']} pairs/s", file=sys.stderr)

        opts = BpeOptions(vocab_size=args.vocab_size, threads=args.threads, force=True)
        if args.sample is not None:
            opts.sample = args.sample
        stage_peaks: dict[str, float | None] = {}

        class StageMark(logging.Handler):  # the first "encoding" log line ends the learning stage
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage().startswith("encoding") and "learn" not in stage_peaks:
                    stage_peaks["learn"] = _stage_peak_mib()
                    _reset_stage_peak()

        mark = StageMark()
        logging.getLogger("mtkit.data.bpe").addHandler(mark)
        _reset_stage_peak()
        t0, c0 = time.perf_counter(), _cpu_s()
        try:
            info = build(out, opts)
        finally:
            logging.getLogger("mtkit.data.bpe").removeHandler(mark)
        bpe_s, bpe_cpu = time.perf_counter() - t0, _cpu_s() - c0
        t = info["timings"]
        sentences = 2 * info["splits"]["train"]["sentences"] + 2 * info["splits"]["valid"]["sentences"]
        tokens = sum(info["splits"]["train"]["tokens"].values())
        result["bpe"] = {
            "wall_s": round(bpe_s, 2),
            "cpu_s": round(bpe_cpu, 2),
            **t,
            "sample": info["sample_used"],
            "encode_sentences_per_s": round(sentences / t["encode_s"]),
            "binarize_sentences_per_s": round(sentences / t["binarize_s"]),
            "read_sentences_per_s": round(sentences / max(t["read_s"], 1e-9)),
            "train_tokens": tokens,
            "tokens_per_sentence": round(tokens / (sentences - 4), 1),
            "peak_rss_mib": {
                **_peak_mib(),
                "learn_stage_self": stage_peaks.get("learn"),
                "encode_binarize_stage_self": _stage_peak_mib(),
            },
        }
        learn = t.get("learn_s", 0.0)
        target = prepare_s + bpe_s - learn
        result["wall_s"] = {
            "prepare_plus_bpe": round(prepare_s + bpe_s, 1),
            "without_learning": round(target, 1),
            "learning": round(learn, 1),
        }
        stage_values = [
            peak_after_prepare["stage_self"],
            stage_peaks.get("learn"),
            result["bpe"]["peak_rss_mib"]["encode_binarize_stage_self"],
            _peak_mib()["self"],
        ]
        result["peak_rss_mib"] = {
            "self": max(v for v in stage_values if v is not None),
            "children": _peak_mib()["children"],
        }
        scale = 4_500_000 / args.pairs
        stages_peak = max(
            v
            for v in (
                peak_after_prepare["stage_self"],
                peak_after_prepare["children"],
                result["bpe"]["peak_rss_mib"]["encode_binarize_stage_self"],
            )
            if v is not None
        )
        result["goal"] = {
            "pairs": 4_500_000,
            "wall_s": 600,
            "peak_rss_mib": 2048,
            "linear_projection_wall_s": round(target * scale),
            "linear_projection_cpu_s": round((prepare_cpu + bpe_cpu - learn) * scale),
            "peak_rss_mib_of_goal_stages": stages_peak,
        }
        print(
            f"bpe: {bpe_s:.1f}s (learning {learn:.1f}s, encoding {t['encode_s']:.1f}s, binarizing "
            f"{t['binarize_s']:.1f}s); peak RSS {result['peak_rss_mib']} MiB",
            file=sys.stderr,
        )
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
