"""SentencePiece models for tests, learned by `mtkit.data.vocab.train_bpe`: the settings `mtkit bpe` uses.

`train_bpe` keeps byte fallback on, so 256 of a model's ids are byte pieces that spell characters
the training text never held. A test that wants N pieces and characters asks for N + BYTE_PIECES.
"""

from __future__ import annotations

from collections.abc import Iterable

import sentencepiece as spm

from mtkit.data.vocab import train_bpe

BYTE_PIECES = 256


def train_spm(lines: Iterable[str], vocab_size: int) -> bytes:
    """Joint BPE with mtkit's fixed ids (pad 0, unk 1, bos 2, eos 3), learned in memory; the model's bytes."""
    return train_bpe(lines, vocab_size)


def pieces(model: bytes) -> int:
    """The number of ids of a serialized model: the vocabulary size a model trained with it has."""
    return spm.SentencePieceProcessor(model_proto=model).get_piece_size()
