"""OUT/results.md of run.sh: test_2016_flickr BLEU and chrF per direction, bilingual against multilingual.

Usage (run.sh calls it): python results.py OUT UPDATES WARMUP BEAM -- TIMES...
"""

from __future__ import annotations

import sys
from pathlib import Path

from mtkit.device import cpu_name
from mtkit.score import read_scores


def main(argv: list[str]) -> str:
    out, updates, warmup, beam = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    times = argv[argv.index("--") + 1 :] if "--" in argv else []
    rows = []
    bleus: dict[str, list[float]] = {"bi": [], "multi": []}
    for tgt in ("de", "fr", "cs"):
        bi, multi = read_scores(out / f"scores.bi.{tgt}.json"), read_scores(out / f"scores.multi.{tgt}.json")
        bleus["bi"].append(bi.get("BLEU", float("nan")))
        bleus["multi"].append(multi.get("BLEU", float("nan")))
        rows.append(
            f"| en->{tgt} | {bi.get('BLEU', float('nan')):.2f} | {multi.get('BLEU', float('nan')):.2f} | "
            f"{bi.get('chrF2', float('nan')):.1f} | {multi.get('chrF2', float('nan')):.1f} |"
        )
    mean = {k: sum(v) / len(v) for k, v in bleus.items()}
    lines = [
        "# Multi30k En->{De,Fr,Cs}: one multilingual model against three bilingual ones",
        "",
        f"test_2016_flickr, sacreBLEU and chrF, beam {beam}. Each bilingual model: {updates} updates; the multilingual "
        f"model: {3 * updates} (the same total), pairs mixed by temperature 5; warmup {warmup}. CPU: {cpu_name()}.",
        "",
        "| direction | BLEU bilingual | BLEU multilingual | chrF bilingual | chrF multilingual |",
        "|---|---:|---:|---:|---:|",
        *rows,
        f"| mean | {mean['bi']:.2f} | {mean['multi']:.2f} | | |",
    ]
    zero = read_scores(out / "scores.zero-shot.fr.json")
    if zero:
        lines += ["", f"Zero-shot De->Fr (never seen in training): BLEU {zero['BLEU']:.2f}, chrF {zero['chrF2']:.1f}."]
    if times:
        lines += ["", "| step | wall-clock |", "|---|---:|", *times]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1:]))
