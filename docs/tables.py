"""The results tables pages show from records whose script keeps no `table` of its own: a departed bench's (its
question settled, the script left bench/; its renderer came here unchanged, so the same record renders the same
table) or a recipe script's (recipes/multi30k-en-de/sweep.py).

A record names its renderer as `docs/tables.py::NAME` (NAME one of the functions below, each `NAME(rows,
sentences, words)`), and docs/gen_figures.py calls it; the script that measured is in the record's command (a
departed one in git's history: `git show SHA:bench/SCRIPT.py`, SHA the record's commit).
"""

from __future__ import annotations

from typing import Any


def glossary(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The page's table: one row per model and search."""
    lines = [
        "| model, search | term occurrences produced | plain output already had them | sentences without a term "
        "unchanged | chrF plain -> glossary | BLEU plain -> glossary | sentences/s plain -> glossary (paired) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["scores"]
        lines.append(
            f"| {r['model']}, {r['decode']} | {r['produced']:,} of {r['occurrences']:,} "
            f"({100 * r['produced_share']:.1f}%) | {r['plain_already_held']:,} | "
            f"{r['unchanged_without_terms']:,} of {r['sentences_without_terms']:,} | "
            f"{s['plain']['chrf']:.1f} -> {s['glossary']['chrf']:.1f} | {s['plain']['bleu']:.1f} -> "
            f"{s['glossary']['bleu']:.1f} | {r['sentences_per_s']['plain']:.1f} -> "
            f"{r['sentences_per_s']['glossary']:.1f} ({r['speed_ratio']:.2f}x) |"
        )
    return "\n".join(lines)


def confidence(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The record's rows as a Markdown table (docs/gen_figures.py calls this to render docs/results/*.json)."""
    lines = [
        f"| on {sentences:,} test sentences ({words:,} reference words) | Spearman with chrF | flags of the worst "
        "10% | calibration: largest decile gap | decode time, paired | the confidence's own time |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        gap = f"{r['max_decile_gap']:.3f}" if "max_decile_gap" in r else "(not a probability)"
        time_ratio = f"{r['time_ratio']:.3f}x" if "time_ratio" in r else "1x"
        own = f"+{r['own_time']:.1%}" if "own_time" in r else "0"
        lines.append(f"| {r['name']} | {r['spearman']:.3f} | {r['flagged']:.0%} | {gap} | {time_ratio} | {own} |")
    sweeps = {r["name"]: r["dev"][k] for r in rows for k in r.get("dev", {}) if k.endswith("_by_threshold")}
    thresholds = sorted({t for sweep in sweeps.values() for t in sweep}, key=float)
    if sweeps:  # how the threshold was chosen: on the dev set, each sentence rated by a calibrator fitted without it
        lines += ["", "| dev set, 5-fold Spearman with chrF, by threshold | " + " | ".join(thresholds) + " |"]
        lines.append("|---|" + "---|" * len(thresholds))
        for name, sweep in sweeps.items():
            cells = [f"{sweep[t]:.3f}" if t in sweep else "" for t in thresholds]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paragraphs(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
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


def documents_speed(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The markdown table docs/documents.md shows."""
    lines = ["| input | sentences per CPU second | x plain lines | sentences/s (wall clock, shared machine) |"]
    lines += ["|---|---|---|---|"]
    lines += [
        f"| {r['name']} | {r['sentences_per_cpu_s']:.1f} | {r['x_lines']:.2f} | {r['sentences_per_s']:.1f} |"
        for r in rows
    ]
    return "\n".join(lines)


def quick_sweep(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """recipes/multi30k-en-de/sweep.py's settings by mean dev BLEU, the best first."""
    lines = [f"| setting (on val: {sentences:,} sentences, {words:,} reference words) | dev sacreBLEU by seed | mean | "
             "spread |", "|---|---|---|---|"]  # fmt: skip
    for r in sorted(rows, key=lambda r: -r["mean"]):
        name = f"**{r['name']}**" if r["best"] else r["name"]
        seeds = ", ".join(f"{b:.2f}" for b in r["dev_bleu"])
        lines.append(f"| {name} | {seeds} | {r['mean']:.2f} | {r['spread']:.2f} |")
    return "\n".join(lines)


def recipe_seeds(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """recipes/multi30k-en-de/seeds.py's runs of the recipe, one a seed, and their mean."""
    lines = [
        f"| seed | updates | training minutes | precision | model.pt | dev sacreBLEU | test_2016_flickr sacreBLEU "
        f"({sentences:,} sentences) | test chrF2 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        dev = "-" if r["dev_bleu"] is None else f"{r['dev_bleu']:.2f}"
        lines.append(
            f"| {r['name'].removeprefix('seed ')} | {r['updates']:,} | {r['training_minutes']:.1f} | {r['precision']} "
            f"| {r['model']} checkpoint | {dev} | {r['test_bleu']:.2f} | {r['test_chrf']:.2f} |"
        )
    bleu = [r["test_bleu"] for r in rows]
    chrf = [r["test_chrf"] for r in rows]
    if len(rows) == 1:  # one seed: no mean to give
        return "\n".join(lines)
    lines.append(
        f"| mean (spread) | | | | | | **{sum(bleu) / len(bleu):.2f}** ({max(bleu) - min(bleu):.2f}) | "
        f"{sum(chrf) / len(chrf):.2f} ({max(chrf) - min(chrf):.2f}) |"
    )
    return "\n".join(lines)


def fairseq_same_search(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """bench/fairseq_same_search.py: fairseq 0.12 and mtkit, the same budget, checkpoint and search."""
    lines = [
        f"| system | search | dev sacreBLEU | test_2016_flickr sacreBLEU ({sentences:,} sentences) | test chrF2 | "
        "updates | training minutes | precision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        dev = "-" if r["dev_bleu"] is None else f"{r['dev_bleu']:.2f}"
        lines.append(
            f"| {r['system']}, last checkpoint | {r['search']} | {dev} | {r['bleu']:.2f} | {r['chrf']:.2f} | "
            f"{r['updates']:,} | {r['minutes']:.1f} | {r['precision']} |"
        )
    return "\n".join(lines)
