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

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import BOS, PAD
from mtkit.model.cache import LayerCache
from mtkit.model.transformer import DecoderLayer, Transformer

WINDOW = 16  # the positions a step attends over are a multiple of this (fewer shapes for a compiler to meet)

# static_states' signature: (model, tokens, position, history, cross, src_mask, span) -> states; compiled or not.
StatesFn = Callable[[Transformer, Tensor, Tensor, Tensor, list[tuple[Tensor, Tensor]], Tensor | None, int], Tensor]
# static_best's: static_states' arguments, then the output layer's weight and bias -> (top (N,), token (N,)).
BestFn = Callable[
    [Transformer, Tensor, Tensor, Tensor, list[tuple[Tensor, Tensor]], Tensor | None, int, Tensor, Tensor | None],
    tuple[Tensor, Tensor],
]


def window(position: int, capacity: int) -> int:
    """The positions a step at `position` attends over: the next multiple of WINDOW after it, at most `capacity`."""
    return min(capacity, (position // WINDOW + 1) * WINDOW)


def static_states(
    model: Transformer,
    tokens: Tensor,
    position: Tensor,
    history: Tensor,
    cross: list[tuple[Tensor, Tensor]],
    src_mask: Tensor | None,
    span: int,
) -> Tensor:
    """The decoder's last states (N, d_model) for `tokens` (N,) at `position` (a 0-d long tensor), their keys and
    values written into `history` (2L, C, R, H, d_k) at that position, attention over its first `span` positions.

    `cross`: each layer's cross-attention keys/values (n, H, S, d_k); `src_mask` (n, 1, 1, S) or None.
    """
    N = tokens.size(0)
    embed = model.tgt_embed
    x = embed.table(tokens[:, None]) * embed.scale + embed.positions.pe.index_select(0, position)  # (N, 1, d)
    filled = (torch.arange(span, device=tokens.device) <= position)[None, None, None, :]  # (1, 1, 1, span)
    at = position.view(1)
    for i, (layer, (cross_k, cross_v)) in enumerate(zip(model.decoder, cross)):
        assert isinstance(layer, DecoderLayer)
        keys, values = history[2 * i, :, :N], history[2 * i + 1, :, :N]  # (C, N, H, d_k) views
        q, k, v = layer.self_attn.project_qkv(layer.res_self.before(x))  # (N, H, 1, d_k)
        keys.index_copy_(0, at, k.permute(2, 0, 1, 3))
        values.index_copy_(0, at, v.permute(2, 0, 1, 3))
        k, v = keys[:span].permute(1, 2, 0, 3), values[:span].permute(1, 2, 0, 3)  # (N, H, span, d_k)
        x = layer.res_self.after(x, layer.self_attn.attend(q, k, v, filled))
        memory = LayerCache(keys, values, cross_k, cross_v)
        x = layer.res_cross.after(x, layer.attend_memory(layer.res_cross.before(x), memory, src_mask))
        x = layer.res_ffn.after(x, layer.ffn(layer.res_ffn.before(x)))
    states: Tensor = model.decoder_norm(x)
    return states[:, 0]


def static_best(
    model: Transformer,
    tokens: Tensor,
    position: Tensor,
    history: Tensor,
    cross: list[tuple[Tensor, Tensor]],
    src_mask: Tensor | None,
    span: int,
    weight: Tensor,
    bias: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """`static_states`, then the output layer (`weight` (K, d_model) and `bias` (K,): a shortlist's rows or the whole
    vocabulary's) and its log-softmax in fp32: each row's best column that is not PAD or BOS, and its log-probability
    (N,) each, as greedy search takes them from `Step.log_probs` (mtkit/decode/beam.py), in one function a compiler
    can take whole."""
    states = static_states(model, tokens, position, history, cross, src_mask, span)
    lprobs = torch.log_softmax(F.linear(states.to(weight.dtype), weight, bias), dim=-1, dtype=torch.float32)
    lprobs[:, PAD] = -math.inf
    lprobs[:, BOS] = -math.inf
    top, token = lprobs.max(dim=-1)
    return top, token
