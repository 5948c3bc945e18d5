"""A decoding step compiled by torch.compile (inductor, frozen weights): an experiment beside the product.

Not in the paper, and not in mtkit/: a `Step` (mtkit/decode/step.py) that the benchmarks hand to mtkit's search
(`bench/translate_speed.py --compile`, `bench/decode_profile.py --compile`, through `TorchEngine.steps`), so that
decoding itself never asks whether a model is compiled. Not an option of `mtkit translate`: on a 2-core CPU it
measured 0.95x eager
(0.99x paired), then 0.89x (0.86x paired) with oneDNN's packed products, the same outputs, after about a
minute of compiling (docs/benchmarks.md, "A compiled decoder
step", has the figures, the profile and what would move it). A GPU run can measure it with `--device cuda`.

What is compiled is one decoder step after the second token (`step_after`): the target embedding, every decoder
layer, the output layer and its log-softmax, for N rows whose t0 >= 2 earlier keys/values are in the cache's
`history` (mtkit/model/cache.py). Shapes repeat by construction: `dynamic=True` makes N, t0, the cache's room and
the source length symbols, so one compilation serves every step of every batch. The first two steps run eagerly
(TorchDynamo specialises an int that is 0 or 1), the cache gets a spare row (rows as many as its room would be
another specialisation), a source without padding an all-true mask (both kinds of batch share the graph), and
a source shorter than 16 tokens masked positions up to 16 (inductor's kernels specialise on shorter rows); a
batch's last sentence alone is one more compilation. The graph never writes into its inputs: a step's self-attention
scores its cached keys and its own new key apart (two products, no copy of the cache) and returns the new keys
and values, which `compiled_log_probs` writes into `history` eagerly (one copy). Writing them inside the graph
made inductor copy the whole history back every step (0.17x eager).

Frozen weights (`freezing`, the process's inductor setting) let inductor treat the parameters as constants and
pack each linear layer's weight once for oneDNN, as eager decoding does (mtkit/runtime/packing.py); asked through
`torch.compile(options=...)` instead, the compiled graph ran its linear layers as unpacked `aten::addmm`. Duck
sizing (equal sizes made one symbol) is off, or a first batch whose sentences happen to equal its rows forces
recompilations.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mtkit from this checkout, as the other benches

from mtkit.decode.ensemble import Ensemble, make_step  # noqa: E402
from mtkit.decode.step import ModelStep, Step  # noqa: E402
from mtkit.model.cache import DecoderCache, LayerCache, layer_views  # noqa: E402
from mtkit.model.transformer import Transformer, merge_heads  # noqa: E402

StepFunction = Callable[[Transformer, Tensor, Tensor, tuple[tuple[Tensor, Tensor], ...], Tensor, int], Any]
FIRST_COMPILED = 2  # t0 from which steps are compiled (0 and 1 are specialised ints: two more compilations)
MIN_SOURCE = 16  # inductor's CPU kernels specialise on a softmax row of 16 (AVX-512's fp32 width) or more


def step_after(
    model: Transformer, last: Tensor, history: Tensor, cross: tuple[tuple[Tensor, Tensor], ...], mask: Tensor, t0: int
) -> tuple[Tensor, Tensor]:
    """One decoder step for N rows after t0 cached positions: (log P(next) (N, V) fp32, new keys/values (2L, N, H,
    d_k)). Reads `history` (2L, C, R >= N, H, d_k) and never writes it; `mask` (n, 1, 1, S) bool."""
    N = last.size(0)
    x = model.tgt_embed(last.view(-1, 1), offset=t0)  # (N, 1, d_model)
    new: list[Tensor] = []
    for i, layer in enumerate(model.decoder):
        attention = layer.self_attn
        q, k, v = attention.project_qkv(layer.res_self.before(x))  # (N, H, 1, d_k) each
        cached_k = history[2 * i, :t0, :N].permute(1, 2, 0, 3)  # (N, H, t0, d_k)
        cached_v = history[2 * i + 1, :t0, :N].permute(1, 2, 0, 3)
        q = q * q.size(-1) ** -0.5
        scores = torch.cat([torch.matmul(q, cached_k.transpose(-1, -2)), (q * k).sum(-1, keepdim=True)], dim=-1)
        weights = scores.softmax(-1)  # (N, H, 1, t0 + 1)
        out = torch.matmul(weights[..., :t0], cached_v) + weights[..., t0:] * v
        x = layer.res_self.after(x, attention.out_proj(merge_heads(out)))
        cross_k, cross_v = cross[i]
        memory = LayerCache(cross_k, cross_v, cross_k, cross_v)
        x = layer.res_cross.after(x, layer.attend_memory(layer.res_cross.before(x), memory, mask))
        x = layer.res_ffn.after(x, layer.ffn(layer.res_ffn.before(x)))
        new += [k, v]
    states = model.decoder_norm(x)[:, -1]  # (N, d_model)
    log_probs = torch.log_softmax(model.project(states), dim=-1, dtype=torch.float32)
    return log_probs, torch.stack(new).squeeze(3)


class CompiledStep(ModelStep):
    """mtkit's `ModelStep`, its steps from the third on through the compiled `function` (the first two eagerly;
    every step, when a shortlist restricted the output layer: `step_after` projects onto all of it)."""

    def __init__(self, model: Transformer, src: Tensor, beams: int, capacity: int, function: StepFunction):
        super().__init__(model, src, beams, capacity)
        self.function = function

    def log_probs(self, last: Tensor) -> Tensor:
        if self.cache.length < FIRST_COMPILED or torch.is_grad_enabled() or self.restricted is not None:
            return super().log_probs(last)
        out, self.cache = compiled_log_probs(self.function, self.model, self.cache, last)
        return out.to(self.dtype)


class CompiledSteps:
    """What `TorchEngine.steps` takes: the `Step` of a search, compiled for `model` (any other: mtkit's own)."""

    def __init__(self, model: Transformer):
        self.model, self.function = model, compile_step()

    def __call__(self, model: Transformer | Ensemble, src: Tensor, rows: int, capacity: int) -> Step:
        if model is not self.model:
            return make_step(model, src, rows, capacity)
        return CompiledStep(model, src, rows, capacity, lambda *args: self.function(*args))


def compile_model(model: Transformer) -> CompiledSteps:
    """The steps to hand to `model`'s engine (`engine.steps = compile_model(engine.model)`); compiled lazily: the
    first step of t0 >= 2 compiles. The model must not change afterwards: its weights are frozen into the code."""
    return CompiledSteps(model)


def compile_step() -> StepFunction:
    """`step_after` under torch.compile, with the process's compiler settings this experiment needs (this
    benchmark's process: nothing in mtkit/ sets them)."""
    torch.fx.experimental._config.use_duck_shape = False  # type: ignore[attr-defined]
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 16)
    # The process's setting, not torch.compile(options=...): asked that way the weights were not folded (aten::addmm).
    torch._inductor.config.freezing = True
    return torch.compile(step_after, dynamic=True)  # type: ignore[return-value]


