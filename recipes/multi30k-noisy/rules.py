"""Multi30k-noisy: label-free rules for the dual cross-entropy threshold, measured against the oracle share.

    python recipes/multi30k-noisy/rules.py --noisy out/noisy --dual-xent out/cleaned/averaged.pt \\
        out/backward/averaged.pt --record docs/results/noisy-rules.json
    python recipes/multi30k-noisy/rules.py ... --bleu-steps 1590     # and train on what the best rules keep

The recipe's `dual` system drops the worst-scored 4% of the pairs the rules keep (`--dual-xent-drop 0.04`): the
largest share that kept the clean pairs lost under 2% on this corpus, which only its noise labels can tell. That is
an oracle. This script scores every pair the rules keep once, by dual conditional cross-entropy (mtkit's own
function, mtkit.decode.pairs.dual_cross_entropy, as `mtkit clean --dual-xent` and noise.py score), scores the
held-out dev set (Multi30k's val, clean by construction, of the same domain) with it, and measures each rule for
the threshold above which a pair is dropped:

- a fixed share of the pairs (`share-S`, what `mtkit clean --dual-xent-drop S` does; the literature's usual way);
- the knee of the sorted scores (`knee`): the point of the curve farthest below its chord (Kneedle's, Satopaa et
  al. 2011, without its smoothing: the curve is 20,000 points, not a noisy few);
- held-out: the dev pairs' own scores (`dev-pQ`: their Q-th percentile; `dev-mad`: their median + K * 1.4826 * MAD,
  the MAD scaled to a standard deviation under a normal), a threshold that needs no labels and no share;
- the oracle (`oracle`): the largest share whose clean pairs lost (the rules' and the drop's together) stay under
  --oracle-loss (2%), found with the labels (noisy/train.kind): not a rule a user can apply.

For each: the threshold, the share of the rule-kept pairs it drops, the noise it removes by kind (misaligned above
all, which no rule sees), and the clean pairs lost. With --bleu-steps N, run.sh's model is trained for N updates on
what the best label-free rule keeps and on what the oracle keeps (`mtkit clean --dual-xent-max T`, then run.sh's
prepare, bpe, train, average, translate and score), and the forward model (the rules only) is scored alike: dev and
test sacreBLEU. The best label-free rule is chosen on the labels (the most noise removed with the clean pairs lost
under --oracle-loss), never on BLEU. The record is written after the labels' measurement and after each training.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHIPPED = ROOT / "mtkit" / "data" / "multi30k"
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # mtkit of this checkout; bench/harness.py (noise.py: beside)

from harness import Record, portable, run_mtkit  # noqa: E402  # the benches' record writer and mtkit runner

from mtkit.data.webclean import WebCleanConfig  # noqa: E402

SHARES = (0.02, 0.04, 0.05, 0.10)  # 0.04: run.sh's --dual-xent-drop, the oracle share of the unrecorded figures
PERCENTILES = (99.0, 99.5)
MAD_K = 3.0
MAD_NORMAL = 1.4826  # MAD * 1.4826 estimates a normal's standard deviation
ORACLE_LOSS = 0.02
# run.sh's train_system, its budget aside (--steps N: recipes/lib.sh training_budget)
TRAIN = ["--preset", "small", "--max-tokens", "2048", "--warmup", "400", "--lr-scale", "0.64", "--dropout", "0.1",
         "--label-smoothing", "0.1", "--lr-cooldown", "0.2", "--keep-last", "5", "--valid-every", "200",
         "--valid-bleu", "500", "--log-every", "50"]  # fmt: skip
SEARCH = ["--beam", "4", "--alpha", "1.4", "--early-stop", "exact"]


# ----------------------------------------------------------------------------------------------------- the rules
def share_threshold(scores: Sequence[float], share: float) -> float:
    """The score above which `share` of the pairs lie: np.quantile as `mtkit clean --dual-xent-drop` takes it
    (mtkit.data.webclean.estimate_threshold), here over every pair rather than a sample."""
    return float(np.quantile(np.asarray(scores, dtype=float), 1.0 - share))


def knee_threshold(scores: Sequence[float]) -> float:
    """The knee of the scores sorted from best to worst: both axes scaled to [0, 1] (rank, score), the point farthest
    below the chord from the first point to the last, i.e. the largest rank - score (Kneedle's difference curve,
    Satopaa et al. 2011, for a convex rising curve). Written here: the venv holds no knee library (kneed), and the
    rule is these four lines. Pairs scoring above the knee's score are dropped; equal scores: none."""
    y = np.sort(np.asarray(scores, dtype=float))
    if len(y) < 3 or y[-1] == y[0]:
        return float(y[-1]) if len(y) else 0.0
    x = np.linspace(0.0, 1.0, len(y))
    return float(y[int(np.argmax(x - (y - y[0]) / (y[-1] - y[0])))])


