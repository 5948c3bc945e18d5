"""Markup kept intact, measured: inline tags injected around aligned spans of test_2016_flickr, translated with
`--format html`'s path (mtkit/decode/markup.py), and scored.

    python bench/markup_tags.py --model model.pt --data DIR     # DIR: test_2016_flickr.{en,de}[.gz], train.*
    python bench/markup_tags.py --model model.pt --data tests/data/sample --test val --lines 100   # quick

Deterministic (--seed): reference alignments come from IBM Model 1 (Brown et al. 1993), learned here by EM in
both directions on --align-train training pairs plus the test pairs, and intersected (the links both directions
agree on: few, but precise). In each test sentence one to three source spans of one to three words are picked
whose aligned reference words form one contiguous span that no other source word links into (a consistent
phrase pair, as phrase extraction defines it); each gets an inline tag (b, i, a href, em, span class) on the
source and, as the gold, on the reference span. Reported:

- well-formed: the output parses with every element closed in order (void ones need none);
- same tags: the output's start tags, as written, are the source's (as a multiset);
- BLEU (sacrebleu, detokenized) of the output with its tags taken out, against the BLEU of the plain source
  translated the same way (the goal: no more than 0.3 lower);
- tag placement on the reference: the tagged source is aligned with its reference by the model's own
  cross-attention (a teacher-forced pass, as `format: html` aligns its own translation), the tags projected
  onto the reference, and their word spans compared with the gold spans: word-level precision, recall, F1
  (micro, over all tags), with the proportional projection (no attention) beside it as the floor;
- tag content on the translation: the words inside each tag of the output against the words inside the
  gold tag of the reference (bag of words, lowercased, punctuation stripped), F1: placement and translation
  quality together, since the two texts differ.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TAGS = ["b", "i", 'a href="https://example.org/"', "em", 'span class="x"']
PUNCT = re.compile(r"^\W+|\W+$")


def read(path: Path) -> list[str]:
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.exists():
            opener = gzip.open if candidate.suffix == ".gz" else open
            with opener(candidate, "rt", encoding="utf-8") as f:
                return [line.rstrip("\n") for line in f]
    raise SystemExit(f"no {path}[.gz]")


def norm(word: str) -> str:
    return PUNCT.sub("", word.lower()) or word.lower()


def ibm1(pairs: list[tuple[list[str], list[str]]], iterations: int = 5) -> dict[tuple[str, str], float]:
    """t(f | e) by EM over (e words, f words), with a NULL source word."""
    t: dict[tuple[str, str], float] = collections.defaultdict(lambda: 1.0)
    for _ in range(iterations):
        count: dict[tuple[str, str], float] = collections.defaultdict(float)
        total: dict[str, float] = collections.defaultdict(float)
        for e, f in pairs:
            es = [None, *e]
            for fw in f:
                probs = [t[(ew, fw)] for ew in es]
                z = sum(probs)
                for ew, p in zip(es, probs):
                    count[(ew, fw)] += p / z
                    total[ew] += p / z
        t = collections.defaultdict(float, {k: v / total[k[0]] for k, v in count.items()})
    return t


def viterbi(t: dict[tuple[str, str], float], e: list[str], f: list[str]) -> set[tuple[int, int]]:
    """(e index, f index) for each f word's best e word (NULL links left out)."""
    links = set()
    for j, fw in enumerate(f):
        scores = [t.get((None, fw), 0.0)] + [t.get((ew, fw), 0.0) for ew in e]
        best = max(range(len(scores)), key=scores.__getitem__)
        if best > 0:
            links.add((best - 1, j))
    return links


def consistent_spans(links: set[tuple[int, int]], n_src: int, rng: random.Random) -> list[tuple[int, int, int, int]]:
    """Up to 3 non-overlapping (src a, src b, tgt a, tgt b) consistent phrase pairs of 1-3 source words."""
    candidates = []
    for a in range(n_src):
        for b in range(a + 1, min(a + 3, n_src) + 1):
            tgt = [j for i, j in links if a <= i < b]
            if not tgt or any(not any(i == k for k, _ in links) for i in range(a, b)):
                continue
            ta, tb = min(tgt), max(tgt) + 1
            if set(range(ta, tb)) != set(tgt) or any(ta <= j < tb and not a <= i < b for i, j in links):
                continue
            candidates.append((a, b, ta, tb))
    rng.shuffle(candidates)
    chosen: list[tuple[int, int, int, int]] = []
    for c in candidates:
        if len(chosen) == rng.randint(1, 3):
            break
        if all(c[1] <= d[0] or d[1] <= c[0] for d in chosen) and all(c[3] <= d[2] or d[3] <= c[2] for d in chosen):
            chosen.append(c)
    return sorted(chosen)


def tagged(words: list[str], spans: list[tuple[int, int]], tags: list[str]) -> str:
    out = list(words)
    for (a, b), tag in zip(spans, tags):
        out[a] = f"<{tag}>" + out[a]
        out[b - 1] = out[b - 1] + f"</{tag.split()[0]}>"
    return " ".join(out)


