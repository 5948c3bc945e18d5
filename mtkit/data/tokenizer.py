"""What every tokenizer of mtkit offers: text to ids and back, the bytes that travel in checkpoints, and the
name of the file that holds them; and `load_tokenizer`, the one factory that tells them apart from their bytes
(Transformers' AutoTokenizer table, for mtkit's two kinds).

Two peers implement it: mtkit's joint SentencePiece model (`mtkit.data.vocab.Vocab`, written as spm.model)
and an OPUS-MT model's two SentencePiece models over Marian's vocabulary (`mtkit.data.marian_vocab.MarianVocab`,
written as marian-tokenizer.json). Training, decoding, `mtkit bpe --from`, data directories (`DataDir.tokenizer`)
and the exports ask this protocol, never which of the two they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Tokenizer(Protocol):
    """Text to ids and back in mtkit's ids (pad 0, unk 1, bos 2, eos 3; docs/architecture.md)."""

    # What travels in a checkpoint as "vocab", and the file name a data directory or an export keeps it under.
    proto: bytes
    filename: str
    # A multilingual model's target-language tokens (`>>xx<<` piece -> id): none for a model of one pair.
    language_tokens: dict[str, int]

    def __len__(self) -> int: ...

    def encode_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        """Source-side text, a leading `>>xx<<` as one token of its own."""
        ...

    def encode_target_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        """Target-side text (the target side of training data, a reference to score, a forced prefix): OPUS-MT
        models cut it with their own target model."""
        ...

    def language_token(self, line: str) -> tuple[str, int] | None:
        """(the target-language token `line` starts with, where its text begins), if it is one of these."""
        ...

    def piece(self, i: int) -> str: ...

    def files(self) -> dict[str, bytes]:
        """The files an export carries to tokenize with: `filename` (what mtkit reads back) and what the other
        engine's own users expect beside it (an OPUS-MT model's source.spm and target.spm)."""
        ...

    def pieces_file(self) -> str:
        """The `piece<TAB>score` lines of spm.vocab (a listing for people; nothing reads it back)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, pad/bos/eos dropped (unk kept: it is real output)."""
        ...

    def normalize(self, text: str) -> str:
        """The text the tokenizer actually encodes, as decode(encode(text)) gives it back."""
        ...


def load_tokenizer(data: bytes) -> Tokenizer:
    """The tokenizer a checkpoint's "vocab" bytes (or a data directory's or an export's tokenizer file) hold: an
    OPUS-MT model's bundle (it starts with its format's mark), else mtkit's joint SentencePiece model."""
    from mtkit.data.marian_vocab import BUNDLE_PREFIX, MarianVocab
    from mtkit.data.vocab import Vocab

    if data.startswith(BUNDLE_PREFIX):
        return MarianVocab.from_bytes(data)
    return Vocab.from_bytes(data)