def percentile_threshold(dev: Sequence[float], q: float) -> float:
    """The dev pairs' Q-th percentile (numpy's linear interpolation): a training pair scoring worse than all but
    (100 - Q)% of the clean held-out pairs is dropped."""
    return float(np.percentile(np.asarray(dev, dtype=float), q))


def mad_threshold(dev: Sequence[float], k: float = MAD_K) -> float:
    """The dev pairs' median + k * 1.4826 * their median absolute deviation: a robust 'k standard deviations'."""
    d = np.asarray(dev, dtype=float)
    median = float(np.median(d))
    return median + k * MAD_NORMAL * float(np.median(np.abs(d - median)))


def oracle_threshold(scores: Sequence[float], clean: Sequence[bool], lost_before: int, total_clean: int,
                     limit: float = ORACLE_LOSS) -> float:  # fmt: skip
    """With the labels: the threshold of the largest drop whose clean pairs lost, the `lost_before` the rules lost
    and the clean ones among the pairs dropped, stay under `limit` of `total_clean`. The threshold is the best score
    dropped's neighbour, the worst score kept (inf: drop none; where the rules alone lose the limit, none)."""
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    lost = lost_before + np.cumsum(np.asarray(clean, dtype=bool)[order])  # lost[i]: after dropping the i+1 worst
    under = lost / max(total_clean, 1) < limit
    n = int(np.argmin(under)) if not under.all() else len(order)  # lost only grows: the first failure ends it
    if lost_before / max(total_clean, 1) >= limit or n == 0:
        return float("inf")
    return float(np.asarray(scores, dtype=float)[order[n]]) if n < len(order) else float("-inf")


def evaluate(threshold: float, scores: Sequence[float], kinds: Sequence[str], table: dict[str, dict[str, int]]
             ) -> dict[str, Any]:  # fmt: skip
    """What dropping the rule-kept pairs scoring above `threshold` does: the share dropped, and for each kind the pairs
    the drop removes and what the rules and it remove together, of the noisy set's pairs of that kind (`table`:
    noise.py report's, by kind: 'pairs', 'kept'). Clean lost and noise removed are of the whole noisy set."""
    s = np.asarray(scores, dtype=float)
    dropped = s > threshold
    by_kind: dict[str, dict[str, Any]] = {}
    for kind, row in table.items():
        mine = np.asarray([k == kind for k in kinds], dtype=bool)
        gone = int((dropped & mine).sum())
        removed = row["pairs"] - row["kept"] + gone
        by_kind[kind] = {"pairs": row["pairs"], "rule_kept": row["kept"], "dual_dropped": gone, "removed": removed,
                         "removed_share": removed / max(row["pairs"], 1)}  # fmt: skip
    noise = [v for k, v in by_kind.items() if k != "clean"]
    return {
        "threshold": threshold,
        "dropped": int(dropped.sum()),
        "share": float(dropped.mean()) if len(s) else 0.0,
        "clean_lost": by_kind["clean"]["removed_share"],
        "clean_lost_dual": by_kind["clean"]["dual_dropped"] / max(by_kind["clean"]["pairs"], 1),
        "noise_removed": sum(v["removed"] for v in noise) / max(sum(v["pairs"] for v in noise), 1),
        "misaligned_removed": by_kind["misaligned"]["removed_share"],
        "by_kind": by_kind,
    }


def rules(scores: Sequence[float], dev: Sequence[float], args: argparse.Namespace) -> list[tuple[str, str, float]]:
    """Each label-free rule: (name, what it is, its threshold)."""
    made = [
        (f"share-{s:g}", f"fixed share: the worst {s:.0%} dropped", share_threshold(scores, s)) for s in args.shares
    ]
    made.append(("knee", "knee of the sorted scores (farthest below the chord)", knee_threshold(scores)))
    made += [
        (f"dev-p{q:g}", f"held-out: dev's {q:g}th percentile", percentile_threshold(dev, q)) for q in args.percentiles
    ]
    made.append(("dev-mad", f"held-out: dev median + {args.mad_k:g} x 1.4826 MAD", mad_threshold(dev, args.mad_k)))
    return made


