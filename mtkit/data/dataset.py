"""A binarized data directory (written by `mtkit bpe`) opened for training: splits, sizes, batches of tensors.

The on-disk contract: `DIR/bpe.json` names the languages and the vocabulary size,
`DIR/spm.model` is the joint SentencePiece model, `DIR/bin/{split}.{lang}.bin|.idx` hold
ids without BOS/EOS. The model sees source = ids + [EOS], decoder input = [BOS] + ids and
decoder target = ids + [EOS], right-padded with PAD (docs/architecture.md, "Conventions").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtkit import locks
from mtkit.config import BOS, EOS, PAD
from mtkit.data.binarize import IndexedDataset
from mtkit.data.tokenizer import Tokenizer, load_tokenizer
from mtkit.errors import MtkitError
from mtkit.files import DATA_LOCK, SPM_MODEL, TOKENIZER_FILES


@dataclass(frozen=True)
class Batch:
    """One batch as int64 numpy arrays, plus the token counts the trainer needs without a device sync."""

    src: np.ndarray  # (B, S) ids + EOS, right-padded
    tgt_in: np.ndarray  # (B, T) BOS + ids
    tgt_out: np.ndarray  # (B, T) ids + EOS
    src_tokens: int  # real source tokens (EOS included)
    tgt_tokens: int  # real target tokens (EOS included): what the loss is normalised by


def _fill(
    ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int, first: int | None, last: int | None
) -> np.ndarray:
    """Gather sentences straight from the memmap into a right-padded (B, width) array, without a Python loop."""
    out = np.full((len(starts), width), PAD, dtype=np.int64)
    shift = 1 if first is not None else 0
    cols = np.arange(width - 1)  # every sentence leaves one column for BOS or EOS
    real = cols[None, :] < lengths[:, None]  # (B, width - 1)
    out[:, shift : shift + width - 1][real] = ids[(starts[:, None] + cols[None, :])[real]]
    rows = np.arange(len(starts))
    if first is not None:
        out[:, 0] = first
    if last is not None:
        out[rows, lengths] = last
    return out


class ParallelSplit:
    """One split (train/valid/test): source and target IndexedDatasets of equal length."""

    def __init__(self, src: IndexedDataset, tgt: IndexedDataset, name: str):
        if len(src) != len(tgt):
            raise MtkitError(
                f"{src.prefix}.bin has {len(src)} sentences but {tgt.prefix}.bin has {len(tgt)}; "
                "rebuild the binarized data with `mtkit bpe`."
            )
        self.src, self.tgt, self.name = src, tgt, name
        self.src_sizes, self.tgt_sizes = src.sizes, tgt.sizes  # without BOS/EOS

    def __len__(self) -> int:
        return len(self.src)

    def max_id(self) -> int:
        """Largest token id on either side (0 when empty): checked against the model's vocabulary."""
        return int(max(self.src.ids.max(initial=0), self.tgt.ids.max(initial=0)))

    def collate(self, indices: np.ndarray) -> Batch:
        """Sentences `indices` as one batch: source ids+EOS, decoder input BOS+ids, target ids+EOS."""
        indices = np.asarray(indices, dtype=np.int64)
        src_len, tgt_len = self.src_sizes[indices], self.tgt_sizes[indices]
        src = _fill(self.src.ids, self.src.offsets[indices], src_len, int(src_len.max()) + 1, None, EOS)
        tgt_width = int(tgt_len.max()) + 1
        tgt_starts = self.tgt.offsets[indices]
        tgt_in = _fill(self.tgt.ids, tgt_starts, tgt_len, tgt_width, BOS, None)
        tgt_out = _fill(self.tgt.ids, tgt_starts, tgt_len, tgt_width, None, EOS)
        return Batch(src, tgt_in, tgt_out, int(src_len.sum()) + len(indices), int(tgt_len.sum()) + len(indices))


@dataclass(frozen=True)
class DataDir:
    """An opened data directory: languages, vocabulary size and the SentencePiece model's bytes."""

    path: Path
    src_lang: str
    tgt_lang: str
    vocab_size: int
    info: dict[str, Any]

    @property
    def spm_path(self) -> Path:
        """The tokenizer's file, as bpe.json names it: spm.model (a SentencePiece model), or marian-tokenizer.json
        (an OPUS-MT model's, `mtkit bpe --from`; directories made before that name have it as spm.model)."""
        model = self.info.get("model")
        name = model.get("file") if isinstance(model, dict) else None
        return self.path / (name if name in TOKENIZER_FILES else SPM_MODEL)

    def vocab_bytes(self) -> bytes:
        if not self.spm_path.is_file():
            raise MtkitError(f"{self.spm_path} is missing; run `mtkit bpe {self.path}` first.")
        return self.spm_path.read_bytes()

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the directory was encoded with, whichever kind (mtkit's SentencePiece model, an OPUS-MT
        model's from `mtkit bpe --from`): ask this, never for a file name."""
        return load_tokenizer(self.vocab_bytes())

    def split(self, name: str) -> ParallelSplit:
        """The memory-mapped (source, target) arrays of one split: sentence i of each in O(1)."""
        if name not in self.info.get("splits", {name: None}):
            raise MtkitError(f"{self.path} has no binarized '{name}' split (it has: {', '.join(self.info['splits'])}).")
        prefix = self.path / "bin" / name
        return ParallelSplit(
            IndexedDataset(f"{prefix}.{self.src_lang}"), IndexedDataset(f"{prefix}.{self.tgt_lang}"), name
        )


def open_data(path: str | os.PathLike) -> DataDir:
    """Read DIR/bpe.json; a directory without binarized data gets one sentence saying what to run."""
    path = Path(path)
    if not path.is_dir():
        raise MtkitError(f"data directory {path} does not exist.")
    writer = locks.holder(path / DATA_LOCK)  # `prepare` or `bpe` writing it now: its files are not finished
    if writer is not None:
        raise MtkitError(f"{path} is being written by {writer}; wait for it to end.")
    meta = path / "bpe.json"
    if not meta.is_file():
        raise MtkitError(f"{path} has no binarized data ({meta.name} is missing); run `mtkit bpe {path}` first.")
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        src_lang, tgt_lang, vocab_size = str(info["src_lang"]), str(info["tgt_lang"]), int(info["vocab_size"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MtkitError(
            f"{meta} is not valid (needs src_lang, tgt_lang and vocab_size: {exc}); rerun `mtkit bpe {path}`."
        ) from None
    return DataDir(path, src_lang, tgt_lang, vocab_size, info)


def recorded_languages(path: Path) -> tuple[str, dict[str, Any], str, str] | None:
    """The first of DIR's prepare.json and bpe.json that names its languages, as (its file name, its record, source,
    target); None where neither does (absent, unreadable, or without them). For a directory that may not be
    binarized yet (`open_data` wants bpe.json)."""
    for name in ("prepare.json", "bpe.json"):
        try:
            record = json.loads((path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("src_lang") and record.get("tgt_lang"):
            return name, record, str(record["src_lang"]), str(record["tgt_lang"])
    return None
