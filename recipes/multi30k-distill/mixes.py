"""The distillation recipe's mix chosen on dev: a student trained on each mix of the teacher's translations and the
references (run.sh --mix), every one for the same number of updates with several seeds, scored on Multi30k's
validation set (val), never on test.

    python recipes/multi30k-distill/mixes.py --teacher T.pt --data DIR --steps 3300 --dry-run   # the commands only
    python recipes/multi30k-distill/mixes.py --teacher T.pt --data DIR --steps 3300 --seeds 1 2 3 \\
        --record docs/results/distill-mixes.json

The mixes: `1best`, the teacher's best translation of each training source (29,000 pairs on Multi30k);
`1best+refs`, those and the references after them (58,000); `2best+refs`, its two best translations of each source
and the references (87,000).

The teacher decodes once: `mtkit distill --nbest 2 --mix-references` with run.sh's search (beam 4, GNMT alpha 1.4,
exact stop) makes the 2best+refs data directory, as `run.sh --mix 2best+refs` makes it, and the two smaller mixes
are cut from it: the first of each source's two translations, with the references after them or not, encoded with
the same vocabulary. That first translation is what `--nbest 1` gives: the search keeps the same beam whatever the
number of outputs asked for, and with the exact stop it runs until no live hypothesis can beat the n-th finished
one, so none found later can beat the best. A distillation that left an empty translation out (its pairs are then
not two a source) cannot be cut so: the 1-best is then distilled again, with `--nbest 1`.

Each student is run.sh's: `mtkit train` with its flags (`--preset`, 2,048-token batches, 400 warmup updates, the
cooldown, checkpoints every N/25 updates, the last 5 kept) for `--steps` updates, `mtkit average --last 5`, then
greedy `mtkit translate` (beam 1, the student's own default; no shortlist, fp32) of val and `mtkit score` against
its references. A mix's dev sacreBLEU is the mean over the seeds, with its spread; the best mean is the choice. The
record (bench/harness.py) keeps every run's score and is written after every run, so a sweep stopped early keeps
what it measured. Nothing else should run meanwhile only for the minutes it takes: the scores do not depend on the
machine's speed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import Record, portable, run_mtkit  # noqa: E402  # the benches' record writer

MIXES = ("1best", "1best+refs", "2best+refs")  # run.sh --mix
# run.sh's distillation search and its student's training flags (step distill and step train), its budget aside
SEARCH = ["--beam", "4", "--alpha", "1.4", "--early-stop", "exact"]
BATCH_TOKENS = 2048
TRAIN = ["--max-tokens", str(BATCH_TOKENS), "--warmup", "400", "--lr-scale", "0.64", "--lr-cooldown", "0.2",
         "--keep-last", "5", "--valid-every", "200", "--valid-bleu", "500", "--log-every", "50"]  # fmt: skip
LAST = 5  # run.sh's `mtkit average --last 5`

DRY_RUN = False


def mtkit(*args: str) -> str:
    """`mtkit ARGS` from this checkout, its output returned (with --dry-run: printed, not run)."""
    return run_mtkit(args, DRY_RUN)


def budget(steps: int) -> list[str]:
    """run.sh --steps N's options (../lib.sh training_budget): N updates, a checkpoint every N/25."""
    return ["--max-minutes", "0", "--max-steps", str(steps), "--save-every-minutes", "0",
            "--save-every-steps", str((steps + 24) // 25)]  # fmt: skip


def languages(data: Path) -> tuple[str, str]:
    """DATA's source and target languages, from its prepare.json (en, de where it does not say: a dry run)."""
    try:
        prepared = json.loads((data / "prepare.json").read_text(encoding="utf-8"))
        return str(prepared["src_lang"]), str(prepared["tgt_lang"])
    except (OSError, ValueError, KeyError):
        return "en", "de"


def cut(full: Path, data: Path, out: Path, every: int, references: bool) -> int:
    """`out`: a data directory of the first of each source's `every` translations in `full` (a data directory
    `mtkit distill` made), DATA's own pairs after them if `references`, as `mtkit distill --nbest 1 [--mix-references]`
    writes it: the same valid and test splits, the same vocabulary and ids, its prepare.json saying so. Returns its
    training pairs. Made again whole each time (it takes seconds)."""
    from mtkit.data.bpe import BpeOptions, build
    from mtkit.data.dataset import open_data

    src, tgt = languages(full)
    record = json.loads((full / "distill.json").read_text(encoding="utf-8"))
    distilled = record["pairs"]["distilled"]
    shutil.rmtree(out, ignore_errors=True)
    (out / "raw").mkdir(parents=True)
    for side in (src, tgt):
        with open(full / "raw" / f"train.{side}", "rb") as f, open(out / "raw" / f"train.{side}", "wb") as g:
            g.writelines(itertools.islice(f, 0, distilled, every))  # the teacher's pairs come first, by source
            if references:  # then DATA's, as --mix-references appends them
                with open(data / "raw" / f"train.{side}", "rb") as original:
                    shutil.copyfileobj(original, g)
    for split in (p for p in sorted((full / "raw").iterdir()) if not p.name.startswith("train.")):
        shutil.copyfile(split, out / "raw" / split.name)
    lines = record["settings"]["source"]["lines"]
    settings = {**record["settings"], "mix_references": references}
    settings["decode"] = {**settings["decode"], "nbest": 1}
    empty = record["pairs"]["empty_left_out"] if every == 1 else 0
    pairs = {"distilled": distilled // every, "empty_left_out": empty, "references": lines if references else 0}
    prepared = json.loads((full / "prepare.json").read_text(encoding="utf-8"))
    prepared["distilled"] = {**prepared["distilled"], "settings": settings, "pairs": pairs, "cut_from": str(full)}
    prepared["files"] = {f"raw/{p.name}": {"bytes": p.stat().st_size} for p in sorted((out / "raw").iterdir())}
    (out / "prepare.json").write_text(json.dumps(prepared, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    vocabulary = open_data(full)
    build(out, BpeOptions(tokenizer=vocabulary.tokenizer(), tokenizer_from=str(vocabulary.spm_path)))
    return distilled // every + pairs["references"]


def cuttable(full: Path) -> bool:
    """Whether `full`'s teacher pairs are two a source (no empty translation left out), so the first of each two
    is the source's best."""
    record = json.loads((full / "distill.json").read_text(encoding="utf-8"))
    return bool(record["pairs"]["distilled"] == 2 * record["settings"]["source"]["lines"])


def distil(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, Path], dict[str, int]]:
    """Each mix's data directory and training pairs: the 2best+refs distillation, and the smaller mixes cut from it
    (or from a 1-best distillation, where its pairs are not two a source)."""
    data = Path(args.data)
    teachers = [option for teacher in args.teacher for option in ("-m", teacher)]
    full = tmp / "data-2best+refs"
    mtkit("distill", str(data), *teachers, "--out", str(full), *SEARCH, "--nbest", "2", "--mix-references")
    dirs, pairs = {"2best+refs": full}, {}
    smaller = [mix for mix in args.mixes if mix != "2best+refs"]
    if DRY_RUN:
        for mix in smaller:
            print(f"# {mix}: cut from {shlex.quote(str(full))} (the first of each source's two translations"
                  f"{', then the references' if mix.endswith('+refs') else ''})")  # fmt: skip
        return {mix: tmp / f"data-{mix}" for mix in args.mixes} | dirs, {}
    pairs["2best+refs"] = json.loads((full / "distill.json").read_text(encoding="utf-8"))["pairs"]
    pairs["2best+refs"] = pairs["2best+refs"]["distilled"] + pairs["2best+refs"]["references"]
    source, every = full, 2
    if smaller and not cuttable(full):  # an empty translation was left out: the best of each source, decoded again
        print(f"{full}: not two translations a source; distilling the 1-best with --nbest 1", file=sys.stderr)
        source, every = tmp / "data-1best", 1
        mtkit("distill", str(data), *teachers, "--out", str(source), *SEARCH, "--nbest", "1")
    for mix in smaller:
        dirs[mix] = tmp / f"data-{mix}"
        pairs[mix] = cut(source, data, dirs[mix], every, mix.endswith("+refs"))
    return dirs, pairs


def dev_bleu(data: Path, run: Path) -> float:
    """The student's sacreBLEU on val: its last 5 checkpoints averaged (as run.sh deploys it), greedy, fp32."""
    src, tgt = languages(data)
    model, hyp = run / "averaged.pt", run / f"valid.hyp.{tgt}"
    mtkit("average", str(run), "--last", str(LAST), "--output", str(model))
    mtkit("translate", "--model", str(model), "--input", str(data / "raw" / f"valid.{src}"), "--output", str(hyp),
          "--beam", "1")  # fmt: skip
    said = mtkit("score", str(hyp), "--ref", str(data / "raw" / f"valid.{tgt}"), "--lang", tgt, "--json")
    return float(json.loads(said)["scores"][0]["score"]) if said else math.nan


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", action="append", required=True, help="the teacher (repeat for an ensemble)")
    parser.add_argument("--data", required=True, help="the teacher's data directory (mtkit prepare + bpe)")
    parser.add_argument("--mixes", nargs="+", choices=MIXES, default=list(MIXES))
    amount = parser.add_mutually_exclusive_group(required=True)
    amount.add_argument("--steps", type=int, help="updates of every student (run.sh --steps)")
    amount.add_argument("--tokens", type=int, help=f"training tokens of every student: N / {BATCH_TOKENS} updates")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--preset", choices=["student-fast", "student-tiny"], default="student-fast")
    parser.add_argument("--out", help="keep the data directories and runs here (default: a temporary directory)")
    parser.add_argument("--record", help="also write the sweep as a record here, e.g. docs/results/NAME.json")
    parser.add_argument("--dry-run", action="store_true", help="print every mtkit command, one a line; run none")
    args = parser.parse_args(argv)
    if (args.steps or round((args.tokens or 0) / BATCH_TOKENS)) < 1:
        parser.error("--steps (or --tokens / 2048) must be at least 1")
    return args


def main() -> None:
    global DRY_RUN
    args = parse_args()
    DRY_RUN = args.dry_run
    record = Record()
    steps = args.steps or round(args.tokens / BATCH_TOKENS)
    with tempfile.TemporaryDirectory(prefix="distill-mixes-") as name:
        tmp = Path(args.out or name)
        dirs, pairs = distil(args, tmp)
        runs: list[dict[str, Any]] = []
        # Seed by seed, every mix once a seed: a sweep stopped early has every mix with as many seeds.
        for seed, mix in itertools.product(args.seeds, args.mixes):
            run = tmp / "runs" / f"{mix}-seed{seed}"
            mtkit("train", str(dirs[mix]), "--out", str(run), "--preset", args.preset, *TRAIN, *budget(steps),
                  "--seed", str(seed))  # fmt: skip
            bleu = dev_bleu(dirs[mix], run)
            runs.append({"mix": mix, "seed": seed, "steps": steps, "pairs": pairs.get(mix), "dev_bleu": bleu})
            if not DRY_RUN:
                for kept in run.glob("checkpoint*.pt"):  # 5 x the student and its optimizer: averaged.pt stays
                    kept.unlink()
                print(f"{mix}, seed {seed}: dev {bleu:.2f}", flush=True)
                results = write(record, args, runs, dirs[mix])  # kept after every run
        if not DRY_RUN:
            print(json.dumps(results))


def write(record: Record, args: argparse.Namespace, runs: list[dict[str, Any]], data: Path) -> dict[str, Any]:
    """The sweep so far as a record (args.record, if given) with its table's rows (`table`); returns the summary."""
    scores: dict[str, list[float]] = {}
    for run in runs:
        scores.setdefault(run["mix"], []).append(run["dev_bleu"])
    summary = {m: {"mean": statistics.fmean(v), "spread": max(v) - min(v), "seeds": len(v)} for m, v in scores.items()}
    best = max(summary, key=lambda m: summary[m]["mean"])
    print(f"best on dev so far: {best} ({summary[best]['mean']:.2f}, spread {summary[best]['spread']:.2f})")
    results = {"by_mix": summary, "best": best, "runs": f"{len(runs)} of {len(args.seeds) * len(args.mixes)}"}
    if args.record:
        pairs = {run["mix"]: run["pairs"] for run in runs}
        rows = [{"name": m, "pairs": pairs[m], "dev_bleu": scores[m], **summary[m], "best": m == best} for m in scores]
        references = (data / "raw" / f"valid.{languages(data)[1]}").read_text(encoding="utf-8").splitlines()
        settings = {k: v for k, v in vars(args).items() if k not in ("record", "dry_run", "out")}
        settings.update(teacher=[portable(t) for t in args.teacher], data=portable(args.data))  # as the command
        kept = record.data({**settings, "search": SEARCH, "train": TRAIN, "average_last": LAST}, runs, results)
        kept.update(renderer="recipes/multi30k-distill/mixes.py::table", rows=rows, sentences=len(references),
                    words=sum(len(line.split()) for line in references))  # fmt: skip
        record.write_data(args.record, kept)
    return results


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The mixes by mean dev sacreBLEU, the best first and in bold (docs/gen_figures.py renders the record with it)."""
    lines = [f"| mix | training pairs | dev sacreBLEU by seed (val: {sentences:,} sentences, {words:,} reference "
             "words) | mean | spread |", "|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(rows, key=lambda r: -r["mean"]):
        name = f"**{r['name']}**" if r["best"] else r["name"]
        seeds = ", ".join(f"{b:.2f}" for b in r["dev_bleu"])
        lines.append(f"| {name} | {r['pairs']:,} | {seeds} | {r['mean']:.2f} | {r['spread']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
