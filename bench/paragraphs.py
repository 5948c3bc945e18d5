"""Paragraphs, not lines: consecutive test sentences joined into paragraphs of 3 and 5, translated whole
(`--no-split`) and split into sentences (the default), against the same sentences translated one a line.

    python bench/paragraphs.py --model model.pt --data DIR          # DIR: {val,test_2016_flickr}.{en,de}[.gz]
    python bench/paragraphs.py --model model.pt --data DIR --write  # and keep the record: docs/results/paragraphs.json

Over mtkit's public API only (`mtkit.load_translator`, `translate(lines, split=...)`). A sentence without final
punctuation (5% of Multi30k's captions) gets a period when joined, as prose would have one; the one-a-line
baseline translates the same punctuated sentences, so the two differ only by the paragraph. BLEU (sacrebleu,
detokenized) of the paragraphs against their joined references; `length` is the hypotheses' length over the
references' (sacrebleu's sys_len / ref_len). Each split's own lines are translated as they are, with and
without splitting (a test set's few two-sentence lines).

The segmenters, on the same paragraphs and on hand-made hard cases: sentencex and pysbd (when installed), the
share of paragraphs split exactly into their sentences, and sentences per second.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HARD = {  # (language, text, its sentences)
    "abbreviations": (
        "en",
        "Dr. Smith met Mr. Jones at 5 p.m. today. Use tools, e.g. hammers. He lives at No. 5 Main St.",
    ),
    "decimals": ("en", "The price rose 3.5 percent to 12.75 dollars. Then it fell by 0.5."),
    "urls": ("en", "See https://example.com/a.b?c=1. Mail a.b@example.org. Thanks."),
    "quotes": ("en", 'He said "Stop. Now." and left. She asked: "Are you coming?" He said no.'),
    "zh": ("zh", "我今天很高兴。你呢？我们去公园吧！"),
    "ja": ("ja", "今日は晴れです。明日は雨でしょう！本当ですか？"),
    "de abbreviations": ("de", "Das ist z.B. gut. Es ist am 3. Mai passiert."),
    "fr abbreviations": ("fr", "M. Dupont est arrivé. Il est 10 h. Bonjour !"),
    "cs abbreviations": ("cs", "Pan Novák přišel. Je to např. dobré. Ano."),
}
EXPECTED = {
    "abbreviations": 3, "decimals": 2, "urls": 3, "quotes": 3, "zh": 3, "ja": 3,
    "de abbreviations": 2, "fr abbreviations": 3, "cs abbreviations": 3,
}  # fmt: skip


def read(path: Path) -> list[str]:
    gz = path.with_name(path.name + ".gz")
    opened = gzip.open(gz, "rt", encoding="utf-8") if gz.exists() else path.open(encoding="utf-8")
    with opened as f:
        return [line.rstrip("\n") for line in f]


def punctuated(line: str) -> str:
    line = line.rstrip()
    return line if line[-1:] in ".!?\"'" else line + "."


def machine() -> dict[str, Any]:
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
        name = next((x.split(":", 1)[1].strip() for x in info.splitlines() if x.startswith("model name")), "")
        have = next((x.split(":", 1)[1].split() for x in info.splitlines() if x.startswith("flags")), [])
        flags = " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in have)
    except OSError:
        name = platform.processor()
    return {"cpu": name, "flags": flags, "cores": os.cpu_count(), "load": os.getloadavg()[0]}


def segmenters(paragraphs: dict[str, list[list[str]]]) -> list[dict[str, Any]]:
    """Each segmenter's exact splits of the paragraphs and of the hard cases, and its speed."""
    import sentencex

    found: dict[str, Any] = {"sentencex": lambda lang, text: list(sentencex.segment(lang, text))}
    try:
        import pysbd

        cached: dict[str, Any] = {}

        def pysbd_split(lang: str, text: str) -> list[str]:
            if lang not in cached:
                try:
                    cached[lang] = pysbd.Segmenter(language=lang, clean=False)
                except ValueError:
                    cached[lang] = pysbd.Segmenter(language="en", clean=False)
            return list(cached[lang].segment(text))

        found["pysbd"] = pysbd_split
    except ImportError:
        pass
    rows = []
    for name, segment in found.items():
        row: dict[str, Any] = {"segmenter": name}
        for key, paras in paragraphs.items():
            lang = key.split(".")[-1]
            started, exact, sentences = time.perf_counter(), 0, 0
            for para in paras:
                got = [s.strip() for s in segment(lang, " ".join(para)) if s.strip()]
                exact += got == [s.strip() for s in para]
                sentences += len(para)
            row[key] = {"exact": exact / len(paras), "sentences_per_s": sentences / (time.perf_counter() - started)}
        row["hard"] = {case: len([s for s in segment(lang, text) if s.strip()]) == EXPECTED[case]
                       for case, (lang, text) in HARD.items()}  # fmt: skip
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--splits", nargs="+", default=["val", "test_2016_flickr"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[3, 5])
    ap.add_argument("--lines", type=int, default=0, help="the first N lines of each split (0: all)")
    ap.add_argument("--write", action="store_true", help="write docs/results/paragraphs.json")
    ap.add_argument("--out", type=Path, help="write the record here instead")
    args = ap.parse_args()

    import sacrebleu

    import mtkit

    translator = mtkit.load_translator(args.model, device="cpu")
    rows: list[dict[str, Any]] = []
    paragraphs: dict[str, list[list[str]]] = {}

    def keep() -> None:
        """The record so far, written after every row: a run cut short keeps what it measured."""
        if not (args.write or args.out):
            return
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(mtkit.__file__).parent
        ).stdout
        record = {
            "renderer": "bench/paragraphs.py",
            "what": "paragraphs of consecutive sentences translated whole and split, against one sentence a line",
            "command": "python bench/paragraphs.py --model MODEL --data DATA "
            + (f"--lines {args.lines} " if args.lines else "")
            + "--write",
            "model": "Multi30k En-De `small` (21.3 BLEU on test_2016_flickr, 3 minutes of training)",
            "commit": commit.strip(),
            "date": datetime.date.today().isoformat(),
            "machine": machine(),
            "threads": __import__("torch").get_num_threads(),
            "sentences": len(rows),
            "words": 0,
            "rows": rows,
            "segmenters": segs,
        }
        out = args.out or ROOT / "docs" / "results" / "paragraphs.json"
        out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")

    segs: list[dict[str, Any]] = []

    def run(name: str, sources: list[str], refs: list[str], split: bool) -> list[str]:
        started = time.perf_counter()
        out = translator.translate(sources, split=split)
        seconds = time.perf_counter() - started
        bleu = sacrebleu.corpus_bleu(out, [refs])
        rows.append({"name": name, "lines": len(sources), "bleu": bleu.score, "length": bleu.sys_len / bleu.ref_len,
                     "seconds": seconds})  # fmt: skip
        print(
            f"{name:55s} BLEU {bleu.score:6.2f}  length {bleu.sys_len / bleu.ref_len:.3f}  {seconds:6.1f} s", flush=True
        )
        keep()
        return out

    for split in args.splits:
        src, ref = read(args.data / f"{split}.en"), read(args.data / f"{split}.de")
        if args.lines:
            src, ref = src[: args.lines], ref[: args.lines]
        run(f"{split}, one line a segment (--no-split)", src, ref, False)
        run(f"{split}, lines split into sentences", src, ref, True)
        src_p = [punctuated(s) for s in src]
        one = run(f"{split} punctuated, one sentence a line", src_p, ref, False)
        for n in args.sizes:
            groups = [range(i, i + n) for i in range(0, len(src) - n + 1, n)]
            paras = [" ".join(src_p[i] for i in g) for g in groups]
            refs = [" ".join(ref[i] for i in g) for g in groups]
            joined = [" ".join(one[i] for i in g) for g in groups]
            bleu = sacrebleu.corpus_bleu(joined, [refs])
            rows.append({"name": f"{split}, {n}-sentence paragraphs, sentence by sentence", "lines": len(paras),
                         "bleu": bleu.score, "length": bleu.sys_len / bleu.ref_len, "seconds": None})  # fmt: skip
            print(f"{rows[-1]['name']:55s} BLEU {bleu.score:6.2f}  length {rows[-1]['length']:.3f}", flush=True)
            run(f"{split}, {n}-sentence paragraphs, whole (--no-split)", paras, refs, False)
            run(f"{split}, {n}-sentence paragraphs, split (the default)", paras, refs, True)
            paragraphs[f"{split} {n}.en"] = [[src_p[i] for i in g] for g in groups]
    segs.extend(segmenters(paragraphs))
    for row in segs:
        print(row["segmenter"], json.dumps({k: v for k, v in row.items() if k != "segmenter"}))
    keep()


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The markdown table docs/documents.md shows: BLEU and length of each way, and the gap to one a line."""
    lines = ["| test | BLEU | length (hyp/ref) | BLEU - sentence by sentence |", "|---|---|---|---|"]
    base: dict[str, float] = {}
    for row in rows:
        key = row["name"].rsplit(", ", 1)[0]
        if row["name"].endswith("sentence by sentence"):
            base[key] = row["bleu"]
        gap = f"{row['bleu'] - base[key]:+.2f}" if key in base else ""
        lines.append(f"| {row['name']} | {row['bleu']:.2f} | {row['length']:.3f} | {gap} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
