"""Toy parallel text and data directories laid out as `mtkit prepare` + `mtkit bpe` leave them.

The toy task (short random sentences, their "translation" the words reversed with a suffix) is
learnable in seconds. Multi30k comes as the few hundred lines shipped in tests/data/sample/, or
the whole corpus, the copy that ships in mtkit/data/multi30k (or $MTKIT_MULTI30K), for `integration` tests.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import sentencepiece as spm

from mtkit.data.binarize import BinaryWriter
from mtkit.data.corpora import SHIPPED_MULTI30K
from tests.support.cli import ROOT, run_cli
from tests.support.spm import train_spm

SAMPLE = ROOT / "tests" / "data" / "sample"

WORDS = (
    "a man woman dog cat runs walks sits on the street in park with red blue ball small big child "
    "plays looks at green tree house water"
).split()


def synthetic_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Short random sentences and a deterministic 'translation' (reversed, with a suffix): learnable."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        src.append(" ".join(words))
        tgt.append(" ".join(w + "en" for w in reversed(words)))
    return src, tgt


def short_pairs(n: int, seed: int, max_words: int = 6) -> list[tuple[str, str]]:
    """The toy pairs of at most `max_words` words: shorter batches, the same task."""
    return [(s, t) for s, t in zip(*synthetic_pairs(n, seed)) if len(s.split()) <= max_words]


def build_data_dir(
    out: Path,
    splits: dict[str, tuple[list[str], list[str]]],
    vocab_size: int,
    src_lang: str = "en",
    tgt_lang: str = "de",
) -> Path:
    """Learn a joint BPE model on the train split (`train_bpe`), binarize every split: the `mtkit bpe` contract."""
    out.mkdir(parents=True, exist_ok=True)
    train_src, train_tgt = splits["train"]
    model = train_spm(train_src + train_tgt, vocab_size)
    (out / "spm.model").write_bytes(model)
    sp = spm.SentencePieceProcessor(model_proto=model)
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


def data_vocab_size(data: Path) -> int:
    """The vocabulary size DATA/bpe.json records (what a model trained on DATA has)."""
    return json.loads((data / "bpe.json").read_text())["vocab_size"]


def write_pairs(root: Path, pairs: list[tuple[list[int], list[int]]], vocab_size: int = 50) -> None:
    """A train split of these id pairs, binarized, with the bpe.json that opens it (no SentencePiece model)."""
    (root / "bin").mkdir(parents=True)
    for lang, side in (("en", 0), ("de", 1)):
        with BinaryWriter(root / "bin" / f"train.{lang}", vocab_size) as w:
            for pair in pairs:
                w.add_many([pair[side]])
    (root / "bpe.json").write_text(json.dumps({"src_lang": "en", "tgt_lang": "de", "vocab_size": vocab_size}))


def random_sizes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Source and target lengths of n sentence pairs: 0-59 tokens, the target within 10 of its source."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 60, n)
    return src, np.clip(src + rng.integers(-10, 10, n), 0, None)


def text_files(tmp_path: Path, n: int = 300, tag: str = "") -> dict[str, Path]:
    """Plain-text train/valid/test .en/.de files under TMP/in, for `mtkit prepare custom`."""
    rows = [(f"the house number {i} {tag} is small .", f"das Haus Nummer {i} {tag} ist klein .") for i in range(n)]
    paths = {}
    for name, lines in (
        ("train.en", [a for a, _ in rows]),
        ("train.de", [b for _, b in rows]),
        ("valid.en", ["the house is small ."]),
        ("valid.de", ["das Haus ist klein ."]),
        ("test.en", ["a small house ."]),
        ("test.de", ["ein kleines Haus ."]),
    ):
        paths[name] = tmp_path / "in" / name
        paths[name].parent.mkdir(exist_ok=True)
        paths[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def read_gz(path: Path, limit: int | None = None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def sample_multi30k(out: Path) -> Path:
    """The shipped sample in the corpus's own layout (train/val/test_2016_flickr .en/.de.gz) under OUT."""
    for path in SAMPLE.glob("*.??"):
        (out / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))
    return out


def full_multi30k() -> Path | None:
    """The full corpus's directory (the original .gz files): $MTKIT_MULTI30K, else the copy mtkit ships; None
    when neither holds it (an installation that left the package data out)."""
    env = os.environ.get("MTKIT_MULTI30K")
    path = Path(env) if env else SHIPPED_MULTI30K
    return path if (path / "train.en.gz").is_file() else None


def prepare_custom(files: dict[str, Path], out: Path, test: bool = True) -> subprocess.CompletedProcess:
    """`mtkit prepare custom` of `text_files` into OUT (the test split too, unless `test` is False)."""
    args: list = ["prepare", "custom", "--out", out, "--workers", "1"]
    for split in ("train", "valid", "test") if test else ("train", "valid"):
        args += [f"--{split}-src", files[f"{split}.en"], f"--{split}-tgt", files[f"{split}.de"]]
    return run_cli(*args)


MULTI30K_WORDS = {  # one caption vocabulary a language, word i of each list the same word
    "en": "a dog man woman child runs sits on the grass beach street red big small".split(),
    "de": "ein Hund Mann Frau Kind rennt sitzt auf dem Gras Strand Straße roten großen kleinen".split(),
    "fr": "un chien homme femme enfant court assis sur la pelouse plage rue rouge grand petit".split(),
    "cs": "pes muž žena dítě běží sedí na trávě pláži ulici červený velký malý".split(),
}


def fake_multi30k(root: Path, n: int = 400) -> Path:
    """The shipped Multi30k's layout (train.LANG.gz side by side, every language: the noisy recipe takes French and
    Czech captions as noise) with n synthetic captions a language, aligned by line (word i of each list is one word)."""
    rng = random.Random(4)
    rows = [[rng.randrange(13) for _ in range(rng.randint(4, 9))] for _ in range(n)]
    for lang, words in MULTI30K_WORDS.items():
        folder = root
        folder.mkdir(parents=True, exist_ok=True)
        text = "".join(" ".join(words[i] for i in row).capitalize() + ".\n" for row in rows)
        with gzip.open(folder / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write(text)
    return root
