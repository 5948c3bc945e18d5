"""Ensembles of independently trained models decoding as one: the log of the mean of their probabilities.

log p(y_t | y_<t, X) = log (1/M) sum_m p_m(y_t | y_<t, X), as fairseq's EnsembleModel computes it,
inside the same beam search (or sampling, or scoring) as a single model. A search sees one
`Step` (mtkit/decode/step.py); `EnsembleStep` holds one `ModelStep` per model, so each model
keeps its own encoder output and key/value cache, and every reorder goes to all of them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from mtkit.config import ModelConfig
from mtkit.decode.step import EncodeFn, ModelStep, StaticStep, Step
from mtkit.model.static import RunFn
from mtkit.model.transformer import Encoded, Transformer


def mean_probability(lprobs: Sequence[Tensor]) -> Tensor:
    """log((1/M) sum_m exp(lprobs_m)) over M log-probability tensors of one shape, computed stably."""
    return torch.logsumexp(torch.stack(list(lprobs)), dim=0) - math.log(len(lprobs))


class Ensemble:
    """Several models with one vocabulary (the translator checks the SentencePiece models are the same)."""

    def __init__(self, models: Sequence[Transformer]):
        if not models:
            raise ValueError("an ensemble needs at least one model")
        sizes = {m.cfg.target_vocab_size for m in models}
        if len(sizes) > 1:
            raise ValueError(f"the models' output vocabularies differ in size: {sorted(sizes)}")
        self.models = tuple(models)
        # A search reads max_positions: the ensemble can decode as far as its shortest member.
        self.cfg: ModelConfig = dataclasses.replace(
            models[0].cfg, max_positions=min(m.cfg.max_positions for m in models)
        )

    def encode(self, src: Tensor) -> tuple[Encoded, ...]:
        return tuple(m.encode(src) for m in self.models)

    def decode(self, tgt_in: Tensor, encoded: tuple[Encoded, ...]) -> Tensor:
        """Teacher forcing (scoring): decoder inputs (B, T) -> log mean probabilities (B, T, V)."""
        logits = [m.decode(tgt_in, e) for m, e in zip(self.models, encoded)]
        dtype = torch.promote_types(logits[0].dtype, torch.float32)  # fp32 at least; fp64 stays fp64
        return mean_probability([x.to(dtype).log_softmax(-1) for x in logits])


class EnsembleStep:
    """A `Step` over several models: their next-token log-probabilities combined, every reorder sent to each."""

    def __init__(self, steps: Sequence[Step]):
        self.steps = tuple(steps)
        self.max_positions = min(s.max_positions for s in steps)
        self.forced_eos = all(s.forced_eos for s in steps)
        self.dtype = steps[0].dtype

    def log_probs(self, last: Tensor) -> Tensor:
        return mean_probability([s.log_probs(last).to(self.dtype) for s in self.steps])  # (N, V)

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for s in self.steps:
            s.reorder(rows, sentences)

    def select(self, rows: Tensor) -> None:
        for s in self.steps:
            s.select(rows)

    def restrict(self, ids: Tensor) -> None:
        for s in self.steps:
            s.restrict(ids)


# How a search gets its Step: (the model or ensemble, src (B, S), rows per sentence, cache capacity) -> Step.
# `make_step` is mtkit's; a caller that measures another step (a compiled one, say) may hand the engine that.
StepFactory = Callable[["Transformer | Ensemble", Tensor, int, int], Step]


def make_step(model: Transformer | Ensemble, src: Tensor, rows_per_sentence: int, capacity: int) -> Step:
    """The `Step` a search runs for one model or an ensemble: `rows_per_sentence` rows (beams, samples) each."""
    if isinstance(model, Ensemble):
        return EnsembleStep([ModelStep(m, src, rows_per_sentence, capacity) for m in model.models])
    return ModelStep(model, src, rows_per_sentence, capacity)


def static_steps(encoder: EncodeFn | None = None, run_fn: RunFn | None = None) -> StepFactory:
    """`make_step`'s Steps over a static cache (`StaticStep`), each model's source encoded by `encoder`, and greedy
    search's steps of one sentence by `run_fn` where given (a lone model's): `encode` itself and none, or compiled
    (mtkit/decode/compiled.py)."""

    def make(model: Transformer | Ensemble, src: Tensor, rows_per_sentence: int, capacity: int) -> Step:
        models = model.models if isinstance(model, Ensemble) else [model]
        run = None if isinstance(model, Ensemble) else run_fn  # an ensemble's step averages several models'
        steps = [StaticStep(m, src, rows_per_sentence, capacity, encoder, run) for m in models]
        return EnsembleStep(steps) if isinstance(model, Ensemble) else steps[0]

    return make
