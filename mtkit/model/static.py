"""One decoder step over a static key/value cache: the same shapes at every step, so a compiler traces it once.

Not in the paper: an engineering form of section 3.1's decoder for incremental decoding. `Transformer.decode_states`
attends over exactly the positions decoded so far, so every step has a new shape; here the step attends over a
fixed `window` of the cache (a bucket of positions, see `window`) and masks the positions not yet written, as
Transformers' StaticCache and CTranslate2 do. The position is a tensor, not a Python int, so a traced step does
not specialise on it: one trace serves every step of a window. The masked positions still enter attention's second
product with weight 0, so the cache must hold finite values there (mtkit/decode/step.py's `StaticStep` zeroes them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from mtkit.config import BOS, EOS, PAD
from mtkit.model.cache import LayerCache
from mtkit.model.linear import Rows
from mtkit.model.transformer import DecoderLayer, Transformer

WINDOW = 16  # the positions a step attends over are a multiple of this (fewer shapes for a compiler to meet)


@dataclass(frozen=True)
class StaticCache:
    """What a step over the static cache reads and writes, besides its tokens and position: `history` (2L, C, R, H,
    d_k), every layer's self-attention keys and values (mtkit/model/cache.py's `DecoderCache.history`); `cross`,
    each layer's cross-attention keys/values (n, H, S, d_k); `src_mask` (n, 1, 1, S) or None; `span`, the positions
    attention reads (`window`)."""

    history: Tensor
    cross: list[tuple[Tensor, Tensor]]
    src_mask: Tensor | None
    span: int


# static_run's signature: (model, tokens, position, cache, the output layer's rows to score, the columns' token ids,
# the log-probability so far, where to stop) -> (the columns picked at each position (C,), the position reached, the
# log-probability, the cache written), or None from a compiled form that does not take the call.
RunFn = Callable[
    [Transformer, Tensor, Tensor, StaticCache, Rows, Tensor, Tensor, Tensor],
    tuple[Tensor, Tensor, Tensor, Tensor] | None,
]


def window(position: int, capacity: int) -> int:
    """The positions a step at `position` attends over: the next multiple of WINDOW after it, at most `capacity`."""
    return min(capacity, (position // WINDOW + 1) * WINDOW)


def static_states(
    model: Transformer, tokens: Tensor, position: Tensor, cache: StaticCache, written: list[Tensor] | None = None
) -> Tensor:
    """The decoder's last states (N, d_model) for `tokens` (N,) at `position` (a 0-d long tensor), their keys and
    values written into the cache's `history` at that position, attention over its first `span` positions.

    Given a list `written`, `history` is left as it is and each layer's keys and values (C, N, H, d_k), the position
    written, are appended to it as new tensors (a compiled loop's body may not write into what it carries).
    """
    history, span = cache.history, cache.span
    N = tokens.size(0)
    embed = model.tgt_embed
    x = embed.table(tokens[:, None]) * embed.scale + embed.positions.pe.index_select(0, position)  # (N, 1, d)
    filled = (torch.arange(span, device=tokens.device) <= position)[None, None, None, :]  # (1, 1, 1, span)
    at = position.view(1)
    for i, (layer, (cross_k, cross_v)) in enumerate(zip(model.decoder, cache.cross)):
        assert isinstance(layer, DecoderLayer)
        keys, values = history[2 * i, :, :N], history[2 * i + 1, :, :N]  # (C, N, H, d_k) views
        q, k, v = layer.self_attn.project_qkv(layer.res_self.before(x))  # (N, H, 1, d_k)
        k, v = k.permute(2, 0, 1, 3), v.permute(2, 0, 1, 3)  # (1, N, H, d_k)
        if written is None:
            keys.index_copy_(0, at, k)
            values.index_copy_(0, at, v)
        else:
            keys, values = keys.index_copy(0, at, k), values.index_copy(0, at, v)
            written += [keys, values]
        k, v = keys[:span].permute(1, 2, 0, 3), values[:span].permute(1, 2, 0, 3)  # (N, H, span, d_k)
        x = layer.res_self.after(x, layer.self_attn.attend(q, k, v, filled))
        memory = LayerCache(keys, values, cross_k, cross_v)
        x = layer.res_cross.after(x, layer.attend_memory(layer.res_cross.before(x), memory, cache.src_mask))
        x = layer.res_ffn.after(x, layer.ffn(layer.res_ffn.before(x)))
    states: Tensor = model.decoder_norm(x)
    return states[:, 0]


def best_column(states: Tensor, rows: Rows) -> tuple[Tensor, Tensor]:
    """The output layer's `rows` (a shortlist's rows or the whole vocabulary's: K of them) over `states` (N,
    d_model) and its log-softmax in fp32: each row's best column that is not PAD or BOS and its log-probability,
    (N,) each, as greedy search takes them from `Step.log_probs` (mtkit/decode/beam.py)."""
    lprobs = torch.log_softmax(rows(states), dim=-1, dtype=torch.float32)
    columns = torch.arange(lprobs.size(1), device=lprobs.device)  # a mask, not a tensor constant: a compiled loop's
    never = (columns == PAD) | (columns == BOS)  # body takes no constants
    top, column = lprobs.masked_fill(never, -math.inf).max(dim=-1)
    return top, column


def static_run(
    model: Transformer,
    tokens: Tensor,
    position: Tensor,
    cache: StaticCache,
    rows: Rows,
    ids: Tensor,
    logp: Tensor,
    stop: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Greedy search's steps for one sentence (one row: `tokens` (1,), the cache's `history` (2L, C, 1, H, d_k))
    from `position` on, in one function a compiler can take whole, loop and all (no Python between its steps): at
    each position the decoder step over the static cache and `best_column` over `rows`, the log-probability so far
    `logp` (1,) plus the step's, the next step fed the token of the column picked (`ids` (K,): each column's token
    id), until a step picks EOS, the log-probability stops being finite, or the position reaches `stop` (a 0-d long,
    at most the cache's `span`: the steps share one window). The same sums in the same order as greedy search's own loop
    (mtkit/decode/beam.py), so the same outputs and scores as its steps over this cache, bit for bit.

    Returns the columns picked (C,) (those at the positions run; zeros elsewhere), the position reached (0-d), the
    log-probability (1,), and the cache with the positions run written: a new tensor, `history` as it was (the loop
    carries it from step to step and may not write into its input). The loop is `torch.while_loop` (a prototype in
    torch 2.13), which runs its body in Python when called eagerly and which torch.export keeps as one loop."""

    def more(t: Tensor, last: Tensor, total: Tensor, out: Tensor, history: Tensor, ended: Tensor) -> Tensor:
        return (t < stop) & ~ended

    def step(
        t: Tensor, last: Tensor, total: Tensor, out: Tensor, history: Tensor, ended: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        written: list[Tensor] = []
        top, column = best_column(static_states(model, last, t, replace(cache, history=history), written), rows)
        total = total + top
        out = out.index_copy(0, t.view(1), column)
        ended = (column.eq(EOS) | ~torch.isfinite(total)).any()
        return t + 1, ids.index_select(0, column), total, out, torch.stack(written), ended

    picked, ended = tokens.new_zeros(cache.history.size(1)), position.new_zeros((), dtype=torch.bool)
    start = (position, tokens, logp, picked, cache.history, ended)
    t, _, total, out, history, _ = torch.while_loop(more, step, start)  # type: ignore[no-untyped-call]
    return out, t, total, history