def best_label_free(rows: list[dict[str, Any]], limit: float) -> str:
    """The label-free rule that removes the most noise with the clean pairs lost under `limit` (judged on the labels,
    not on BLEU); where none stays under it, the one that loses the fewest."""
    free = [r for r in rows if r["kind"] != "oracle"]
    under = [r for r in free if r["clean_lost"] < limit]
    if under:
        return str(max(under, key=lambda r: r["noise_removed"])["name"])
    return str(min(free, key=lambda r: r["clean_lost"])["name"])


# ----------------------------------------------------------------------------------------------------- scoring
def read_lines(path: Path) -> list[str]:
    """A file's lines, gzip or not; split on newlines only (a caption may hold U+2028 or a form feed)."""
    raw = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8", newline="")
    with raw as f:
        return [line.rstrip("\r") for line in f.read().split("\n")[:-1]]


def cleaning(ratio: float) -> WebCleanConfig:
    """`mtkit clean --all --max-char-ratio R`'s rules, as run.sh cleans (noise.py report --all)."""
    return WebCleanConfig(True, True, True, 0, ratio, True, True, True)


def rule_kept(noisy: Path, ratio: float) -> tuple[list[str], list[str], list[str], dict[str, dict[str, int]]]:
    """The pairs `mtkit clean --all --max-char-ratio R` keeps (sources, targets, their kinds), and for each kind of
    noise its pairs and those the rules keep (noise.py report's table: its columns 'pairs' and 'kept' are used)."""
    from noise import cleaned, tabulate  # beside this script

    config = cleaning(ratio)
    src, tgt, kinds, drops = cleaned(noisy, config)
    keep = [i for i, rule in enumerate(drops) if rule is None]
    return [src[i] for i in keep], [tgt[i] for i in keep], [kinds[i] for i in keep], tabulate(kinds, drops, config)


def trained(path: str) -> dict[str, Any]:
    """How long a model was trained (its update and the run's --max-steps, as mtkit's file keeps them): the scores,
    and so every threshold, depend on it."""
    from mtkit.checkpoint import load  # weights only: a model file is never unpickled as code
    from mtkit.errors import MtkitError

    try:
        kept = load(path, mmap=True)  # its few fields read, its tensors left in the file
    except MtkitError:  # an OPUS-MT directory or Hub name: nothing to read here
        return {"model": portable(path)}
    steps = (kept.get("train_config") or {}).get("max_steps")
    return {"model": portable(path), "step": kept.get("step"), "max_steps": steps}


def dual_scorer(forward: str, backward: str) -> Callable[[Sequence[str], Sequence[str]], list[float]]:
    """mtkit's dual cross-entropy with the two models, as `mtkit clean --dual-xent` loads them (CPU)."""
    from mtkit import load_translator
    from mtkit.decode.pairs import dual_cross_entropy

    return dual_cross_entropy(load_translator(forward, "cpu"), load_translator(backward, "cpu"))


