"""How good and how costly `--confidence` is: fitted on a data directory's dev set, measured on its test set.

    python bench/confidence.py --model FWD.pt --reverse-model BWD.pt --data DATA [--rounds 3] [--threads 1]

DATA is a `mtkit prepare` directory (raw/valid for the fit, raw/test for the figures; never fitted on). The
calibrators are fitted by the command line (`mtkit calibrate`), the test set is translated through the Python API
(`mtkit.load_translator`, `translate_stream(confidence=...)`): nothing internal is imported. Figures, each beside
the raw score (the search's log-probability over its length penalty) where it applies:

- Spearman's correlation of each sentence's confidence with its sentence chrF against the reference;
- the share of the 10% worst translations by chrF among the 10% least confident ("flagging");
- calibration: per decile of confidence, its mean against the observed share of acceptable translations, and the
  reliability diagram of it (--plot, a PNG; needs matplotlib, the `plot` extra);
- the decode time with a confidence over the time without, forward-only and with the reverse model: rounds of
  the three back to back, each first in turn (paired: the machine may be shared), the median of the rounds' ratios;
  and the confidence's own work alone (`Confidence.annotate` of the round's translations) over the round's decode
  without one, finer than a ratio of two decodes on a busy machine can resolve.

It prints the table and writes the record (--out, JSON) that docs/gen_figures.py renders with `table` below.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FLAG_SHARE = 0.1
SYSTEMS = ("plain", "forward", "backward")  # decoded without a confidence, with the forward features, with both
NAMES = {
    "score": "raw score (log-probability / length penalty)",
    "forward": "confidence, the forward model's features",
    "backward": "confidence, with the reverse model's score",
}


def ranks(x: list[float]) -> list[float]:
    """Ranks from 0, ties sharing their mean rank."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    out = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    return statistics.correlation(ra, rb)


def flagged(confidence: list[float], chrf: list[float], share: float = FLAG_SHARE) -> float:
    """The share of the `share` worst by chrF found among the `share` least confident."""
    n = round(share * len(chrf))
    low = set(sorted(range(len(chrf)), key=lambda i: (confidence[i], i))[:n])
    worst = set(sorted(range(len(chrf)), key=lambda i: (chrf[i], i))[:n])
    return len(low & worst) / n


def deciles(confidence: list[float], acceptable: list[bool]) -> list[dict[str, float]]:
    """Per tenth of the sentences by confidence: its mean confidence and the share of them that is acceptable."""
    order = sorted(range(len(confidence)), key=lambda i: (confidence[i], i))
    out = []
    for d in range(10):
        part = order[d * len(order) // 10 : (d + 1) * len(order) // 10]
        out.append(
            {
                "predicted": statistics.fmean(confidence[i] for i in part),
                "observed": statistics.fmean(float(acceptable[i]) for i in part),
                "sentences": len(part),
            }
        )
    return out


def calibrate(args: argparse.Namespace, work: Path, reverse: bool) -> tuple[Path, list[str]]:
    """The calibrator `mtkit calibrate` fits on DATA's dev set (with or without the reverse model), and its command."""
    path = work / ("backward" if reverse else "forward") / "confidence.json"
    command = [sys.executable, "-m", "mtkit", "calibrate", str(args.data), "-m", args.model, "-o", str(path)]
    command += ["--threads", str(args.threads), "--beam", str(args.beam), "--alpha", str(args.alpha)]
    command += ["--reverse-model", args.reverse_model] if reverse else []
    subprocess.run(command, check=True)
    return path, command


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, metavar="MODEL", help="the forward model")
    parser.add_argument("--reverse-model", required=True, metavar="REVERSE", help="a model of the other direction")
    parser.add_argument(
        "--data", required=True, type=Path, metavar="DATA", help="a `mtkit prepare` directory: raw/valid, raw/test"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of the three decodes, back to back")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument(
        "--work", type=Path, default=Path("bench-confidence"), metavar="WORK", help="where the calibrators go"
    )
    parser.add_argument("--record", help="the record to write (JSON), e.g. docs/results/confidence-multi30k.json")
    parser.add_argument("--plot", type=Path, help="the reliability diagram to write (PNG)")
    return parser.parse_args(argv)


