"""fairseq 0.12 against mtkit on Multi30k En-De, like for like: both trained for the same minutes on the same machine
(`bash bench/peers/multi30k_budget.sh MINUTES SEED`, then the Multi30k recipe with the same budget and seed), each
system's last checkpoint, the same search (beam 4, score / |Y|^alpha: fairseq's --lenpen, mtkit's `--lenpen fairseq`;
longest output source + 50; the stop once `beam` hypotheses have finished), alpha chosen on the validation set for
each system separately, then test_2016_flickr translated once per system; and beside it each system at its own
default search (fairseq: lenpen 1, longest output 200 tokens; mtkit: beam 4, GNMT alpha 0.6, source + 50).

    bash bench/peers/multi30k_budget.sh 25 1                       # fairseq, 25 minutes (bench/peers/README.md)
    python recipes/multi30k-en-de/seeds.py --seeds 1 --out OUT     # mtkit, the recipe's 25 minutes, seed 1
    python bench/fairseq_same_search.py --mtkit-run OUT/seed-1/run --minutes 25 --seed 1 --record docs/results/NAME.json

Both outputs are detokenized text (fairseq-interactive's with `--bpe sentencepiece`, mtkit's own) scored by
sacreBLEU against the same references, the copy of Multi30k that ships with mtkit, which bench/peers/prep_multi30k.sh
gave fairseq. The record keeps every dev score (its passes), each system's updates and minutes of training from its
own log, and the table (docs/tables.py::fairseq_same_search).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import Record  # bench/ is a script's sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "mtkit" / "data" / "multi30k"
DEFAULTS = {"fairseq 0.12": "beam 4, lenpen 1, max-len-b 200", "mtkit": "beam 4, GNMT alpha 0.6, source + 50"}
SPLITS = {"valid": "val", "test": "test_2016_flickr"}  # fairseq's subset names -> the corpus's file names


def lines(split: str, lang: str, limit: int | None = None) -> list[str]:
    with gzip.open(DATA / f"{SPLITS[split]}.{lang}.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:limit]


def write_source(args: argparse.Namespace, split: str, out: Path) -> tuple[Path, int]:
    """`split`'s English lines (its first --limit) written beside `out` as OUT.en, and how many there are."""
    text = lines(split, "en", args.limit)
    source = out.with_suffix(".en")
    source.write_text("\n".join(text) + "\n", encoding="utf-8")
    return source, len(text)


def fairseq(args: argparse.Namespace, split: str, alpha: float | None, out: Path) -> list[str]:
    """fairseq-interactive's detokenized translations of `split` (its D- lines, in the input's order); alpha None:
    its default search. fairseq-interactive reads the raw text and applies the SentencePiece model itself, as a user
    translating text does; fairseq-generate over the binarized split left 6 of val's 1,014 lines (the longest
    sources) out without a word."""
    source, count = write_source(args, split, out)
    search = [] if alpha is None else ["--lenpen", str(alpha), "--max-len-a", "1", "--max-len-b", "50"]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads),
           # fairseq 0.12 pickles its options into its checkpoints, which torch.load refuses by default since
           # PyTorch 2.6; the checkpoint read here is the one multi30k_budget.sh trained on this machine.
           "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # fmt: skip
    work = Path(args.peers) / "multi30k"
    cmd = [str(Path(args.peers) / "venv" / "bin" / "fairseq-interactive"), str(work / "bin"), "--path",
           str(fairseq_run(args) / "checkpoint_last.pt"), "--source-lang", "en", "--target-lang", "de", "--bpe",
           "sentencepiece", "--sentencepiece-model", str(work / "spm.model"), "--input", str(source), "--beam", "4",
           *search, "--buffer-size", "1024", "--batch-size", "64", "--cpu"]  # fmt: skip
    log = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    out.write_text(log, encoding="utf-8")
    found = {int(m[1]): m[2] for m in re.finditer(r"^D-(\d+)\t[^\t]*\t(.*)$", log, re.M)}
    return [found[i] for i in range(count)]


def mtkit(args: argparse.Namespace, split: str, alpha: float | None, out: Path) -> list[str]:
    """`mtkit translate` of `split` with the mtkit run's last checkpoint; alpha None: mtkit's default search."""
    source, _ = write_source(args, split, out)
    search = [] if alpha is None else ["--alpha", str(alpha), "--lenpen", "fairseq"]
    subprocess.run([sys.executable, "-m", "mtkit", "translate", "--model", str(Path(args.mtkit_run) /
                    "checkpoint_last.pt"), "--input", str(source), "--output", str(out), "--beam", "4",
                    "--threads", str(args.threads), *search], check=True)  # fmt: skip
    return out.read_text(encoding="utf-8").splitlines()


