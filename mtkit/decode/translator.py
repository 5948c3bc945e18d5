"""Text in, translations out: encode, sort by length, pack by tokens, beam search, decode, input order kept.

Input is read in chunks, so the first translations of a huge (or endless) stream come out
before the end of it is read; within a chunk, sentences of similar length share a batch.
"""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence, cast

import torch

from mtkit import checkpoint
from mtkit.config import (DECODE_PRECISION_CHOICES, DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, EOS, PAD,
                          DecodeConfig)
from mtkit.data.vocab import Vocab
from mtkit.decode.beam import beam_search
from mtkit.device import pick_device
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class Translation:
    """The output for one input line (numbered from 1): its hypotheses, best first, with scores."""

    line: int
    hypotheses: list[tuple[str, float]]  # an empty input line gives [("", 0.0)]

    @property
    def text(self) -> str:
        return self.hypotheses[0][0]

    @property
    def score(self) -> float:
        return self.hypotheses[0][1]


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The dtype the model runs in; int8 runs fp32 around its int8 Linear layers."""
    if precision not in DECODE_PRECISION_CHOICES:
        raise MtkitError(f"unknown precision {precision!r}; choose one of: {', '.join(DECODE_PRECISION_CHOICES)}.")
    if precision == "fp16" and device.type != "cuda":
        raise MtkitError("precision fp16 needs a CUDA device; use fp32, bf16 or int8 on the CPU.")
    if precision == "int8" and device.type != "cpu":
        raise MtkitError("precision int8 runs on the CPU only; use --device cpu, or fp16/bf16 on a GPU.")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.float32}[precision]


def pack_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices, longest first, in batches whose size x longest length stays within `batch_tokens`.

    Longest first: a batch that does not fit in memory fails at once, not at the end. A
    sentence longer than `batch_tokens` on its own still gets a batch of one.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


class Translator:
    """A model and its SentencePiece vocabulary, ready to translate raw text.

    >>> translator = Translator.load("runs/small/averaged.pt")
    >>> translator.translate(["A man is riding a bike."])
    """

    def __init__(self, model: Transformer, vocab: Vocab, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32):
        cfg = model.cfg
        if len(vocab) > min(cfg.vocab_size, cfg.target_vocab_size):
            raise MtkitError(f"the SentencePiece vocabulary has {len(vocab)} pieces, more than the model's "
                             f"{min(cfg.vocab_size, cfg.target_vocab_size)} embeddings.")
        self.device = torch.device(device)
        self.model = model.to(device=self.device, dtype=dtype).eval()
        self.vocab = vocab

    @classmethod
    def load(cls, path: str | os.PathLike, device: str = "auto", precision: str = "fp32") -> "Translator":
        """From an mtkit file of kind "model" (e.g. averaged) or "checkpoint"; training state is ignored."""
        ckpt = checkpoint.load(path)
        if not ckpt.get("vocab"):
            raise MtkitError(f"{path} holds no SentencePiece vocabulary, so its output cannot be turned into text.")
        model = checkpoint.build_from(ckpt)
        vocab = Vocab.from_bytes(ckpt["vocab"])
        del ckpt  # optimizer state can be twice the model's size
        target = pick_device(device)
        dtype = resolve_dtype(precision, target)
        if precision == "int8":
            from mtkit.decode.quantize import quantize_int8

            model = quantize_int8(cast(Transformer, model))
        return cls(model, vocab, target, dtype)

    @property
    def max_source_tokens(self) -> int:
        return self.model.cfg.max_positions - 1  # the EOS appended to the source needs a position too

    def translate(self, lines: Sequence[str], beam: int = 4, alpha: float = 0.6, *, lenpen: str = "gnmt",
                  max_len_a: float = 1.0, max_len_b: int = 50,
                  batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[str]:
        """Translations of `lines`, one for each, in order (the paper's decoding settings by default)."""
        config = DecodeConfig(beam=beam, alpha=alpha, lenpen=lenpen, max_len_a=max_len_a, max_len_b=max_len_b)
        return [t.text for t in self.translate_stream(lines, config, batch_tokens)]

    def translate_stream(self, lines: Iterable[str], config: DecodeConfig = DecodeConfig(),
                         batch_tokens: int = DEFAULT_BATCH_TOKENS,
                         chunk_lines: int = DEFAULT_CHUNK_LINES) -> Iterator[Translation]:
        """Translations in input order, yielded as soon as every earlier line's is ready."""
        if batch_tokens < 1 or chunk_lines < 1:
            raise MtkitError("batch_tokens and chunk_lines must be positive.")
        lines = iter(lines)
        first = 1
        while chunk := list(itertools.islice(lines, chunk_lines)):
            yield from self._translate_chunk(first, chunk, config, batch_tokens)
            first += len(chunk)

    def _translate_chunk(self, first: int, lines: list[str], config: DecodeConfig,
                         batch_tokens: int) -> Iterator[Translation]:
        ids = self.vocab.encode_batch(lines)
        for i, sentence in enumerate(ids):
            if len(sentence) > self.max_source_tokens:
                logger.warning("line %d has %d subword tokens, more than the model's %d; only the first %d are "
                               "translated.", first + i, len(sentence), self.max_source_tokens, self.max_source_tokens)
                ids[i] = sentence[:self.max_source_tokens]
        ready: dict[int, Translation] = {i: Translation(first + i, [("", 0.0)]) for i, s in enumerate(ids) if not s}
        todo = [i for i, s in enumerate(ids) if s]
        next_out = 0
        for batch in pack_batches([len(ids[i]) + 1 for i in todo], batch_tokens):
            batch = [todo[j] for j in batch]
            for i, hypotheses in zip(batch, self._search([ids[i] for i in batch], config)):
                ready[i] = Translation(first + i, hypotheses)
            while next_out in ready:
                yield ready.pop(next_out)
                next_out += 1
        while next_out in ready:  # a chunk of only empty lines
            yield ready.pop(next_out)
            next_out += 1

    def _search(self, ids: list[list[int]], config: DecodeConfig) -> list[list[tuple[str, float]]]:
        src = torch.full((len(ids), max(map(len, ids)) + 1), PAD, dtype=torch.long)  # (B, S)
        for row, sentence in enumerate(ids):
            src[row, :len(sentence) + 1] = torch.tensor([*sentence, EOS])
        result = beam_search(self.model, src.to(self.device), config)
        return [[(self.vocab.decode(h.tokens), h.score) for h in hypotheses] for hypotheses in result.hypotheses]
