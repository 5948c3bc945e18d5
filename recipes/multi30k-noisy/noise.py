"""Multi30k-noisy: the Multi30k En-De training set with about 30% web-like noise, and what `mtkit clean` removes.

    python recipes/multi30k-noisy/noise.py build --out noisy          # noisy/train.{en,de,kind}, from the shipped copy
    python recipes/multi30k-noisy/noise.py report noisy --all --max-char-ratio 3      # each rule against each noise

`build` is deterministic (--seed): of the 29,000 pairs, 7% have their targets shuffled among themselves
(misaligned), 4% get the French and 4% the Czech caption as target (Multi30k's own translations of the same
image: the wrong language, well formed), 4% the source copied as target, 4% the target cut to its first third,
4% an HTML fragment on one or both sides; then 2% exact and 2% near duplicates (case and punctuation changed)
of other pairs are added after them. noisy/train.kind names each line's noise ("clean" for none). It reads the
Multi30k that ships with mtkit (mtkit/data/multi30k: train.{en,de,fr,cs}.gz), or --data DIR laid out alike.

`report` runs mtkit's cleaning rules (the options of `mtkit clean`) over noisy/train.{en,de}, pair by pair
in order, and prints a table: for each kind of noise, how many pairs each rule dropped and how many were kept;
the clean pairs lost are the row "clean". The last line is one JSON object. No training is needed for it;
recipes/multi30k-noisy/run.sh trains on the clean, the noisy and the cleaned data to measure BLEU.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "mtkit" / "data" / "multi30k"  # Multi30k's files, every language of it, as mtkit ships them
sys.path.insert(0, str(ROOT))

from mtkit.data.runner import first_drops  # noqa: E402
from mtkit.data.webclean import WebCleanConfig  # noqa: E402

RATES = {"misaligned": 0.07, "french": 0.04, "czech": 0.04, "copy": 0.04, "truncated": 0.04, "html": 0.04}
ADDED = {"duplicate": 0.02, "near_duplicate": 0.02}
KINDS = ("clean", *RATES, *ADDED)
HTML = (
    lambda s, t, r: (f"<p>{s}</p>", f"<p>{t}</p>"),
    lambda s, t, r: (s, f'{t} <a href="/de/index.html">Weiterlesen</a>'),
    lambda s, t, r: (f"{s}&nbsp;|&nbsp;Home", f"{t}&nbsp;|&nbsp;Startseite"),
    lambda s, t, r: (f"<div class=\"caption\">{s}", f"<div class=\"caption\">{t}"),
)


def _read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def build(data: Path, out: Path, seed: int = 1) -> dict[str, int]:
    """Write out/train.{en,de,kind}; returns the pairs of each kind."""
    en, de, fr, cs = (_read(data / f"train.{lang}.gz") for lang in ("en", "de", "fr", "cs"))
    rng = random.Random(seed)
    order = list(range(len(en)))
    rng.shuffle(order)
    kind = ["clean"] * len(en)
    start = 0
    for name, rate in RATES.items():
        for i in order[start : start + round(rate * len(en))]:
            kind[i] = name
        start += round(rate * len(en))
    src, tgt = list(en), list(de)
    shuffled = [i for i in order if kind[i] == "misaligned"]
    for a, b in zip(shuffled, shuffled[1:] + shuffled[:1]):  # each target moves to the next pair: none stays
        tgt[a] = de[b]
    for i, k in enumerate(kind):
        if k == "french":
            tgt[i] = fr[i]
        elif k == "czech":
            tgt[i] = cs[i]
        elif k == "copy":
            tgt[i] = en[i]
        elif k == "truncated":
            words = de[i].split()
            tgt[i] = " ".join(words[: max(1, len(words) // 3)])
        elif k == "html":
            src[i], tgt[i] = HTML[rng.randrange(len(HTML))](en[i], de[i], rng)
    pairs = list(zip(src, tgt, kind))
    clean = [i for i, k in enumerate(kind) if k == "clean"]
    extra: dict[int, list[tuple[str, str, str]]] = {}
    for name, rate in ADDED.items():
        for i in rng.sample(clean, round(rate * len(en))):
            s, t = en[i], de[i]
            if name == "near_duplicate":
                s, t = s.lower().rstrip("."), t.lower().rstrip(".") + " !"
            extra.setdefault(i, []).append((s, t, name))
    rows = []
    for i, pair in enumerate(pairs):
        rows.append(pair)
        rows.extend(extra.get(i, []))  # after the pair they repeat, so the first occurrence is the real one
    out.mkdir(parents=True, exist_ok=True)
    for column, suffix in enumerate(("en", "de", "kind")):
        (out / f"train.{suffix}").write_text("".join(r[column] + "\n" for r in rows), encoding="utf-8")
    counts = {k: sum(r[2] == k for r in rows) for k in KINDS}
    return counts


def cleaned(noisy: Path, config: WebCleanConfig, scorer=None) -> tuple[list[str], list[str], list[str], list]:
    """The noisy set's sources, targets and kinds of noise, and for each pair the first rule that drops it (None:
    kept), the rules run pair by pair in order as `mtkit clean` runs them."""
    # split("\n"), not splitlines(): a caption may hold U+2028 or a form feed, which is not a line end
    src, tgt = (
        [line.rstrip("\r") for line in (noisy / f"train.{lang}").read_text(encoding="utf-8").split("\n")[:-1]]
        for lang in ("en", "de")
    )
    kinds = (noisy / "train.kind").read_text(encoding="utf-8").split()
    return src, tgt, kinds, list(first_drops(config.rules("en", "de", scorer), src, tgt))


def tabulate(kinds: list[str], drops: list, config: WebCleanConfig) -> dict:
    """For each kind of noise, its pairs, the pairs each rule dropped and the pairs kept."""
    table = {k: {"pairs": 0, "kept": 0, **dict.fromkeys(config.active(), 0)} for k in KINDS}
    for kind, rule in zip(kinds, drops):
        row = table[kind]
        row["pairs"] += 1
        row["kept" if rule is None else rule] += 1
    return table


def report(noisy: Path, config: WebCleanConfig, scorer=None) -> dict:
    """For each kind of noise, the pairs each rule dropped and the pairs kept."""
    _, _, kinds, drops = cleaned(noisy, config, scorer)
    return tabulate(kinds, drops, config)


def dual_xent_scorer(args: argparse.Namespace, config: WebCleanConfig) -> tuple:
    """Every noisy pair's dual cross-entropy, computed once in batches (report cleans pair by pair), and the
    threshold: --dual-xent-max, or the one `mtkit clean --dual-xent-drop` estimates (the same function)."""
    from mtkit import load_translator
    from mtkit.data.webclean import estimate_threshold
    from mtkit.decode.pairs import dual_cross_entropy

    dual = dual_cross_entropy(*(load_translator(path, "cpu") for path in args.dual_xent))
    # split("\n"), not splitlines(): a caption may hold U+2028 or a form feed, which is not a line end
    paths = [args.noisy / f"train.{lang}" for lang in ("en", "de")]
    lines = [path.read_text(encoding="utf-8").split("\n")[:-1] for path in paths]
    scores = dict(zip(zip(*lines), dual(*lines)))
    scorer = lambda src, tgt: [scores[pair] for pair in zip(src, tgt)]  # noqa: E731
    threshold = args.dual_xent_max
    if args.dual_xent_drop:
        threshold, _ = estimate_threshold(*paths, "en", "de", config, scorer, len(lines[0]))
        print(f"--dual-xent-drop {args.dual_xent_drop:g}: the threshold is {threshold:.3f}")
    return scorer, threshold


def _print(table: dict, rules: tuple[str, ...]) -> None:
    print("| noise | pairs | " + " | ".join(rules) + " | kept |")
    print("|---|---:|" + "---:|" * (len(rules) + 1))
    for kind, row in table.items():
        print(f"| {kind} | {row['pairs']:,} | " + " | ".join(f"{row[r]:,}" for r in rules) + f" | {row['kept']:,} |")
    clean, noise = table["clean"], [row for kind, row in table.items() if kind != "clean"]
    lost = clean["pairs"] - clean["kept"]
    removed = sum(row["pairs"] - row["kept"] for row in noise)
    total = sum(row["pairs"] for row in noise)
    print(f"clean pairs lost: {lost:,} of {clean['pairs']:,} ({lost / clean['pairs']:.2%}); ", end="")
    print(f"noisy pairs removed: {removed:,} of {total:,} ({removed / max(total, 1):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write OUT/train.{en,de,kind}")
    b.add_argument("--data", type=Path, default=SHIPPED, help="Multi30k's train.{en,de,fr,cs}.gz (default: shipped)")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("report", help="what each rule of mtkit clean removes from NOISY")
    r.add_argument("noisy", type=Path)
    r.add_argument("--all", action="store_true", help="every rule but the length ones (as mtkit clean --all)")
    for flag in ("langid", "copies", "dedup", "near-dedup", "markup", "control"):
        r.add_argument(f"--{flag}", action="store_true")
    r.add_argument("--max-chars", type=int, default=0)
    r.add_argument("--max-char-ratio", type=float, default=0.0)
    r.add_argument("--dual-xent", nargs=2, type=Path, metavar=("FORWARD", "BACKWARD"), help="En->De, De->En models")
    r.add_argument("--dual-xent-max", type=float, default=0.0)
    r.add_argument("--dual-xent-drop", type=float, default=0.0, help="instead of --dual-xent-max, as mtkit clean's")
    args = parser.parse_args()
    if args.command == "build":
        counts = build(args.data, args.out, args.seed)
        noise = sum(n for k, n in counts.items() if k != "clean")
        print(
            f"wrote {args.out}/train.{{en,de,kind}}: {sum(counts.values()):,} pairs, {noise:,} noisy "
            f"({noise / sum(counts.values()):.1%})"
        )
        print(json.dumps(counts))
        return
    on = lambda name: bool(getattr(args, name) or args.all)  # noqa: E731
    config = WebCleanConfig(
        on("control"),
        on("markup"),
        on("copies"),
        args.max_chars,
        args.max_char_ratio,
        on("dedup"),
        on("near_dedup"),
        on("langid"),
        args.dual_xent_max,
        args.dual_xent_drop,
    )
    scorer = None
    if args.dual_xent:
        scorer, threshold = dual_xent_scorer(args, config)
        config = dataclasses.replace(config, dual_xent_max=threshold)
    table = report(args.noisy, config, scorer)
    _print(table, config.active()[1:])  # invalid_utf8 cannot happen: build writes UTF-8
    print(json.dumps({"config": vars(args), "table": table}, default=str))


if __name__ == "__main__":
    sys.exit(main())
