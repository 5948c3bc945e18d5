"""An OPUS-MT tokenizer: two SentencePiece models over one vocab.json whose ids are Marian's.

Transformers' `MarianTokenizer` cuts text into pieces with `source.spm` (targets with `target.spm`) and
looks each piece up in `vocab.json` (a piece missing there is `<unk>`); a `>>xxx<<` at the start of a
line is one token of its own. Marian's ids put `</s>` at 0, `<unk>` at 1 and `<pad>` (also the decoder's
start) last, where mtkit's model fixes pad 0, unk 1, bos 2, eos 3 (docs/architecture.md). So mtkit's
model carries the vocabulary with a fixed renumbering (`IdMap`): the special pieces go to mtkit's ids,
the two ordinary pieces at Marian ids 2 and 3 move to the end, every other piece keeps its Marian id,
and one row is added: Marian's `<pad>` row serves as both mtkit's PAD and its BOS (the decoder's
start). mtkit/marian/opus.py renumbers the weights the same way, so the model computes exactly what
Marian's does, and turns them back on export; the files (spm models, vocab.json) are kept as they are.

`MarianVocab` is a `Tokenizer` (mtkit/data/tokenizer.py), a peer of mtkit's joint SentencePiece `Vocab`, not a
kind of it; its `proto` (what travels in checkpoints as "vocab") is a JSON bundle of the tokenizer's files,
kept as marian-tokenizer.json in a data directory or an export, which `load_tokenizer`
(mtkit/data/tokenizer.py) tells from a SentencePiece model.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

import sentencepiece as spm

from mtkit.config import BOS, EOS, PAD, UNK
from mtkit.data.vocab import LEADING_TOKEN
from mtkit.errors import MtkitError
from mtkit.files import MARIAN_TOKENIZER

BUNDLE_FORMAT = "mtkit-marian-tokenizer"
BUNDLE_PREFIX = b'{"format": "' + BUNDLE_FORMAT.encode() + b'"'
BOS_PIECE = "<s>"  # the name of the added row (mtkit's BOS) where a piece name is needed (CTranslate2's vocabulary)


@dataclass(frozen=True)
class IdMap:
    """Marian ids <-> mtkit ids. `mtkit_of[m]` for each Marian id; `marian_of[i]` for each mtkit id
    (mtkit's PAD and BOS both map to Marian's `<pad>`)."""

    mtkit_of: tuple[int, ...]
    marian_of: tuple[int, ...]
    pad: int  # Marian's <pad> id (its decoder start)
    eos: int
    unk: int

    @classmethod
    def build(cls, pieces: Sequence[str]) -> IdMap:
        ids = {p: i for i, p in enumerate(pieces)}
        missing = [p for p in ("</s>", "<unk>", "<pad>") if p not in ids]
        if missing:
            raise MtkitError(f"vocab.json has no {', '.join(missing)}, which a Marian vocabulary needs.")
        pad, eos, unk = ids["<pad>"], ids["</s>"], ids["<unk>"]
        size = len(pieces) + 1  # one more row: mtkit's BOS, a copy of <pad>
        marian_of = [-1] * size
        marian_of[PAD], marian_of[UNK], marian_of[BOS], marian_of[EOS] = pad, unk, pad, eos
        moved = []
        for m in range(len(pieces)):
            if m in (pad, eos, unk):
                continue
            if m > EOS and marian_of[m] == -1:
                marian_of[m] = m  # most pieces keep their Marian id
            else:
                moved.append(m)
        free = [i for i in range(size) if marian_of[i] == -1]
        for i, m in zip(free, moved):
            marian_of[i] = m
        mtkit_of = [0] * len(pieces)
        for i, m in enumerate(marian_of):
            if i != BOS:
                mtkit_of[m] = i
        return cls(tuple(mtkit_of), tuple(marian_of), pad, eos, unk)


def _processor(proto: bytes, name: str) -> spm.SentencePieceProcessor:
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception as exc:  # sentencepiece raises bare RuntimeError/OSError
        raise MtkitError(f"{name} is not a valid SentencePiece model ({exc}).") from None
    return sp


def split_language_code(text: str) -> tuple[list[str], str]:
    """A leading `>>xxx<<` as a token of its own and the rest, as MarianTokenizer splits them."""
    if text.startswith(">>"):
        end = text.find("<<")
        if end != -1:
            return [text[: end + 2]], text[end + 2 :]
    return [], text


class MarianVocab:
    """MarianTokenizer's encoding and decoding, in mtkit's ids (the module docstring): a `Tokenizer` over two
    SentencePiece models and vocab.json."""

    filename = MARIAN_TOKENIZER  # the JSON bundle, not a SentencePiece model (old files: spm.model)

    def __init__(self, source: bytes, target: bytes, pieces: Sequence[str], config: dict | None = None):
        self.source_proto, self.target_proto = source, target
        self.pieces = list(pieces)
        self.config = dict(config or {})  # tokenizer_config.json's fields (source_lang, target_lang), kept for export
        self.ids = IdMap.build(self.pieces)
        self.src_sp, self.tgt_sp = _processor(source, "source.spm"), _processor(target, "target.spm")
        self._lookup = {p: i for i, p in enumerate(self.pieces)}
        self.bos_piece = BOS_PIECE if BOS_PIECE not in self._lookup else "<mtkit_bos>"
        self.proto = self.to_bytes()
        # A multilingual OPUS-MT model's `>>xxx<<` pieces, in mtkit's ids (`--target-lang`, docs/multilingual.md).
        self.language_tokens = {
            p: self.ids.mtkit_of[i] for i, p in enumerate(self.pieces) if p[:2] == ">>" and LEADING_TOKEN.fullmatch(p)
        }

    # ----------------------------------------------------------------- the bundle in checkpoints
    def to_bytes(self) -> bytes:
        body = {
            "source_spm": base64.b64encode(self.source_proto).decode(),
            "target_spm": base64.b64encode(self.target_proto).decode(),
            "vocab": self.pieces,
            "tokenizer_config": self.config,
        }
        return BUNDLE_PREFIX + b", " + json.dumps(body, ensure_ascii=False, sort_keys=True).encode()[1:]

    @classmethod
    def from_bytes(cls, data: bytes) -> MarianVocab:
        try:
            body = json.loads(data.decode("utf-8"))
            return cls(
                base64.b64decode(body["source_spm"]),
                base64.b64decode(body["target_spm"]),
                [str(p) for p in body["vocab"]],
                body.get("tokenizer_config") or {},
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise MtkitError(f"the embedded Marian tokenizer is damaged ({type(exc).__name__}).") from None

    # ----------------------------------------------------------------- the Tokenizer's methods
    def __len__(self) -> int:
        return len(self.ids.marian_of)

    def _ids(self, code: list[str], pieces: list[str]) -> list[int]:
        unk = self.ids.unk
        return [self.ids.mtkit_of[self._lookup.get(p, unk)] for p in code + pieces]

    def encode(self, text: str) -> list[int]:
        code, rest = split_language_code(text)
        return self._ids(code, self.src_sp.encode(rest, out_type=str))

    def encode_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        return [self.encode(line) for line in lines]

    def encode_target_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        """Target text (references to score, forced prefixes) cut with target.spm, as MarianTokenizer's text_target."""
        return [self._ids([], self.tgt_sp.encode(line, out_type=str)) for line in lines]

    def language_token(self, line: str) -> tuple[str, int] | None:
        """(the `>>xxx<<` `line` starts with, where its text begins), if it is one of the model's pieces."""
        m = LEADING_TOKEN.match(line)
        return (m.group(1), m.end()) if m and m.group(1) in self.language_tokens else None

    def files(self) -> dict[str, bytes]:
        """The bundle mtkit reads back, and the two SentencePiece models as CTranslate2's own OPUS-MT converter
        leaves them."""
        return {self.filename: self.proto, "source.spm": self.source_proto, "target.spm": self.target_proto}

    def pieces_file(self) -> str:
        return "".join(f"{self.piece(i)}\t0\n" for i in range(len(self)))

    def piece(self, i: int) -> str:
        """The piece of mtkit id i (BOS, the added row, is `<s>`)."""
        return self.bos_piece if i == BOS else self.pieces[self.ids.marian_of[i]]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids with pad/bos/eos dropped (unk kept), through target.spm as MarianTokenizer decodes."""
        pieces = [self.piece(int(i)) for i in ids if i not in (PAD, BOS, EOS)]
        text, run = "", []
        for p in pieces:
            if p == "<unk>":  # a special token is never handed to SentencePiece
                text += self.tgt_sp.decode_pieces(run) + "<unk> "
                run = []
            else:
                run.append(p)
        text += self.tgt_sp.decode_pieces(run)
        return text.replace("\u2581", " ").strip()

    def normalize(self, text: str) -> str:
        norm = self.src_sp.normalize(split_language_code(text)[1])
        return norm.removeprefix("\u2581").replace("\u2581", " ")
