"""Decoding benches at several thread and worker settings: the settings as the command line gives them
(THREADSxWORKERS) and the instructions a child may use (--isa: `child_env`), each system's speed over its anchor's
(mtkit's over CTranslate2's at the same precision) within a setting, each system at its own best setting against
its anchor at the anchor's own best (the comparison with a peer at its best, as CTranslate2's own benchmark gives
every system), and the table a page shows of it (docs/gen_figures.py renders a bench/translate_speed.py --settings
record with `table`).

from best_setting import ANCHORS, ISA_CAPS, add_ratios, best_settings, child_env, setting_name, settings_list
from best_setting import table
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: a script's sys.path[0], and a page renderer's

from harness import paired_ratio  # noqa: E402

# --isa: each library's x86 instructions capped through its own variable (PyTorch's kernels, MKL, oneDNN,
# CTranslate2's own), so that an AVX-512 CPU runs the code an AVX2-only CPU runs: a proxy for one (its caches, clock
# and memory stay its own). fbgemm (mtkit's int8 products) has no such variable: compare the fp32 rows.
ISA_CAPS = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "CT2_FORCE_CPU_ISA": "AVX2",
    }
}


def child_env(isa: str | None) -> dict[str, str]:
    """A bench child's environment: this checkout first on PYTHONPATH, the --isa caps."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **ISA_CAPS.get(isa or "", {})}


def settings_list(text: str) -> list[tuple[int, int]]:
    """`1x1,2x1,1x2` as [(threads, workers), ...]."""
    found = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        threads, x, workers = item.partition("x")
        if not (x and threads.isdigit() and workers.isdigit() and int(threads) >= 1 and int(workers) >= 1):
            raise argparse.ArgumentTypeError(f"a setting is THREADSxWORKERS, e.g. 2x1, got {item!r}")
        found.append((int(threads), int(workers)))
    if not found:
        raise argparse.ArgumentTypeError("give at least one THREADSxWORKERS setting")
    return found


def setting_name(threads: int, workers: int) -> str:
    """A setting as results.py's table names it: 1 thread, 2 threads, 2 workers x 1 thread."""
    each = f"{threads} thread{'s' if threads > 1 else ''}"
    return f"{workers} workers x {each}" if workers > 1 else each


def ratios(row: dict[str, Any], other: dict[str, Any]) -> tuple[float, float | None]:
    """`row`'s speed over `other`'s: best round over best round, and with several rounds the median over rounds of
    the two systems' ratio within a round (None with one round)."""
    best = round(row["sentences_per_s"] / other["sentences_per_s"], 3)
    if len(row["rounds_sentences_per_s"]) < 2:
        return best, None
    return best, round(paired_ratio(row["rounds_sentences_per_s"], other["rounds_sentences_per_s"])[0], 3)


# Each system's speed is given over its anchor's: mtkit's over CTranslate2's at the same precision.
ANCHORS = {"mtkit-fp32": "ct2-fp32", "mtkit-int8": "ct2-int8", "ct2-int8": "ct2-fp32"}
ANCHORS |= {"mtkit-ct2-fp32": "ct2-fp32", "mtkit-ct2-int8": "ct2-int8"}
ANCHORS |= {"mtkit-bf16": "mtkit-fp32", "mtkit-fp16": "mtkit-fp32"}


def best_settings(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each system's fastest setting (by its best round), and its speed over its anchor's at the anchor's own fastest
    setting: best round over best round, and paired (the median of the rounds' ratios: the rounds took every
    system and setting in turn, so a round's two figures are minutes apart at most)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["system"] not in best or row["sentences_per_s"] > best[row["system"]]["sentences_per_s"]:
            best[row["system"]] = row
    found = {
        system: {"setting": row["setting"], "sentences_per_s": row["sentences_per_s"]} for system, row in best.items()
    }
    for system, anchor in ANCHORS.items():
        if system in best and anchor in best:
            ratio, paired = ratios(best[system], best[anchor])
            found[system][f"vs_{anchor}_at_its_best"] = ratio
            if paired is not None:
                found[system][f"paired_vs_{anchor}_at_its_best"] = paired
    return found


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The markdown table of a --settings record (docs/gen_figures.py renders it with this): every system at every
    setting, its best setting in bold, then each system at its best against its anchor at the anchor's best."""
    best = best_settings(rows)
    lines = [
        f"| system ({sentences:,} sentences, {words:,} source words) | setting | sent/s | words/s (output) | peak RSS "
        "MiB | BLEU | x its anchor, same setting |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = "**" if best[r["system"]]["setting"] == r["setting"] else ""
        ratio = next((f"{v:.2f}x {k[3:]}" for k, v in r.items() if k.startswith("vs_")), "")
        bleu = "-" if r.get("bleu") is None else f"{r['bleu']:.2f}"
        speed = f"{mark}{r['sentences_per_s']:,.1f}{mark}"
        cells = [f"{mark}{r['system']}{mark}", r["setting"], speed, f"{r['words_per_s']:,.0f}"]
        lines.append("| " + " | ".join([*cells, f"{r['peak_rss_mib']:,.0f}", bleu, ratio]) + " |")
    compared = [(system, anchor) for system, anchor in ANCHORS.items() if system in best and anchor in best]
    if compared:
        lines += ["", "| at each one's best setting | sent/s | against, at its best | sent/s | ratio | paired |"]
        lines.append("|---|---|---|---|---|---|")
    for system, anchor in compared:
        mine, theirs = best[system], best[anchor]
        paired = mine.get(f"paired_vs_{anchor}_at_its_best")
        cells = [f"{system}, {mine['setting']}", f"{mine['sentences_per_s']:,.1f}", f"{anchor}, {theirs['setting']}"]
        cells += [f"{theirs['sentences_per_s']:,.1f}", f"{mine[f'vs_{anchor}_at_its_best']:.2f}x"]
        lines.append("| " + " | ".join([*cells, "-" if paired is None else f"{paired:.2f}x"]) + " |")
    return "\n".join(lines)


def add_ratios(rows: dict[str, dict[str, Any]]) -> None:
    """Each system's speed over its anchor's: best round over best round (vs_ANCHOR) and, with several rounds,
    the median over rounds of the two systems' ratio within a round (paired_vs_ANCHOR).

    The paired median is the steadier figure on a shared machine (bench/harness.py says why).
    """
    for system, anchor in ANCHORS.items():
        if system in rows and anchor in rows:
            ratio, paired = ratios(rows[system], rows[anchor])
            rows[system][f"vs_{anchor}"] = ratio
            if paired is not None:
                rows[system][f"paired_vs_{anchor}"] = paired
