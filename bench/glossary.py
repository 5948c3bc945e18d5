"""A glossary enforced in decoding, measured over the public API: how many term occurrences come out, what it does
to the rest of the translation, what it costs, and that sentences without a term are untouched.

    python bench/glossary.py --model runs/small/averaged.pt --beam 4 --name small
    python bench/glossary.py --model runs/student/model.pt --precision int8 --beam 4 --name student
    python docs/gen_figures.py                                                       # the page's table

The glossary (GLOSSARY below) is made for the measurement: English terms of Multi30k's test sentences, single and
multi-word, whose German sides are synonyms or rare words a Multi30k model does not choose on its own (the record
says how many of the occurrences its plain output already holds), several of them long and cut into several
pieces. Together they occur in well over 200 sentences of test_2016_flickr (the record counts each term's).

For each model: every line translated without and with the glossary; a term occurrence counts as produced when
the translation holds the target term exactly as written, as a whole word (as many times as its source side
occurs); chrF and BLEU
of both outputs against the references on the sentences with a term; the share of sentences without a term whose
translation is unchanged; and sentences/s of the sentences with a term, with and without the glossary, in paired
rounds on `--speed-lines` of them (the two alternate, so a shared machine's drift hits both). The record goes to
docs/results/glossary-NAME.json
(command, commit, date, machine, settings, every round) and `table` renders it.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

import mtkit

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "mtkit" / "data" / "multi30k"  # the Multi30k files that ship inside mtkit
SETS = ("test_2016_flickr",)

# source term -> target term: what the model would say is in the comment.
GLOSSARY = {
    "man": "Herr",  # Mann
    "woman": "Dame",  # Frau
    "people": "Leute",  # Menschen
    "dog": "Vierbeiner",  # Hund
    "street": "Fahrbahn",  # Straße
    "shirt": "Oberbekleidungsstück",  # Hemd
    "wearing": "bekleidet mit",  # trägt, in
    "a group of": "eine Schar von",  # eine Gruppe von
    "in front of": "gegenüber von",  # vor
}


def read(name: str, lang: str) -> list[str]:
    with gzip.open(CORPUS / f"{name}.{lang}.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def machine() -> dict[str, Any]:
    """CPU model and the flags that matter to mtkit's kernels, cores, and the load when the run started."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").is_file() else ""
    model = re.search(r"model name\s*:\s*(.*)", info)
    flags = re.search(r"flags\s*:\s*(.*)", info)
    have = set(flags.group(1).split()) if flags else set()
    wanted = ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8"]
    return {
        "cpu": model.group(1).strip() if model else platform.processor(),
        "flags": [f for f in wanted if f in have],
        "cores": os.cpu_count(),
        "load_at_start": os.getloadavg()[0],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mtkit": mtkit.__version__,
    }


def produced(outputs: list[str], wanted: list[list[str]]) -> tuple[int, int]:
    """(term occurrences produced, term occurrences asked for): a target term asked n times counts at most n, each
    a whole word (a term followed by more letters is another word)."""
    hit = total = 0
    for out, targets in zip(outputs, wanted):
        for target in set(targets):
            n = targets.count(target)
            found = len(re.findall(rf"(?<!\w){re.escape(target)}(?!\w)", out))
            hit, total = hit + min(n, found), total + n
    return hit, total


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import sacrebleu

    sources = [line for name in SETS for line in read(name, "en")]
    references = [line for name in SETS for line in read(name, "de")]
    glossary = mtkit.Glossary.of(GLOSSARY)
    wanted = [glossary.targets(line) for line in sources]
    held = [i for i, w in enumerate(wanted) if w]
    free = [i for i, w in enumerate(wanted) if not w]
    per_term = {s: sum(1 for line in sources if GLOSSARY[s] in glossary.targets(line)) for s in GLOSSARY}
    translator = mtkit.load_translator(args.model, device="cpu", precision=args.precision)
    changes = {"beam": args.beam} if args.beam else {}
    plain = translator.translate(sources, **changes)
    constrained = translator.translate(sources, glossary=glossary, **changes)
    hit, total = produced([constrained[i] for i in held], [wanted[i] for i in held])
    already, _ = produced([plain[i] for i in held], [wanted[i] for i in held])
    refs = [[references[i] for i in held]]
    scores = {
        name: {
            "chrf": sacrebleu.corpus_chrf([out[i] for i in held], refs).score,
            "bleu": sacrebleu.corpus_bleu([out[i] for i in held], refs).score,
        }
        for name, out in (("plain", plain), ("glossary", constrained))
    }
    unchanged = sum(plain[i] == constrained[i] for i in free)
    # Speed: the sentences with a term, paired rounds, the order alternating.
    lines = [sources[i] for i in held[: args.speed_lines]]
    rounds = []
    for r in range(args.rounds):
        order = ("plain", "glossary") if r % 2 == 0 else ("glossary", "plain")
        times = {}
        for side in order:
            start = time.perf_counter()
            translator.translate(lines, glossary=glossary if side == "glossary" else None, **changes)
            times[side] = time.perf_counter() - start
        rounds.append(times)
        plain_speed, glossary_speed = len(lines) / times["plain"], len(lines) / times["glossary"]
        print(f"round {r + 1}: {plain_speed:.1f} sentences/s plain, {glossary_speed:.1f} with it", file=sys.stderr)
    ratios = [t["plain"] / t["glossary"] for t in rounds]
    translator.close()
    return {
        "model": args.name,
        "decode": f"{args.precision}, " + (f"beam {args.beam}" if args.beam else "the model's own defaults"),
        "sentences": len(sources),
        "sentences_with_terms": len(held),
        "term_sentences": per_term,
        "occurrences": total,
        "produced": hit,
        "produced_share": hit / total,
        "plain_already_held": already,
        "unchanged_without_terms": unchanged,
        "sentences_without_terms": len(free),
        "scores": scores,
        "speed_rounds_s": rounds,
        "speed_ratio": statistics.median(ratios),
        "speed_ratio_range": [min(ratios), max(ratios)],
        "sentences_per_s": {
            side: len(lines) / statistics.median(t[side] for t in rounds) for side in ("plain", "glossary")
        },
    }


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
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


def command(argv: list[str]) -> str:
    """The command as run, the model named by its file name and the output folder left out (where they lie on
    the measuring machine says nothing to a reader)."""
    words, skip = [], False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        else:
            words.append(Path(word).name if i and argv[i - 1] == "--model" else word)
    return " ".join(["python bench/glossary.py", *words])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="what mtkit.load_translator opens")
    parser.add_argument("--name", required=True, help="the row's model name, and the record's: glossary-NAME.json")
    parser.add_argument("--beam", type=int, default=0, help="0: the model's own default")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--speed-lines", type=int, default=200, help="sentences with a term timed in each round")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results"))
    args = parser.parse_args()
    started = machine()
    row = measure(args)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    record = {
        "renderer": "bench/glossary.py",
        "what": f"a glossary of {len(GLOSSARY)} terms enforced on Multi30k's {' and '.join(SETS)} sets",
        "command": command(sys.argv[1:]),
        "commit": commit,
        "date": datetime.date.today().isoformat(),
        "machine": started,
        "threads": torch.get_num_threads(),
        "settings": {
            "beam": args.beam or "the model's own",
            "precision": args.precision,
            "rounds": args.rounds,
            "speed_lines": args.speed_lines,
            "sets": list(SETS),
        },
        "glossary": GLOSSARY,
        "sentences": row["sentences"],
        "words": 0,
        "rows": [row],
    }
    out = Path(args.out) / f"glossary-{args.name}.json"
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table([row], row["sentences"], 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