def scores(hyps: list[str], refs: list[str]) -> dict[str, Any]:
    import sacrebleu

    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_signature": str(bleu.get_signature())}


def fairseq_run(args: argparse.Namespace) -> Path:
    return Path(args.fairseq_run or Path(args.peers) / "results" / f"multi30k_budget_seed{args.seed}")


def fairseq_training(run: Path) -> dict[str, Any]:
    """fairseq's updates and minutes of training, from the last statistics multi30k_budget.sh's train.log holds (a
    progress line's `num_updates=N ... wall=S`, or the summary `num_updates N ... wall S` it prints on stopping)."""
    text = (run / "train.log").read_text(encoding="utf-8", errors="replace")
    updates = re.findall(r"\bnum_updates[= ](\d+)", text)
    wall = re.findall(r"\bwall[= ](\d+)", text)
    return {"updates": int(updates[-1]), "minutes": round(int(wall[-1]) / 60, 1), "precision": "fp32"}


def mtkit_training(run: Path) -> dict[str, Any]:
    """mtkit's updates, minutes and precision, from the run's metrics.jsonl (its `start` and `done` events)."""
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    done = [e for e in events if e["event"] == "done"][-1]
    start = [e for e in events if e["event"] == "start"][-1]
    return {"updates": done["step"], "minutes": round(done["hours"] * 60, 1), "precision": start.get("precision")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mtkit-run", required=True, help="the recipe's run directory (OUT/run), trained alike")
    parser.add_argument("--fairseq-run", help="multi30k_budget.sh's run (default PEERS/results/multi30k_budget_seedN)")
    parser.add_argument("--peers", default=os.environ.get("PEERS", "/tmp/peers"), help="bench/peers/setup.sh's PEERS")
    parser.add_argument("--minutes", type=float, default=25, help="the training budget both runs had")
    parser.add_argument("--seed", type=int, default=1, help="the seed both runs had")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.6, 1.0, 1.4], help="searched on dev")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, help="only the first N lines of each split (a check, not a figure)")
    parser.add_argument("--record", help="also write the comparison as a record here, e.g. docs/results/NAME.json")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    record = Record()
    systems = {"fairseq 0.12": fairseq, "mtkit": mtkit}
    trained = {"fairseq 0.12": fairseq_training(fairseq_run(args)), "mtkit": mtkit_training(Path(args.mtkit_run))}
    dev_refs, test_refs = lines("valid", "de", args.limit), lines("test", "de", args.limit)
    passes: dict[str, dict[str, Any]] = {name: {} for name in systems}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for alpha in args.alphas:
            for name, translate in systems.items():
                hyps = translate(args, "valid", alpha, Path(tmp) / f"{name.split()[0]}.valid.{alpha}")
                passes[name][str(alpha)] = scores(hyps, dev_refs)
                print(f"dev: {name}, alpha {alpha}: {passes[name][str(alpha)]['bleu']:.2f}", file=sys.stderr)
        for name, translate in systems.items():
            best = max(args.alphas, key=lambda a: passes[name][str(a)]["bleu"])
            searches = ((best, f"beam 4, score / length^{best} (dev-best)"), (None, f"{DEFAULTS[name]} (its default)"))
            for alpha, search in searches:
                hyps = translate(args, "test", alpha, Path(tmp) / f"{name.split()[0]}.test.{alpha}")
                test = scores(hyps, test_refs)
                dev = passes[name][str(best)]["bleu"] if alpha is not None else None
                row = {"name": f"{name}, {search}", "system": name, "search": search, "alpha": alpha, "dev_bleu": dev}
                rows.append({**row, **test, **trained[name]})
                print(f"test: {rows[-1]['name']}: {test['bleu']:.2f}", file=sys.stderr)
    settings = {"limit": args.limit, "minutes": args.minutes, "seed": args.seed, "alphas": args.alphas, "beam": 4,
                "threads": args.threads, "checkpoint": "last", "defaults": DEFAULTS}  # fmt: skip
    results = {row["name"]: row["bleu"] for row in rows}
    words = sum(len(line.split()) for line in test_refs)
    if args.record:
        data = record.data(settings, passes, results)
        record.write_data(args.record, {**data, "renderer": "docs/tables.py::fairseq_same_search", "rows": rows,
                                        "sentences": len(test_refs), "words": words})  # fmt: skip
    spec = importlib.util.spec_from_file_location("tables", ROOT / "docs" / "tables.py")  # the page's renderer
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    print(tables.fairseq_same_search(rows, len(test_refs), words))


if __name__ == "__main__":
    main()