def main() -> None:
    from harness import Record, command  # bench/ is a script's sys.path[0]; imported here, so that
    # docs/gen_figures.py can load this file for `table` from anywhere

    args = parse_args()
    started = Record()  # the load and the date as the bench begins
    import sacrebleu

    import mtkit

    fitted = {name: calibrate(args, args.work, name == "backward") for name in ("forward", "backward")}
    prepared = json.loads((args.data / "prepare.json").read_text(encoding="utf-8"))
    src, tgt = prepared["src_lang"], prepared["tgt_lang"]
    sources = (args.data / "raw" / f"test.{src}").read_text(encoding="utf-8").splitlines()
    references = (args.data / "raw" / f"test.{tgt}").read_text(encoding="utf-8").splitlines()

    translator = mtkit.load_translator(args.model, device="cpu", threads=args.threads)
    reverse = mtkit.load_translator(args.reverse_model, device="cpu", threads=args.threads)
    config = mtkit.DecodeConfig(beam=args.beam, alpha=args.alpha)
    rates = {
        "plain": None,
        "forward": mtkit.Confidence.load(translator, calibrator=fitted["forward"][0]),
        "backward": mtkit.Confidence.load(translator, reverse, calibrator=fitted["backward"][0]),
    }
    seconds: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    own: dict[str, list[float]] = {name: [] for name in SYSTEMS[1:]}
    found: dict[str, list[Any]] = {}
    list(translator.translate_stream(sources[:50], config))  # warm up: the first batches pay for allocation
    for r in range(args.rounds):
        for name in SYSTEMS[r % 3 :] + SYSTEMS[: r % 3]:  # each first in turn: no system always follows another
            start = time.perf_counter()
            found[name] = list(translator.translate_stream(sources, config, confidence=rates[name]))
            seconds[name].append(time.perf_counter() - start)
            print(f"{name}: {seconds[name][-1]:.1f} s", file=sys.stderr)
        for name in SYSTEMS[1:]:  # the confidence's own work, alone: what the decodes' ratio cannot resolve
            start = time.perf_counter()
            rates[name].annotate(translator, sources, found["plain"], config)
            own[name].append(time.perf_counter() - start)
    texts = [t.text for t in found["plain"]]
    if any([t.text for t in found[name]] != texts for name in SYSTEMS):
        raise SystemExit("a confidence changed a translation: the search must be the same with and without one")

    chrf = sacrebleu.metrics.CHRF()
    scores = [chrf.sentence_score(t, [r]).score for t, r in zip(texts, references)]
    threshold = json.loads(fitted["forward"][0].read_text(encoding="utf-8"))["threshold"]
    acceptable = [s >= threshold for s in scores]
    values = {
        "score": [t.score for t in found["plain"]],
        **{name: [t.confidence for t in found[name]] for name in ("forward", "backward")},
    }
    rows = []
    for name, v in values.items():
        row: dict[str, Any] = {"name": NAMES[name], "spearman": spearman(v, scores), "flagged": flagged(v, scores)}
        if name != "score":
            row["deciles"] = deciles(v, acceptable)
            row["max_decile_gap"] = max(abs(d["predicted"] - d["observed"]) for d in row["deciles"])
            ratios = [a / b for a, b in zip(seconds[name], seconds["plain"])]
            row["time_ratio"] = statistics.median(ratios)
            row["time_ratios"] = ratios
            row["own_time"] = statistics.median(a / b for a, b in zip(own[name], seconds["plain"]))
            row["dev"] = json.loads(fitted[name][0].read_text(encoding="utf-8"))["fitted_on"]["dev"]
        rows.append(row)
    print(table(rows, len(sources), sum(len(r.split()) for r in references)))

    passes = {"decode_seconds": seconds, "confidence_seconds": own}
    # The rows as the table shows them, each with the raw passes it was made from (docs/gen_figures.py renders
    # them with `table` below), and every sentence's chrF and scores.
    for row, name in zip(rows, values):
        row["passes"] = {"decode_seconds": seconds["plain" if name == "score" else name]}
        if name != "score":
            row["passes"]["confidence_seconds"] = own[name]
    settings = {"beam": args.beam, "alpha": args.alpha, "threshold": threshold, "rounds": args.rounds}
    data = started.data(settings, passes, {"per_sentence": {"chrf": scores, **values}})
    data.update(
        renderer="bench/confidence.py",
        what="a calibrated confidence: fitted on the dev set (valid), measured on the test set",
        fit_commands={k: command(["mtkit", *c[3:]]).removeprefix("python ") for k, (_, c) in fitted.items()},
        test=f"raw/test of {prepared.get('corpus', 'DATA')}",
        sentences=len(sources),
        words=sum(len(r.split()) for r in references),
        rows=rows,
    )
    if args.record:
        path = Path(args.record)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(rows, threshold, args.plot)


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
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


def plot(rows: list[dict[str, Any]], threshold: float, path: Path) -> None:
    """The reliability diagram: each decile's mean confidence against its observed share of acceptable sentences."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5), dpi=100)
    ax.plot([0, 1], [0, 1], color="grey", linewidth=1, label="perfectly calibrated")
    ax.fill_between([0, 1], [-0.1, 0.9], [0.1, 1.1], color="grey", alpha=0.15, label="within 0.1")
    for r, marker in zip((r for r in rows if "deciles" in r), ("o", "s")):
        xs, ys = [d["predicted"] for d in r["deciles"]], [d["observed"] for d in r["deciles"]]
        ax.plot(xs, ys, marker=marker, label=r["name"])
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (mean of each tenth of the test set)")
    ax.set_ylabel(f"observed share acceptable (sentence chrF >= {threshold:g})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


if __name__ == "__main__":
    main()
