"""Prepared language pairs of the toy task for the multilingual tests: the directories `mtkit prepare` leaves.

Each pair's target is the toy "translation" (the words reversed) with its own suffix per language, so
the directions differ and a model must read the target-language token to know which one it is asked for.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.corpora import synthetic_pairs

SUFFIX = {"de": "en", "fr": "ez", "cs": "ych"}


def prepared_pair(root: Path, src: str, tgt: str, n: int, seed: int = 3) -> Path:
    """ROOT/SRC-TGT with raw/{train,valid,test}.{src,tgt} and a prepare.json naming the languages."""
    out = root / f"{src}-{tgt}"
    (out / "raw").mkdir(parents=True)
    english, _ = synthetic_pairs(n + 40, seed)
    other = [" ".join(w + SUFFIX.get(tgt if src == "en" else src, "o") for w in reversed(s.split())) for s in english]
    sides = {"en": english, (tgt if src == "en" else src): other}
    for split, (a, b) in {"train": (0, n), "valid": (n, n + 20), "test": (n + 20, n + 40)}.items():
        for lang in (src, tgt):
            text = "".join(line + "\n" for line in sides[lang][a:b])
            (out / "raw" / f"{split}.{lang}").write_text(text, encoding="utf-8")
    (out / "prepare.json").write_text(json.dumps({"corpus": None, "src_lang": src, "tgt_lang": tgt}))
    return out
