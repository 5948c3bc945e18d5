"""What a search asks of a model: next-token log-probabilities for every row, and one way to reorder rows.

The search never touches a cache itself, so anything with these two methods can be searched:
one model (`ModelStep`), or several whose log-probabilities are combined (an ensemble).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from mtkit.model.cache import DecoderCache
from mtkit.model.linear import Rows
from mtkit.model.static import RunFn, StaticCache, static_states, window
from mtkit.model.transformer import Transformer

# Rows of the output layer and softmax at a time on the CPU (see ModelStep.log_probs): blocks measured faster
# than one product on many rows, even on fewer (docs/benchmarks.md, "Figures behind the code's choices": this module).
PROJECT_ROWS = 256
# An int8 output layer's blocks hold at most this many bytes of logits (64 rows of 8,000), in multiples of 16 rows:
# smaller blocks measured faster for int8, not for fp32 (docs/benchmarks.md, "Decoding against CTranslate2").
INT8_BLOCK_BYTES = 2 * 2**20


# (model, src (B, S)) -> (the source's padding mask or None, each decoder layer's cross-attention keys and values):
# `encode`, or its compiled form (mtkit/decode/compiled.py).
EncodeFn = Callable[[Transformer, Tensor], tuple[Tensor | None, list[tuple[Tensor, Tensor]]]]


def encode(model: Transformer, src: Tensor) -> tuple[Tensor | None, list[tuple[Tensor, Tensor]]]:
    """The source encoded (section 3.1), as each decoder layer's cross-attention reads it."""
    encoded = model.encode(src)
    return encoded.src_mask, model.cross_kv(encoded.memory)


