"""What a search asks of a model: next-token log-probabilities for every row, and one way to reorder rows.

The search never touches a cache itself, so anything with these two methods can be searched:
one model (`ModelStep`), or several whose log-probabilities are combined (an ensemble).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from mtkit.model.transformer import Transformer


class Step(Protocol):
    """Rows are the flattened (sentences x beams); a sentence's beams are adjacent."""

    max_positions: int
    dtype: torch.dtype  # of the log-probabilities and scores: fp32, or fp64 for a model run in fp64

    def log_probs(self, last: Tensor) -> Tensor:
        """The latest token of every row (N,) -> log P(next token) (N, V), in fp32 at least.

        The result may live in a buffer that the next call overwrites: use it within the step.
        """
        ...

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (each within its sentence); `sentences`: the kept ones, when some leave."""
        ...

    def select(self, rows: Tensor) -> None:
        """Keep any `rows`, from any sentences (sampling: rows end one by one)."""
        ...


class ModelStep:
    """One Transformer: the source encoded once, each sentence's beams sharing its encoder keys/values."""

    def __init__(self, model: Transformer, src: Tensor, beams: int, capacity: int):
        encoded = model.encode(src)
        B = src.size(0)
        sentences = torch.arange(B, device=src.device)
        self.model, self.max_positions = model, model.cfg.max_positions
        # Scores in fp32 at least (fp64 when the model runs in fp64, as some tests do).
        self.dtype = torch.float64 if encoded.memory.dtype == torch.float64 else torch.float32
        self.cache = model.init_cache(encoded, capacity).reorder(sentences.repeat_interleave(beams), sentences)
        self.everyone = sentences
        self.device, self.buffers = src.device, dict[str, Tensor]()

    def log_probs(self, last: Tensor) -> Tensor:
        """Valid until the next call: the step writes into the same two buffers every time."""
        states, self.cache = self.model.decode_states(last.view(-1, 1), self.cache)
        N, V = last.numel(), self.model.cfg.target_vocab_size
        buffer = self.scratch("logits", N, V, states.dtype) if self.model.projects_into_buffers() else None
        logits = self.model.project(states[:, -1], out=buffer)
        # Not while autograd records: it cannot follow an op written into a given tensor.
        out = None if torch.is_grad_enabled() else self.scratch("lprobs", N, V, self.dtype)
        return torch.log_softmax(logits, dim=-1, dtype=self.dtype, out=out)

    def scratch(self, name: str, rows: int, width: int, dtype: torch.dtype) -> Tensor:
        """A (rows, width) view of a buffer kept for the whole search (see Transformer.project for why)."""
        buffer = self.buffers.get(name)
        if buffer is None or buffer.size(0) < rows or buffer.dtype != dtype:
            buffer = self.buffers[name] = torch.empty(rows, width, dtype=dtype, device=self.device)
        return buffer[:rows]

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        if sentences is None:  # all stay: the same count tells the cache to keep their encoder keys/values
            sentences = self.everyone[: self.cache.layers[0].cross_k.size(0)]
        self.cache = self.cache.reorder(rows, sentences)

    def select(self, rows: Tensor) -> None:
        """Keep any `rows`, each then with its own copy of its sentence's encoder keys/values (for sampling,
        whose rows end one by one, not in equal groups per sentence)."""
        self.cache = self.cache.reorder(rows)
        self.everyone = torch.arange(rows.numel(), device=rows.device)
