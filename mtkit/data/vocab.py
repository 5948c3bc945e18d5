"""The joint SentencePiece vocabulary: ids pad 0, unk 1, bos 2, eos 3 (DESIGN.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import sentencepiece as spm

from mtkit.config import BOS, EOS, PAD, UNK
from mtkit.errors import MtkitError

SPECIAL_IDS = (PAD, UNK, BOS, EOS)


class Vocab:
    """A loaded SentencePiece model; its serialized bytes travel inside checkpoints."""

    def __init__(self, processor: spm.SentencePieceProcessor, proto: bytes):
        self.sp = processor
        self.proto = proto
        got = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if got != SPECIAL_IDS:
            raise MtkitError(f"SentencePiece model has special ids (pad, unk, bos, eos) = {got}; mtkit needs {SPECIAL_IDS}.")

    @classmethod
    def from_bytes(cls, proto: bytes) -> "Vocab":
        sp = spm.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(proto)
        except Exception as exc:  # sentencepiece raises bare RuntimeError/OSError
            raise MtkitError(f"not a valid SentencePiece model ({exc}).") from None
        return cls(sp, proto)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocab":
        path = Path(path)
        if not path.is_file():
            raise MtkitError(f"SentencePiece model {path} does not exist; run `mtkit bpe` first.")
        return cls.from_bytes(path.read_bytes())

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text, out_type=int)

    def encode_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        return self.sp.encode(list(lines), out_type=int, num_threads=threads)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, with pad/bos/eos dropped (unk is kept: it is real output)."""
        return self.sp.decode([int(i) for i in ids if i not in (PAD, BOS, EOS)])
