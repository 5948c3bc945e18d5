"""OUT/results.md of run.sh: test_2016_flickr En->Fr BLEU and chrF of the fine-tuned and the from-scratch model,
with each run's updates and wall-clock.

Usage (run.sh calls it): python results.py OUT BASE PAIRS UPDATES VOCAB -- TIMES...
(TIMES: lib.sh's rows, `| STEP | H:MM:SS |`.)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from mtkit.device import cpu_name
from mtkit.score import read_scores


def _last_step(run: Path) -> int | None:
    """The last update a run's metrics.jsonl records, or None."""
    log = run / "metrics.jsonl"
    if not log.is_file():
        return None
    steps = [json.loads(line).get("step") for line in log.read_text().splitlines() if line.strip()]
    known = [s for s in steps if isinstance(s, int)]
    return max(known) if known else None


def training_seconds(times: list[str], system: str) -> int:
    """Seconds of the `train SYSTEM to N` rows (both rounds of one run)."""
    total = 0
    for row in times:
        m = re.match(rf"\|\s*train {system} to \d+\s*\|\s*(\d+):(\d+):(\d+)\s*\|", row)
        if m:
            h, mi, s = (int(x) for x in m.groups())
            total += 3600 * h + 60 * mi + s
    return total


def main(argv: list[str]) -> str:
    out, base, pairs, updates, vocab = Path(argv[0]), argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    times = argv[argv.index("--") + 1 :] if "--" in argv else []
    rows = []
    for system, label in (("finetuned", "En-De model fine-tuned"), ("scratch", "from scratch")):
        s = read_scores(out / f"scores.{system}.json")
        took = training_seconds(times, system)
        rows.append(
            f"| {label} | {updates} | {took // 60}:{took % 60:02d} | {s.get('BLEU', float('nan')):.2f} | "
            f"{s.get('chrF2', float('nan')):.1f} |"
        )
    base_note = f"The En-De model: {base}"
    if Path(base).resolve() == (out / "run-en-de" / "checkpoint_last.pt").resolve():
        base_note += f", trained here for {_last_step(out / 'run-en-de')} updates"
    lines = [
        "# Multi30k En->Fr from a few pairs: the En-De model fine-tuned against training from scratch",
        "",
        f"The first {pairs} of Multi30k's En-Fr training pairs; test_2016_flickr (1,000 sentences), sacreBLEU and "
        f"chrF, beam 4. Both runs: {updates} updates of 768 tokens; the fine-tuned run keeps the En-De model's "
        f"vocabulary and architecture, the from-scratch run ('small') has its own {vocab}-piece BPE. "
        f"CPU: {cpu_name()}.",
        "",
        f"{base_note}.",
        "",
        "| model | updates | training (m:ss, both rounds) | BLEU | chrF |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]
    if times:
        lines += ["", "| step | wall-clock |", "|---|---:|", *times]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1:]))