def compiled_log_probs(function: StepFunction, model: Transformer, cache: DecoderCache, last: Tensor) -> Any:
    """(log P(next token) (N, V), the cache after the step) through the compiled `function`."""
    t0, N = cache.length, last.size(0)
    cache = cache.with_room(t0 + 1)
    history = cache.history
    assert history is not None  # a search's cache always has one (ModelStep makes it with room)
    if history.size(2) <= N:  # a spare row: fewer rows than room, always (N == R would be a compilation more)
        spare = history.new_empty(history.size(0), history.size(1), N + 1, *history.shape[3:])
        spare[:, :t0, :N] = history[:, :t0, :N]
        history = spare
    cross = tuple((layer.cross_k, layer.cross_v) for layer in cache.layers)
    mask = cache.src_mask
    n, _, S, _ = cross[0][0].shape
    if mask is None:  # an all-true mask, so that padded and unpadded batches share one graph
        mask = torch.ones(n, 1, 1, S, dtype=torch.bool, device=last.device)
    if S < MIN_SOURCE:  # masked positions up to MIN_SOURCE, kept in the cache for the batch's later steps
        cross = tuple((pad_source(k), pad_source(v)) for k, v in cross)
        mask = torch.nn.functional.pad(mask, (0, MIN_SOURCE - S), value=False)
    log_probs, new = function(model, last, history, cross, mask, t0)
    history[:, t0, :N] = new
    return log_probs, DecoderCache(layer_views(history, N, list(cross)), mask, t0 + 1, history)


def pad_source(x: Tensor) -> Tensor:
    """Keys or values (n, H, S, d_k) of a source shorter than MIN_SOURCE, zero-padded to MIN_SOURCE positions."""
    return torch.nn.functional.pad(x, (0, 0, 0, MIN_SOURCE - x.size(2)))
