"""Binarized data directories for the training tests, written per the `mtkit bpe` contract.

This is the ONE place that builds them (SentencePiece trained directly, BinaryWriter, bpe.json),
so that it can later be replaced by the real `mtkit prepare` + `mtkit bpe`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
from pathlib import Path

import pytest
import sentencepiece as spm

from mtkit.data.binarize import BinaryWriter

WORDS = (
    "a man woman dog cat runs walks sits on the street in park with red blue ball small big child "
    "plays looks at green tree house water"
).split()


def build_data_dir(
    out: Path,
    splits: dict[str, tuple[list[str], list[str]]],
    vocab_size: int,
    src_lang: str = "en",
    tgt_lang: str = "de",
) -> Path:
    """Train a joint SentencePiece BPE model on the train split and binarize every split."""
    out.mkdir(parents=True, exist_ok=True)
    train_src, train_tgt = splits["train"]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(train_src + train_tgt),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )
    (out / "spm.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    (out / "bin").mkdir(exist_ok=True)
    (out / "raw").mkdir(exist_ok=True)
    stats = {}
    for split, (src, tgt) in splits.items():
        counts: dict = {"sentences": len(src), "inputs": {}}
        for lang, lines in ((src_lang, src), (tgt_lang, tgt)):
            text = "".join(line + "\n" for line in lines).encode("utf-8")
            (out / "raw" / f"{split}.{lang}").write_bytes(text)
            counts["inputs"][lang] = hashlib.sha256(text).hexdigest()  # what `mtkit bpe` records of its input
            ids = sp.encode(lines, out_type=int)
            with BinaryWriter(out / "bin" / f"{split}.{lang}", sp.get_piece_size()) as writer:
                for sentence in ids:
                    writer.add_many([sentence])
            counts["src_tokens" if lang == src_lang else "tgt_tokens"] = sum(map(len, ids))
        stats[split] = counts
    info = {"src_lang": src_lang, "tgt_lang": tgt_lang, "vocab_size": sp.get_piece_size(), "splits": stats}
    (out / "bpe.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return out


def synthetic_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Short random sentences and a deterministic 'translation' (reversed, with a suffix): learnable."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        src.append(" ".join(words))
        tgt.append(" ".join(w + "en" for w in reversed(words)))
    return src, tgt


@pytest.fixture(scope="session")
def toy_data(tmp_path_factory) -> Path:
    """About 7 tiny-preset updates an epoch: resume tests cross an epoch boundary within 20 steps."""
    out = tmp_path_factory.mktemp("toy")
    return build_data_dir(
        out,
        {"train": synthetic_pairs(240, 1), "valid": synthetic_pairs(40, 2), "test": synthetic_pairs(20, 3)},
        vocab_size=120,
    )


def read_gz(path: Path, limit: int | None = None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


@pytest.fixture(scope="session")
def multi30k_data(tmp_path_factory, multi30k_full) -> Path:
    """Real Multi30k (train: all 29,000 pairs; valid: 1,014), joint BPE of 2,000 pieces."""
    m30k = multi30k_full
    splits = {
        "train": (read_gz(m30k / "train.en.gz"), read_gz(m30k / "train.de.gz")),
        "valid": (read_gz(m30k / "val.en.gz"), read_gz(m30k / "val.de.gz")),
        "test": (read_gz(m30k / "test_2016_flickr.en.gz"), read_gz(m30k / "test_2016_flickr.de.gz")),
    }
    return build_data_dir(tmp_path_factory.mktemp("multi30k"), splits, vocab_size=2000)