class Step(Protocol):
    """Rows are the flattened (sentences x beams); a sentence's beams are adjacent."""

    max_positions: int
    forced_eos: bool  # the ending at the length limit scores log 1 (ModelConfig.forced_eos)
    dtype: torch.dtype  # of the log-probabilities and scores: fp32, or fp64 for a model run in fp64

    def log_probs(self, last: Tensor) -> Tensor:
        """The latest token of every row (N,) -> log P(next token) (N, V), in fp32 at least.

        The result may live in a buffer that the next call overwrites: use it within the step.
        """
        ...

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (each within its sentence); `sentences`: the kept ones, when some leave.

        Not called when every row stays as it is (greedy search between endings): rows stay put unless reordered.
        """
        ...

    def select(self, rows: Tensor) -> None:
        """Keep any `rows`, from any sentences (sampling: rows end one by one)."""
        ...

    def restrict(self, ids: Tensor) -> None:
        """From now on score only the output layer's rows `ids`: column i of the log-probabilities is then token
        ids[i], normalised over those rows alone (a lexical shortlist: mtkit/decode/shortlist.py)."""
        ...


class ModelStep:
    """One Transformer: the source encoded once, each sentence's beams sharing its encoder keys/values."""

    def __init__(self, model: Transformer, src: Tensor, beams: int, capacity: int, encoder: EncodeFn | None = None):
        src_mask, cross = (encoder or encode)(model, src)
        B = src.size(0)
        sentences = torch.arange(B, device=src.device)
        self.model, self.max_positions, self.forced_eos = model, model.cfg.max_positions, model.cfg.forced_eos
        # Scores in fp32 at least (fp64 when the model runs in fp64, as some tests do).
        self.dtype = torch.float64 if cross[0][0].dtype == torch.float64 else torch.float32
        start = DecoderCache.start(cross, src_mask, capacity)
        self.cache = start.reorder(sentences.repeat_interleave(beams), sentences)
        self.everyone = sentences
        self.device, self.buffer = src.device, None
        self.output: Callable[[Tensor], Tensor] | None = None  # `restrict`'s rows of the output layer
        self.restricted: int | None = None  # how many rows

    def restrict(self, ids: Tensor) -> None:
        """The output layer restricts itself (`rows`: int8 stays int8), the Marian logits bias with it."""
        model = self.model
        logits_bias = model.final_logits_bias if model.cfg.output_bias else None
        self.output, self.restricted = model.output_proj.rows(ids, logits_bias), ids.numel()

    def project(self, states: Tensor) -> Tensor:
        """The logits of the output layer, or of the rows it was restricted to."""
        return self.model.project(states) if self.output is None else self.output(states)

    def log_probs(self, last: Tensor) -> Tensor:
        """Valid until the next call: the step writes into the same buffer every time.

        On the CPU the output layer and its softmax run on blocks of `block_rows` rows, each
        block's logits read back while they are still in cache, and the logits of all rows never
        exist at once: a (rows x vocabulary) tensor of them per step is a fresh mapping of memory
        whose page faults cost a large batch's step a third of its time, and as much memory
        again as the log-probabilities.
        """
        states = self.states(last)  # (N, d_model)
        if torch.is_grad_enabled():  # autograd cannot follow an op written into a given tensor
            return torch.log_softmax(self.project(states), dim=-1, dtype=self.dtype)
        N = states.size(0)
        width = self.model.cfg.target_vocab_size if self.restricted is None else self.restricted
        out = self.scratch(N, width)
        block = self.block_rows(width) if states.device.type == "cpu" else N
        for i in range(0, N, block):
            logits = self.project(states[i : i + block])
            torch.log_softmax(logits, dim=-1, dtype=self.dtype, out=out[i : i + block])
        return out

    def block_rows(self, width: int) -> int:
        """Rows of the output layer's blocks on the CPU, for `width` columns: PROJECT_ROWS; for an int8 layer, as
        many as INT8_BLOCK_BYTES of logits hold (at least 16). int8 quantizes each call's rows with one scale
        (`quantizes_each_call`), so the block's rows are also a quantization group: int8 log-probabilities depend
        on the blocks (as on a batch's other sentences), fp32's do not."""
        if not getattr(self.model.output_proj, "quantizes_each_call", False):
            return PROJECT_ROWS
        return max(16, min(PROJECT_ROWS, INT8_BLOCK_BYTES // (4 * width)) // 16 * 16)

    def states(self, last: Tensor) -> Tensor:
        """The decoder's states (N, d_model) after each row's latest token (N,); the cache moves on one position."""
        states, self.cache = self.model.decode_states(last.view(-1, 1), self.cache)
        return states[:, -1]

    def scratch(self, rows: int, width: int) -> Tensor:
        """A (rows, width) view of the one buffer kept for the whole search, grown when a step needs more rows."""
        if self.buffer is None or self.buffer.size(0) < rows:
            self.buffer = torch.empty(rows, width, dtype=self.dtype, device=self.device)
        return self.buffer[:rows]

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        if sentences is None:  # all stay: the same count tells the cache to keep their encoder keys/values
            sentences = self.everyone[: self.cache.layers[0].cross_k.size(0)]
        self.cache = self.cache.reorder(rows, sentences)

    def select(self, rows: Tensor) -> None:
        """Keep any `rows`, each then with its own copy of its sentence's encoder keys/values (for sampling,
        whose rows end one by one, not in equal groups per sentence)."""
        self.cache = self.cache.reorder(rows)
        self.everyone = torch.arange(rows.numel(), device=rows.device)


class StaticStep(ModelStep):
    """A `ModelStep` whose decoder attends over a static cache (mtkit/model/static.py): every step of a sentence has
    the same shapes, so greedy search's steps over it can run compiled (`run_fn`, mtkit/decode/compiled.py:
    `--compile`; bench/static_step.py measures it against `ModelStep`).

    The cache's positions not yet written are zeroed once per buffer (masked positions still enter attention's
    second product, with weight 0: their values must be finite), and the cache doubles when a step needs more
    (a new shape: a compiled function may trace again). `log_probs` keeps `ModelStep`'s output layer, shortlist
    rows and log-softmax; `run` hands them, with the cache, to `run_fn` (greedy search's steps of one sentence,
    compiled: mtkit/decode/compiled.py). Decoding only (under torch.inference_mode, as the searches run): no
    autograd.
    """

    def __init__(
        self,
        model: Transformer,
        src: Tensor,
        beams: int,
        capacity: int,
        encoder: EncodeFn | None = None,
        run_fn: RunFn | None = None,
    ):
        super().__init__(model, src, beams, max(capacity, 1), encoder)
        self.run_fn = run_fn
        self.zeroed: Tensor | None = None  # the cache buffer whose unwritten positions were zeroed

    def states(self, last: Tensor) -> Tensor:
        """`static_states` over the static cache at its next position, then one position on."""
        t = self.cache.length
        cache = self.room(self.cache, t)
        states = static_states(self.model, last, torch.tensor(t, device=last.device), static_at(cache, t))
        self.cache = dataclasses.replace(cache, length=t + 1)
        return states

    def run(self, last: Tensor, logp: Tensor, stop: int, ids: Tensor | None = None) -> tuple[Tensor, Tensor] | None:
        """Greedy search's steps of one sentence in one call where a `run_fn` was given (`static_run`, compiled:
        --compile), from the row's latest token `last` (1,) and its log-probability so far `logp` (1,): until a
        step picks EOS, the log-probability stops being finite, or the cache's position reaches `stop` or the end of
        its window. Returns the columns picked (k,) and the log-probability after them (1,); None (nothing done)
        without a `run_fn`, for a model whose output layer is not a `Rows` (int8's, say), where the log-probabilities
        are not fp32, and for more than one row. `ids`: the token id of each column (a shortlist's rows), else the
        columns are token ids."""
        rows, run_fn = self.rows(), self.run_fn
        if run_fn is None or rows is None or last.size(0) != 1:
            return None
        t = self.cache.length
        cache = self.cache = self.room(self.cache, t)  # kept when declined: the eager step then finds the room made
        history = cache.history
        assert history is not None
        if history.size(2) != 1:  # room for more rows than the one searched
            return None
        at = static_at(cache, t)
        ids = torch.arange(rows.weight.size(0), device=last.device) if ids is None else ids
        position, until = torch.tensor(t, device=last.device), torch.tensor(min(stop, at.span), device=last.device)
        ran = run_fn(self.model, last, position, at, rows, ids, logp, until)
        if ran is None:
            return None
        out, reached, total, written = ran
        end = int(reached)
        history[:, t:end] = written[:, t:end]  # the positions run, into the buffer the cache's layers view
        self.cache = dataclasses.replace(cache, length=end)
        return out[t:end], total

    def rows(self) -> Rows | None:
        """The output layer's rows `run` scores (a shortlist's, or the whole vocabulary's), or None where it cannot:
        a layer that is not a `Rows` (int8's, say), log-probabilities not in fp32."""
        output = self.output
        if output is None and not self.model.cfg.output_bias:  # the whole vocabulary, the layer's own tensors
            layer = self.model.output_proj
            output = Rows(layer.weight, layer.bias)
        return output if isinstance(output, Rows) and self.dtype == torch.float32 else None

    def room(self, cache: DecoderCache, t: int) -> DecoderCache:
        """`cache` with room for position `t`, its positions from `t` on zeroed once per buffer."""
        if cache.history is None or t + 1 > cache.history.size(1):
            cache = cache.with_room(t + 1)
        assert cache.history is not None  # a cache made with room (`capacity` > 0) outside autograd
        if cache.history is not self.zeroed:  # a new buffer (made, grown, gathered): nothing past `t` written yet
            cache.history[:, t:].zero_()
            self.zeroed = cache.history
        return cache


def static_at(cache: DecoderCache, t: int) -> StaticCache:
    """`cache` as a step at position `t` over the static cache reads it: its buffer, its cross-attention keys and
    values, its source mask, and the window of positions attention reads."""
    assert cache.history is not None  # a cache made with room, as `StaticStep.room` leaves it
    cross = [(c.cross_k, c.cross_v) for c in cache.layers]
    return StaticCache(cache.history, cross, cache.src_mask, window(t, cache.history.size(1)))
