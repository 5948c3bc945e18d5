"""`mtkit shortlist MODEL DATA -o OUT`: a model file that carries its lexical shortlist.

The shortlist (mtkit/data/shortlist.py learns it from DATA's binarized training pairs, distilled ones for a
student) goes inside the model file, under `shortlist`: {"candidates": (source vocabulary, K) int32 tensor,
best first, -1 padded; "frequent": (N,) int32 tensor; "k", "frequent_count", "learned_from"}. So it travels
with the weights: `mtkit translate` uses it (mtkit/decode/shortlist.py), `mtkit export --format ctranslate2`
writes it as CTranslate2's vocabulary map (vmap.txt), and `mtkit info` says it is there. The file's
`decode_defaults` turn it on (mtkit/sources/defaults.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint, sources
from mtkit.data.dataset import open_data
from mtkit.data.shortlist import learn
from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)


def make(
    model: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    k: int = 50,
    frequent: int = 100,
    sample: int = 50_000,
    iterations: int = 5,
    revision: str | None = None,
) -> dict[str, Any]:
    """Write `out`: the model `model` names (whatever mtkit/sources/ reads as mtkit weights: a model or checkpoint
    file, a run directory, a Marian or OPUS-MT directory, a Hub name at `revision`) as a model file with the
    shortlist learnt from `data`'s training pairs; returns the shortlist."""
    data, out = Path(data), Path(out)
    if Path(out).is_dir():
        raise MtkitError(f"--output {out} is a directory; give the model file to write.")
    ckpt = sources.find(model, revision).checkpoint()  # a CTranslate2 export: one sentence (its weights are not ours)
    opened = open_data(data)
    vocab = opened.vocab_bytes()
    if ckpt.get("vocab") != vocab:
        raise MtkitError(
            f"{model} was not trained with {data}'s vocabulary (its tokenizer, {opened.spm_path.name}, differs); "
            "learn the shortlist from the data the model was trained on."
        )
    config = checkpoint.config_of(ckpt)
    train = opened.split("train")
    size = max(config.vocab_size, config.target_vocab_size)
    learned = learn(train.src, train.tgt, size, k=k, frequent=frequent, sample=sample, iterations=iterations)
    shortlist = {
        "candidates": torch.from_numpy(learned.candidates[: config.vocab_size]),
        "frequent": torch.from_numpy(learned.frequent),
        "k": k,
        "frequent_count": frequent,
        "learned_from": {
            "data": str(data.resolve()),
            "spm_sha256": hashlib.sha256(vocab).hexdigest(),
            "pairs": learned.pairs,
            "of": len(train.src),
            "method": f"IBM Model 1, {iterations} EM rounds",
        },
    }
    # decoded with its shortlist unless told otherwise, beside what the model decoded with before (a student's beam)
    own = {**sources.defaults.of(ckpt, where=model), "shortlist": True}
    checkpoint.atomic_save({**ckpt, "shortlist": shortlist, sources.defaults.KEY: own}, out)
    return shortlist