def f1(tp: float, pred: float, gold: float) -> tuple[float, float, float]:
    p, r = (tp / pred if pred else 0.0), (tp / gold if gold else 0.0)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--test", default="test_2016_flickr")
    ap.add_argument("--lines", type=int, default=0, help="the first N test lines (0: all)")
    ap.add_argument("--align-train", type=int, default=29000, help="training pairs for the reference alignments")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    import sacrebleu
    import torch

    from mtkit.decode.loading import load_translator
    from mtkit.decode.markup import (
        Document,
        place,
        proportional,
        start_tags,
        strip_tags,
        translate_fragments,
        well_formed,
    )

    if args.threads:
        torch.set_num_threads(args.threads)
    src = read(args.data / f"{args.test}.en")
    ref = read(args.data / f"{args.test}.de")
    if args.lines:
        src, ref = src[: args.lines], ref[: args.lines]
    train = list(zip(read(args.data / "train.en"), read(args.data / "train.de")))[: args.align_train]
    started = time.time()
    pairs = [([norm(w) for w in e.split()], [norm(w) for w in d.split()]) for e, d in [*train, *zip(src, ref)]]
    forward, backward = ibm1(pairs), ibm1([(f, e) for e, f in pairs])
    rng = random.Random(args.seed)
    items = []
    for s, r in zip(src, ref):
        e, d = [norm(w) for w in s.split()], [norm(w) for w in r.split()]
        links = viterbi(forward, e, d) & {(i, j) for j, i in viterbi(backward, d, e)}
        spans = consistent_spans(links, len(e), rng)
        if spans:
            tags = [rng.choice(TAGS) for _ in spans]
            items.append((s, r, spans, tags, tagged(s.split(), [(a, b) for a, b, _, _ in spans], tags)))
    align_s = time.time() - started
    translator = load_translator(args.model, device="cpu")
    started = time.time()
    plain = translator.translate([s for s, *_ in items])
    html_out = list(translate_fragments(translator, [h for *_, h in items]))
    translate_s = time.time() - started
    refs = [r for _, r, *_ in items]
    bleu_plain = sacrebleu.corpus_bleu(plain, [refs]).score
    bleu_tagged = sacrebleu.corpus_bleu([strip_tags(o) for o in html_out], [refs]).score
    formed = sum(well_formed(o) for o in html_out)
    same = sum(start_tags(o) == start_tags(h) for o, (*_, h) in zip(html_out, items))

    # placement on the reference: the model's attention (and the proportional floor) against the gold spans
    counts = {"attention": [0, 0, 0], "proportional": [0, 0, 0]}
    units = [Document(h).units[0] for *_, h in items]
    ref_links = translator.align([(u.words, r.split()) for u, (_, r, *_) in zip(units, items)]) or []
    for unit, (_, r, spans, *_), row in zip(units, items, ref_links):
        gold = [set(range(ta, tb)) for _, _, ta, tb in spans]
        for name, links in (("attention", row), ("proportional", proportional(unit, len(r.split())))):
            placed = place(unit.spans, links, len(unit.words), 0, len(r.split()))
            for (_, a, b), g in zip(sorted(placed, key=lambda p: p[0].first), gold):
                counts[name][0] += len(set(range(a, b)) & g)
                counts[name][1] += b - a
                counts[name][2] += len(g)
    # tag content on the translation: words inside each output tag vs inside the gold tag of the reference
    content = [0, 0, 0]
    for out, (_, r, spans, tags, _) in zip(html_out, items):
        inside: dict[str, list[list[str]]] = collections.defaultdict(list)  # start tag -> words, in output order
        for unit in Document(out).units:
            for span in unit.spans:
                inside[span.element.start].append(unit.words[span.first : span.last])
        ref_words = r.split()
        for (_, _, ta, tb), tag in zip(spans, tags):
            found = inside[f"<{tag}>"]
            got = collections.Counter(norm(w) for w in (found.pop(0) if found else []))
            want = collections.Counter(norm(w) for w in ref_words[ta:tb])
            content[0] += sum((got & want).values())
            content[1] += sum(got.values())
            content[2] += sum(want.values())

    n_tags = sum(len(spans) for _, _, spans, *_ in items)
    print(f"test sentences: {len(src)}; with 1-3 tags around consistent aligned spans: {len(items)} ({n_tags} tags)")
    print(f"reference alignments: IBM Model 1 both ways, intersected, on {len(train)} training pairs ({align_s:.0f} s)")
    print(f"well-formed: {formed}/{len(items)} ({100 * formed / len(items):.1f}%)")
    print(f"same start tags: {same}/{len(items)} ({100 * same / len(items):.1f}%)")
    print(f"BLEU plain input: {bleu_plain:.2f}; tags taken out of the html output: {bleu_tagged:.2f}")
    print(f"  difference: {bleu_tagged - bleu_plain:+.2f} (goal >= -0.3)")
    for name, (tp, pred, gold) in counts.items():
        p, r, f = f1(tp, pred, gold)
        print(f"placement on the reference, {name}: precision {p:.3f} recall {r:.3f} F1 {f:.3f}")
    p, r, f = f1(*content)
    print(f"tag content on the translation vs the reference's gold span: precision {p:.3f} recall {r:.3f} F1 {f:.3f}")
    print(f"translating plain + html: {translate_s:.0f} s")


if __name__ == "__main__":
    main()
