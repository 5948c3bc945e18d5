"""The joint SentencePiece vocabulary: ids pad 0, unk 1, bos 2, eos 3 (docs/architecture.md).

How the model is learned (`train_bpe`), and why:

- model_type bpe, one model for both languages (the paper's shared source-target
  vocabulary, which lets the embeddings be tied).
- character_coverage 1.0: SentencePiece's own advice for languages with a small alphabet.
  For English, German and French every character of the sample gets a piece, so no accented
  letter of the training text becomes <unk>; 0.9995 is meant for CJK-size alphabets.
- byte_fallback: a character never seen in the sample (in a test set, or user input) is
  spelled with UTF-8 byte pieces instead of <unk>, so every text survives encode->decode.
  It costs 256 of the vocabulary's ids.
- normalization nmt_nfkc (SentencePiece's default): NFKC folds compatibility forms (full-
  width letters, ligatures, non-breaking spaces) that Moses' normaliser leaves alone into
  the forms the model was trained on, also for raw user input at translation time, and
  whitespace runs collapse. The price is that decode(encode(x)) gives the normalised text,
  `Vocab.normalize(x)`, not always x itself; for clean text (all of Multi30k) they are equal.
- Determinism: SentencePiece's own sampling (input_sentence_size with
  shuffle_input_sentence) is not reproducible: `set_random_generator_seed` sets a
  thread-local seed that its sampler does not use (measured: the same seed gave a
  different model in each of five runs). So mtkit samples the sentences itself with a
  seeded numpy generator and hands SentencePiece exactly those, through
  `sentence_iterator` (with input files, the model would record their paths). On the same
  sentences SentencePiece's BPE learns the same pieces with any num_threads, but the model
  records num_threads too, so learning always runs with num_threads=1: spm.model is then
  byte-identical. It costs next to nothing: BPE merging is single-threaded in
  SentencePiece, only its first normalisation pass uses threads (measured: same time with
  1 or 2 threads on 400k sentences).
- Target-language tokens (a multilingual model, docs/multilingual.md): `>>de<<` and its like are
  user_defined_symbols, one piece each, as in the OPUS-MT models. A line that starts with one is
  encoded as that piece's id followed by the rest of the line encoded alone, as Transformers'
  MarianTokenizer does: SentencePiece by itself would put a lone word-start piece before it.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from mtkit.config import BOS, EOS, PAD, UNK
from mtkit.errors import MtkitError
from mtkit.files import SPM_MODEL

SPECIAL_IDS = (PAD, UNK, BOS, EOS)
# A target-language token at the start of a source line: OPUS-MT's form, `>>fra<<`, `>>de<<`, `>>zho_Hant<<`.
LEADING_TOKEN = re.compile(r"\s*(>>[\w-]+<<)\s*")

# The learning settings recorded in bpe.json; a change of any of them rebuilds the model.
TRAIN_SETTINGS = {
    "model_type": "bpe",
    "character_coverage": 1.0,
    "byte_fallback": True,
    "normalization_rule_name": "nmt_nfkc",
    "pad_id": PAD,
    "unk_id": UNK,
    "bos_id": BOS,
    "eos_id": EOS,
}


class Vocab:
    """A loaded SentencePiece model; its serialized bytes travel inside checkpoints (a `Tokenizer`,
    mtkit/data/tokenizer.py)."""

    filename = SPM_MODEL

    def __init__(self, processor: spm.SentencePieceProcessor, proto: bytes):
        self.sp = processor
        self.proto = proto
        got = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if got != SPECIAL_IDS:
            raise MtkitError(
                f"SentencePiece model has special ids (pad, unk, bos, eos) = {got}; mtkit needs {SPECIAL_IDS}."
            )
        # {">>de<<": id}: the target-language tokens this model has as pieces of their own (none: bilingual)
        pieces = ((processor.id_to_piece(i), i) for i in range(processor.get_piece_size()))
        self.language_tokens = {piece: i for piece, i in pieces if piece[:2] == ">>" and LEADING_TOKEN.fullmatch(piece)}

    @classmethod
    def from_bytes(cls, proto: bytes) -> Vocab:
        sp = spm.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(proto)
        except Exception as exc:  # sentencepiece raises bare RuntimeError/OSError
            raise MtkitError(f"not a valid SentencePiece model ({exc}).") from None
        return cls(sp, proto)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        path = Path(path)
        if not path.is_file():
            raise MtkitError(f"SentencePiece model {path} does not exist; run `mtkit bpe` first.")
        return cls.from_bytes(path.read_bytes())

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        lines = list(lines)
        if not self.language_tokens:
            return self.pieces(lines, threads)
        heads = [self.language_token(line) for line in lines]
        rests = [line if head is None else line[head[1] :] for line, head in zip(lines, heads)]
        ids = self.pieces(rests, threads)
        return [out if head is None else [self.language_tokens[head[0]], *out] for out, head in zip(ids, heads)]

    def pieces(self, lines: list[str], threads: int) -> list[list[int]]:
        """SentencePiece's ids of each line. On one thread, line by line: SentencePiece's call on a list starts
        its thread pool even for one thread, 50-160 us a call against 4-8 us for one line's own call, and it was
        no faster on 1,000 lines (an ad-hoc timing on an Intel Xeon); a lone request pays that on every line."""
        if threads <= 1:
            return [self.sp.encode(line, out_type=int) for line in lines]
        return self.sp.encode(lines, out_type=int, num_threads=threads)

    def language_token(self, line: str) -> tuple[str, int] | None:
        """(the target-language token `line` starts with, where its text begins), if it is one of this model's."""
        m = LEADING_TOKEN.match(line)
        return (m.group(1), m.end()) if m and m.group(1) in self.language_tokens else None

    def encode_target_batch(self, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        """Target-side text (a reference to score, a prefix): the same model here; two in an OPUS-MT tokenizer."""
        return self.encode_batch(lines, threads)

    def piece(self, i: int) -> str:
        return str(self.sp.id_to_piece(i))

    def files(self) -> dict[str, bytes]:
        return {self.filename: self.proto}

    def pieces_file(self) -> str:
        return "".join(f"{self.sp.id_to_piece(i)}\t{self.sp.get_score(i):g}\n" for i in range(len(self)))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, with pad/bos/eos dropped (unk is kept: it is real output)."""
        return self.sp.decode([int(i) for i in ids if i not in (PAD, BOS, EOS)])

    def normalize(self, text: str) -> str:
        """The text SentencePiece actually encodes, as decode(encode(text)) gives it back.

        With nmt_nfkc that is NFKC, whitespace runs as one space, no leading or trailing space.
        """
        norm = self.sp.normalize(text)
        if norm.startswith("\u2581"):  # the dummy prefix SentencePiece puts before the first word
            norm = norm[1:]
        return norm.replace("\u2581", " ")


def train_bpe(sentences: Iterable[str], vocab_size: int, symbols: Sequence[str] = ()) -> bytes:
    """Learn a joint BPE model on all of `sentences`; the serialized model.

    Sampling is the caller's business (see the module docstring). Sentences come from an
    iterator, not files, because the model would record the input file names: the same
    text in another directory would give different bytes. `symbols` become pieces of their own
    (ids 4, 5, ... in their order): the target-language tokens of a multilingual model.
    """
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            num_threads=1,
            minloglevel=2,
            **({"user_defined_symbols": list(symbols)} if symbols else {}),
            **TRAIN_SETTINGS,
        )
    except (RuntimeError, OSError) as exc:
        msg = str(exc).strip().split("] ")[-1]  # drop "INTERNAL: src/trainer_interface.cc(744) [check]"
        m = re.search(r"<= (\d+)", msg)
        hint = f"; at most {m.group(1)} is possible here" if m else ""
        m = re.search(r"smaller than required_chars\. \d+ vs (\d+)", msg)
        if m:  # every character and the 256 byte-fallback pieces need an id of their own
            hint = f"; at least {int(m.group(1)) + 1} is needed here"
        raise MtkitError(
            f"SentencePiece cannot learn a vocabulary of {vocab_size} from this text ({msg}){hint}: "
            f"choose another --vocab-size."
        ) from None
    return model.getvalue()
