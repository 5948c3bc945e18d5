"""Ensembles of independently trained models decoding as one: the log of the mean of their probabilities.

log p(y_t | y_<t, X) = log (1/M) sum_m p_m(y_t | y_<t, X), as fairseq's EnsembleModel computes it,
inside the same beam search (or sampling, or scoring) as a single model: `Ensemble` answers the
calls a search makes of a `Transformer` (encode, init_cache, decode_step, decode), and each model
keeps its own encoder output and key/value cache. Its "logits" are already log-probabilities,
so the log-softmax a search applies to them changes nothing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import ModelConfig
from mtkit.model.transformer import DecoderCache, Encoded, Transformer


@dataclass(frozen=True)
class EnsembleEncoded:
    """Each model's encoder output for the same source batch."""

    parts: tuple[Encoded, ...]

    @property
    def memory(self) -> Tensor:
        return self.parts[0].memory  # a search reads its dtype and device


@dataclass(frozen=True)
class EnsembleCache:
    """Each model's own decoder cache; reordered together."""

    parts: tuple[DecoderCache, ...]

    @property
    def length(self) -> int:
        return self.parts[0].length

    def reorder(self, index: Tensor) -> "EnsembleCache":
        return EnsembleCache(tuple(c.reorder(index) for c in self.parts))


def mean_probability(logits: Sequence[Tensor]) -> Tensor:
    """log((1/M) sum_m softmax(logits_m)), computed stably in fp32 at least (fp64 stays fp64)."""
    dtype = torch.promote_types(logits[0].dtype, torch.float32)
    lprobs = torch.stack([F.log_softmax(x.to(dtype), dim=-1) for x in logits])  # (M, ..., V)
    return torch.logsumexp(lprobs, dim=0) - math.log(len(logits))


class Ensemble:
    """Several models with one vocabulary, searched as one (see the module's docstring)."""

    def __init__(self, models: Sequence[Transformer]):
        if not models:
            raise ValueError("an ensemble needs at least one model")
        sizes = {m.cfg.target_vocab_size for m in models}
        if len(sizes) > 1:
            raise ValueError(f"the models' output vocabularies differ in size: {sorted(sizes)}")
        self.models = tuple(models)
        # A search reads max_positions: the ensemble can decode as far as its shortest member.
        self.cfg: ModelConfig = dataclasses.replace(models[0].cfg,
                                                    max_positions=min(m.cfg.max_positions for m in models))

    def encode(self, src: Tensor) -> EnsembleEncoded:
        return EnsembleEncoded(tuple(m.encode(src) for m in self.models))

    def init_cache(self, encoded: EnsembleEncoded) -> EnsembleCache:
        return EnsembleCache(tuple(m.init_cache(e) for m, e in zip(self.models, encoded.parts)))

    def decode_step(self, tgt: Tensor, cache: EnsembleCache) -> tuple[Tensor, EnsembleCache]:
        """Next target ids (B, T) -> log mean probabilities (B, T, V) and every model's new cache."""
        steps = [m.decode_step(tgt, c) for m, c in zip(self.models, cache.parts)]
        return mean_probability([logits for logits, _ in steps]), EnsembleCache(tuple(c for _, c in steps))

    def decode(self, tgt_in: Tensor, encoded: EnsembleEncoded) -> Tensor:
        """Teacher forcing: decoder inputs (B, T) -> log mean probabilities (B, T, V)."""
        return mean_probability([m.decode(tgt_in, e) for m, e in zip(self.models, encoded.parts)])