# ----------------------------------------------------------------------------------------------------- BLEU
def budget(steps: int) -> list[str]:
    """run.sh --steps N's options (../lib.sh training_budget): N updates, a checkpoint every N/25."""
    return ["--max-minutes", "0", "--max-steps", str(steps), "--save-every-minutes", "0",
            "--save-every-steps", str((steps + 24) // 25)]  # fmt: skip


def bleu(model: Path, data: Path, out: Path) -> dict[str, float]:
    """dev and test sacreBLEU of `model` with run.sh's search, on the data directory's raw val and test."""
    out.mkdir(parents=True, exist_ok=True)
    scores: dict[str, float] = {}
    for split, name in (("valid", "dev_bleu"), ("test", "test_bleu")):
        hyp = out / f"{split}.hyp.de"
        run_mtkit(["translate", "--model", str(model), "--input", str(data / "raw" / f"{split}.en"), "--output",
                   str(hyp), *SEARCH])  # fmt: skip
        said = run_mtkit(["score", str(hyp), "--ref", str(data / "raw" / f"{split}.de"), "--lang", "de", "--json"])
        scores[name] = float(json.loads(said)["scores"][0]["score"])
    return scores


def train_on(threshold: float, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """run.sh's dual system with `--dual-xent-max threshold` in place of a share: clean, prepare, bpe, train, average,
    and its dev and test sacreBLEU."""
    noisy, m30k = Path(args.noisy), Path(args.data)
    run_mtkit(["clean", str(noisy / "train.en"), str(noisy / "train.de"), "--out", str(out / "train"), "--all",
               "--max-char-ratio", f"{args.max_char_ratio:g}", "--dual-xent", *args.dual_xent,
               "--dual-xent-max", repr(threshold)])  # fmt: skip
    data = out / "data"
    run_mtkit(["prepare", "custom", "--out", str(data), "--train-src", str(out / "train.en"), "--train-tgt",
               str(out / "train.de"), "--valid-src", str(m30k / "val.en.gz"), "--valid-tgt", str(m30k / "val.de.gz"),
               "--test-src", str(m30k / "test_2016_flickr.en.gz"), "--test-tgt",
               str(m30k / "test_2016_flickr.de.gz")])  # fmt: skip
    run_mtkit(["bpe", str(data), "--vocab-size", "8000"])
    run_mtkit(["train", str(data), "--out", str(out / "run"), *TRAIN, *budget(args.bleu_steps), "--seed", "1"])
    run_mtkit(["average", str(out / "run"), "--last", "5", "--output", str(out / "averaged.pt")])
    pairs = len(read_lines(out / "train.en"))
    return {"pairs": pairs, **bleu(out / "averaged.pt", data, out)}


# ----------------------------------------------------------------------------------------------------- the record
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--noisy", required=True, type=Path, help="noise.py build's OUT: train.{en,de,kind}")
    parser.add_argument("--dual-xent", nargs=2, required=True, metavar=("FORWARD", "BACKWARD"),
                        help="the En->De and De->En models trained on the rule-cleaned set (run.sh's)")  # fmt: skip
    parser.add_argument("--data", type=Path, default=SHIPPED, help="Multi30k's val.{en,de}.gz (default: shipped)")
    parser.add_argument("--max-char-ratio", type=float, default=2.0, help="the rules' limit (run.sh's default 2)")
    parser.add_argument("--shares", type=float, nargs="+", default=list(SHARES))
    parser.add_argument("--percentiles", type=float, nargs="+", default=list(PERCENTILES))
    parser.add_argument("--mad-k", type=float, default=MAD_K)
    parser.add_argument("--oracle-loss", type=float, default=ORACLE_LOSS, help="the oracle's clean pairs lost")
    parser.add_argument("--bleu-steps", type=int, default=0, help="train on the best rule's and the oracle's pairs")
    parser.add_argument("--out", type=Path, help="the trainings' directories (with --bleu-steps)")
    parser.add_argument("--jobs", type=int, default=1, help="trainings at once (with --bleu-steps; default 1)")
    parser.add_argument("--record", help="write the measurement as a record, e.g. docs/results/noisy-rules.json")
    args = parser.parse_args(argv)
    if not all(0 < s < 1 for s in args.shares) or not all(0 < q < 100 for q in args.percentiles):
        parser.error("--shares are between 0 and 1, --percentiles between 0 and 100")
    if args.bleu_steps and not args.out:
        parser.error("--bleu-steps needs --out DIR")
    return args


def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every rule's row, and what they were computed from."""
    src, tgt, kinds, table = rule_kept(args.noisy, args.max_char_ratio)
    dual = dual_scorer(*args.dual_xent)
    print(f"scoring the {len(src):,} pairs the rules keep", file=sys.stderr, flush=True)
    scores = dual(src, tgt)
    dev_src, dev_tgt = (read_lines(args.data / f"val.{lang}.gz") for lang in ("en", "de"))
    dev = dual(dev_src, dev_tgt)
    clean = [k == "clean" for k in kinds]
    lost = table["clean"]["pairs"] - table["clean"]["kept"]
    oracle = oracle_threshold(scores, clean, lost, table["clean"]["pairs"], args.oracle_loss)
    made = [*rules(scores, dev, args), ("oracle", f"oracle: largest share, clean lost < {args.oracle_loss:.0%} "
                                                  "(the labels)", oracle)]  # fmt: skip
    rows = [{"name": name, "kind": name if name == "oracle" else "label-free", "rule": what,
             **evaluate(t, scores, kinds, table)} for name, what, t in made]  # fmt: skip
    none = {
        "name": "rules-only",
        "kind": "none",
        "rule": "the rules only (no drop)",
        **evaluate(np.inf, scores, kinds, table),
    }
    rows.insert(0, {**none, "threshold": None})  # the cleaned system: what every rule starts from
    facts = {
        "models": [trained(path) for path in args.dual_xent],
        "rule_kept": len(src),
        "dev_pairs": len(dev),
        "dev_words": sum(len(line.split()) for line in dev_tgt),
        "scores": summary(scores, clean),
        "dev_scores": summary(dev, [True] * len(dev)),
    }
    return rows, facts


def summary(scores: Sequence[float], clean: Sequence[bool]) -> dict[str, float]:
    """Percentiles of the scores (all, and the clean pairs' alone): what a threshold is read against."""
    s, c = np.asarray(scores, dtype=float), np.asarray(clean, dtype=bool)
    out = {f"p{q:g}": float(np.percentile(s, q)) for q in (50, 90, 95, 99)}
    out.update(clean_p50=float(np.percentile(s[c], 50)), clean_p99=float(np.percentile(s[c], 99)))
    return out


def write(record: Record, args: argparse.Namespace, rows: list[dict[str, Any]], facts: dict[str, Any]) -> None:
    """The record (args.record, if given), its rows rendered by `table`."""
    best = best_label_free(rows, args.oracle_loss)
    for row in rows:
        row["best"] = row["name"] == best
    if not args.record:
        return
    settings = {k: v for k, v in vars(args).items() if k not in ("record", "out")}
    settings.update(noisy=portable(str(args.noisy)), data=portable(str(args.data)),
                    dual_xent=[portable(str(p)) for p in args.dual_xent])  # fmt: skip
    if args.bleu_steps:
        settings.update(train=TRAIN, search=SEARCH)
    results = {r["name"]: {k: v for k, v in r.items() if k not in ("name", "by_kind", "rule")} for r in rows}
    kept = record.data(settings, rows, {"best_label_free": best, "oracle_loss": args.oracle_loss, **facts, **results})
    light = [{k: v for k, v in r.items() if k != "by_kind"} for r in rows]  # the passes keep each kind's counts
    kept.update(renderer="recipes/multi30k-noisy/rules.py::table", rows=light, sentences=facts["dev_pairs"],
                words=facts["dev_words"])  # fmt: skip
    record.write_data(args.record, kept)


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """Each rule: its threshold, the share of the rule-kept pairs it drops, the noise removed (all, and misaligned),
    the clean pairs lost (the rules' and its own, of the noisy set's clean pairs); the best label-free rule in bold,
    the oracle last. With BLEU where the record has it (docs/gen_figures.py renders the record with this)."""
    bleu = any("test_bleu" in r for r in rows)
    head = "| rule | threshold | share dropped | misaligned removed | noise removed | clean lost |"
    lines = [
        head + (" dev / test sacreBLEU |" if bleu else ""),
        "|---|---:|---:|---:|---:|---:|" + ("---:|" if bleu else ""),
    ]
    for r in sorted(rows, key=lambda r: ("none", "label-free", "oracle").index(r["kind"])):
        name = f"**{r['rule']}**" if r.get("best") else r["rule"]
        t = "-" if r["kind"] == "none" else f"{r['threshold']:.3f}"
        cells = f"| {name} | {t} | {r['share']:.2%} | {r['misaligned_removed']:.1%} | {r['noise_removed']:.1%} | "
        cells += f"{r['clean_lost']:.3%} |"  # three decimals: the oracle's is just under its limit
        if bleu:
            cells += f" {r['dev_bleu']:.2f} / {r['test_bleu']:.2f} |" if "test_bleu" in r else " - |"
        lines.append(cells)
    lines.append(f"\n(held-out: the dual cross-entropy of Multi30k's val, {sentences:,} pairs, {words:,} German words)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    record = Record(None if argv is None else [str(Path(__file__)), *argv])
    rows, facts = measure(args)
    write(record, args, rows, facts)
    for r in rows:
        print(
            f"{r['name']}: threshold {r['threshold'] or 0:.3f}, drops {r['share']:.2%}, misaligned removed "
            f"{r['misaligned_removed']:.1%}, noise removed {r['noise_removed']:.1%}, clean lost {r['clean_lost']:.2%}"
        )
    if not args.bleu_steps:
        return
    best = next(r for r in rows if r.get("best"))
    oracle = next(r for r in rows if r["name"] == "oracle")
    with ThreadPoolExecutor(args.jobs) as pool:  # each training is an mtkit process of its own
        trainings = {pool.submit(train_on, r["threshold"], args, args.out / r["name"]): r for r in (best, oracle)}
        for done in as_completed(trainings):
            row = trainings[done]
            row.update(done.result())
            write(record, args, rows, facts)
            print(f"{row['name']}: {row['pairs']:,} pairs, dev {row['dev_bleu']:.2f}, test {row['test_bleu']:.2f}")
    # the forward model is the rules-only system (run.sh's cleaned, trained alike): scored on the same splits
    rows[0].update(pairs=facts["rule_kept"], **bleu(Path(args.dual_xent[0]), args.out / best["name"] / "data",
                                                     args.out / "rules-only"))  # fmt: skip
    write(record, args, rows, facts)
    print(f"rules-only: dev {rows[0]['dev_bleu']:.2f}, test {rows[0]['test_bleu']:.2f}")


if __name__ == "__main__":
    main()
