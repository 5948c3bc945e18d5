"""The Transformer of "Attention Is All You Need" (Vaswani et al. 2017), section 3.

Shapes: B batch, S source length, T target length, H heads, d_k = d_model / H.
Padding is token id 0 and always on the right. Incremental decoding keeps its state in an
explicit `DecoderCache` that goes into `decode_step` and comes back out of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.config import PAD, ModelConfig
from mtkit.model.dropout import Dropout, dropout
from mtkit.model.linear import Linear, PackedWeight, linear, linear_relu, pack


class PositionalEncoding(nn.Module):
    """Section 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same)."""

    pe: Tensor

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        pos = torch.arange(max_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
        inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_positions, d_model)
        pe[:, 0::2] = torch.sin(pos * inv_freq)
        pe[:, 1::2] = torch.cos(pos * inv_freq)
        self.register_buffer("pe", pe, persistent=False)  # (P, d_model); rebuilt, never saved

    def forward(self, length: int, offset: int = 0) -> Tensor:
        if offset + length > self.pe.size(0):
            raise ValueError(f"position {offset + length - 1} is beyond max_positions={self.pe.size(0)}")
        return self.pe[offset : offset + length]  # (T, d_model)


class Embedding(nn.Module):
    """Section 3.4: token embedding times sqrt(d_model), plus positions; dropout on the sum (5.4)."""

    def __init__(self, table: nn.Embedding, positions: PositionalEncoding, dropout: float):
        super().__init__()
        self.table, self.positions = table, positions
        self.scale = math.sqrt(table.embedding_dim)
        self.dropout = Dropout(dropout)

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        x: Tensor = self.table(tokens) * self.scale + self.positions(tokens.size(1), offset)  # (B, T, d_model)
        out: Tensor = self.dropout(x)
        return out


def split_heads(x: Tensor, heads: int) -> Tensor:
    B, T, d = x.shape
    return x.view(B, T, heads, d // heads).transpose(1, 2)  # (B, H, T, d_k)


def merge_heads(x: Tensor) -> Tensor:
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, d_model)


class MultiHeadAttention(nn.Module):
    """Section 3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, each head Eq. (1).

    Self-attention projects Q, K, V with one fused matrix; cross-attention projects the
    encoder memory to K, V once per sentence (`project_kv`), and decoding reuses them.
    """

    def __init__(self, d_model: int, heads: int, dropout: float, self_attention: bool):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.self_attention = self_attention
        if self_attention:
            self.qkv_proj = Linear(d_model, 3 * d_model)  # W^Q, W^K, W^V side by side
        else:
            self.q_proj = Linear(d_model, d_model)
            self.kv_proj = Linear(d_model, 2 * d_model)
        self.out_proj = Linear(d_model, d_model)  # W^O

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def project_q(self, x: Tensor) -> Tensor:
        return split_heads(self.q_proj(x), self.heads)  # (B, H, T, d_k)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self.kv_proj(memory).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)  # (B, H, S, d_k) each

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        """Eq. (1), softmax(QK^T / sqrt(d_k)) V, then W^O."""
        p = self.dropout if self.training else 0.0
        if math_attention_is_faster(q, k):
            out = attention_math(q, k, v, mask, causal, p)
        else:
            out = fused_attention(q, k, v, mask, causal, p)
        projected: Tensor = self.out_proj(merge_heads(out))  # (B, T, d_model)
        return projected


def math_attention_is_faster(q: Tensor, k: Tensor) -> bool:
    """Whether `attention_math` beats PyTorch's fused kernel (flash attention) here: on the CPU, by shape and dtype.

    Measured on a 2-core Zen 4 EPYC (`python bench/attention_speed.py`, training cases forward + backward
    with 4 and 8 heads); the fused CPU kernel is tiled for long blocks of queries and keys, and
    translation's are short.
    - Training in bf16 or fp16 (autocast): up to 128 positions. The fused kernel's backward pass in bf16
      is slow on the CPU: 135 ms against 31 for 290 sentences of 14 tokens with 8 heads (`base` on
      Multi30k), 4.3-4.5x at 14 tokens, 1.7-1.8x at 128; at 250 the fused kernel is even or ahead (0.8-1.0x).
    - Training in fp32: never. The math path measured 1.1-2.0x per call below 32 tokens (0.6-0.9x from 32),
      but whole `small` fp32 updates on Multi30k did not gain (2,703 and 2,728 target tokens/s against
      2,840 and 2,689, alternating) and peak RSS rose by 80-150 MB, past fairseq's.
    - No gradient: query blocks of at most 16 (a decoding step's one query per row, a sentence's beams
      against its source, an encoder's 16-token sentences: 1.0-4.6x in fp32), and in bf16 or fp16 any
      block of at most 64 positions (1.7-3.7x; 0.5-1.4x at 128).
    Other devices always take the fused kernel.
    """
    if q.device.type != "cpu":
        return False
    longest = max(q.size(-2), k.size(-2))
    low = q.dtype in (torch.bfloat16, torch.float16)
    if torch.is_grad_enabled():
        return low and longest <= 128
    return q.size(-2) <= 16 or (low and longest <= 64)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """PyTorch's fused attention (`scaled_dot_product_attention`), on a CUDA GPU without its cuDNN kernel.

    On a Hopper GPU PyTorch prefers cuDNN's kernel in bf16 and fp16, and cuDNN builds a plan for every
    new shape. Translation meets new shapes all the time (every batch's lengths in training, one more
    key at every decoding step), and the plans cost far more than the attention. On an H200 (torch 2.11,
    `python bench/cuda_attention.py`): a bf16 decoding step's attention 129 ms with cuDNN's kernel allowed,
    0.12 without; a training batch's, forward and backward, 276 ms and 0.53. Whole bf16 `base` training
    updates of 4,096 tokens took 0.31 s with it allowed, 0.066 without (fp32: 0.05); a bf16 beam search of
    1,000 sentences 12.6 s and 1.4. The flash and memory-efficient kernels need no plan. A caller who switched
    cuDNN's kernel off keeps it off.
    """
    if q.device.type != "cuda" or not torch.backends.cuda.cudnn_sdp_enabled():  # type: ignore[no-untyped-call]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    torch.backends.cuda.enable_cudnn_sdp(False)  # 1.5 us, against ~30 for torch.nn.attention.sdpa_kernel
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


def attention_math(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float = 0.0
) -> Tensor:
    """Eq. (1) as two batched matrix products around a softmax (`math_attention_is_faster` says when).

    The softmax is float32 whatever q and k are. In training the scores are float32 too, as the fused
    kernel keeps them: bf16 or fp16 q and k are widened for the first product, which runs outside
    autocast (rounding the scores to bf16 first, as fairseq's attention does, measured 1.3-1.6x faster
    and is not the fused kernel's arithmetic). The probabilities are narrowed to v's type for the second
    product. `causal` masks a square block (training); a block of queries after cached positions comes
    with its own `mask`. `dropout_p` drops attention probabilities (training only).
    """
    scale = q.size(-1) ** -0.5
    if torch.is_grad_enabled() and q.dtype in (torch.bfloat16, torch.float16):
        with torch.autocast(q.device.type, enabled=False):
            scores = torch.matmul(q.float() * scale, k.float().transpose(-1, -2))  # (B, H, T, S)
    else:
        scores = torch.matmul(q * scale, k.transpose(-1, -2))
    if causal:
        T, S = scores.shape[-2:]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = scores.softmax(-1) if torch.is_grad_enabled() else softmax(scores)
    weights = dropout(weights, dropout_p, dropout_p > 0.0)
    return torch.matmul(weights.to(v.dtype), v)  # (B, H, T, d_k)


def softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dimension, in fp32 at least (bf16 and fp16 scores are widened first), without autograd.

    PyTorch's CPU softmax is slow on rows shorter than 16, its AVX-512 width in fp32 (9 ns an element on
    rows of 12, under 1 ns on rows of 32), and a decoding step's rows are short: a self-attention's as long
    as the output so far, a cross-attention's as the source (13 tokens on average in Multi30k). For those
    rows it is computed here as max, exp, sum and divide, each one pass over all rows at once: 4,096 rows
    of 12 took 433 us as torch.softmax and 86 us so on a 2-core Zen 4 EPYC (rows of 16 and longer:
    torch.softmax is the faster, 51 us against 93 for rows of 16). Its in-place passes leave nothing
    for a backward pass: under autograd `attention_math` calls torch's softmax instead.
    """
    x = scores.float() if scores.dtype in (torch.bfloat16, torch.float16) else scores
    if x.size(-1) >= 16 or x.device.type != "cpu":
        return x.softmax(-1)
    weights = (x - x.amax(-1, keepdim=True)).exp_()
    return weights.div_(weights.sum(-1, keepdim=True))


class FeedForward(nn.Module):
    """Section 3.3, Eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, d_model: int, d_ff: int, activation_dropout: float):
        super().__init__()
        self.w_1, self.w_2 = Linear(d_model, d_ff), Linear(d_ff, d_model)
        self.dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.w_2(self.dropout(linear_relu(self.w_1, x)))
        return out


class Residual(nn.Module):
    """Section 5.4: LayerNorm(x + Dropout(Sublayer(x))) (post-norm, the paper's default).

    Pre-norm (x + Dropout(Sublayer(LayerNorm(x)))) is an option: `before` normalizes the
    sub-layer's input only in pre-norm, `after` adds the residual and normalizes in post-norm.
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), Dropout(dropout), pre_norm

    def before(self, x: Tensor) -> Tensor:
        normed: Tensor = self.norm(x) if self.pre_norm else x
        return normed

    def after(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y: Tensor = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


class EncoderLayer(nn.Module):
    """Section 3.1, encoder: self-attention, then the feed-forward network, each residual."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, self_attention=True)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout)
        self.res_attn = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.res_ffn = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        q, k, v = self.self_attn.project_qkv(self.res_attn.before(x))
        x = self.res_attn.after(x, self.self_attn.attend(q, k, v, src_mask))
        return self.res_ffn.after(x, self.ffn(self.res_ffn.before(x)))


@dataclass(frozen=True)
class LayerCache:
    """One decoder layer's keys and values.

    self_k, self_v: (C, N, H, d_k), time first, with room for C positions of which the cache's
    `length` are filled; time first keeps the filled part of a row set one block, so a step
    writes one slice (no torch.cat per step). During a search they are views of the cache's
    `history` (see DecoderCache).
    cross_k, cross_v: (n, H, S, d_k), one per sentence, shared by its N / n rows (beams).
    """

    self_k: Tensor
    self_v: Tensor
    cross_k: Tensor
    cross_v: Tensor


def append_history(buffer: Tensor, new: Tensor, t0: int) -> Tensor:
    """Write keys or values (N, H, T, d_k) at positions t0.. of a time-first buffer (C, N, H, d_k).

    A buffer without room grows to twice its size (amortised O(1) per step); an empty one at
    t0 = 0 (teacher forcing) becomes a view of `new`, so training copies nothing.
    """
    T = new.size(2)
    new = new.permute(2, 0, 1, 3)  # (T, N, H, d_k)
    if t0 + T <= buffer.size(0):
        buffer[t0 : t0 + T] = new
        return buffer
    if t0 == 0:
        return new
    grown = buffer.new_empty(max(2 * buffer.size(0), t0 + T), *buffer.shape[1:])
    grown[:t0] = buffer[:t0]
    grown[t0 : t0 + T] = new
    return grown


def moved(index: Tensor) -> Tensor | None:
    """The positions i where index[i] != i (what an in-place reorder must copy); None when there are none."""
    changed = index.ne(torch.arange(index.numel(), device=index.device)).nonzero().squeeze(1)
    return changed if changed.numel() else None


def _take(buffer: Tensor, index: Tensor, changed: Tensor | None) -> Tensor:
    """buffer's entries `index` along dim 0.

    In place where it can be: the first index.numel() entries are kept and only the `changed`
    ones copied (a sentence that keeps its place costs nothing). All sources are read before
    any is written, so sources and destinations may overlap. A buffer with too few entries, or
    one autograd tracks, gets a new tensor instead.
    """
    n = index.numel()
    if (buffer.requires_grad and torch.is_grad_enabled()) or n > buffer.size(0):
        return buffer.index_select(0, index)
    kept = buffer[:n]
    if changed is not None:
        kept.index_copy_(0, changed, buffer[index[changed]])
    return kept


@dataclass(frozen=True)
class DecoderCache:
    """Everything incremental decoding carries between steps, returned anew by each step.

    A cache is used once: `decode_step` and `reorder` write into its buffers, so only the
    cache they return is valid afterwards.

    history: (2L, C, R, H, d_k), every layer's self-attention keys and values (self_k, self_v of
    layer i are history[2i, :, :N] and history[2i + 1, :, :N]) with room for C positions and R >= N
    rows; None until the cache is made with room (`init_cache(capacity=...)`) or first reordered, and
    always None under autograd. One buffer lets a reorder move the rows of all layers in two operations
    (`move_rows`).
    """

    layers: tuple[LayerCache, ...]
    src_mask: Tensor | None  # (n, 1, 1, S) bool, True = real token; None = no padding
    length: int  # target positions decoded so far
    history: Tensor | None = None

    @property
    def beams(self) -> int:
        """Rows per sentence: the rows of a sentence are adjacent and share its cross-attention keys/values."""
        first = self.layers[0]
        return first.self_k.size(1) // first.cross_k.size(0)

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> DecoderCache:
        """Select (and repeat) rows, e.g. to follow the surviving beams; the one way a cache is reordered.

        Without `sentences`, rows may come from any sentence and each new row gets its own copy
        of its sentence's cross-attention keys/values. With `sentences` (the kept sentences, in
        their new order), rows are that many equal groups, each group within its sentence (the
        surviving beams of the sentences still searching): cross-attention keys/values stay one
        per sentence. Rows and sentences that keep their place are not copied, so a search that
        keeps beams in their slots and fills the places of finished sentences from the end
        (mtkit/decode/beam.py) copies little per step.
        """
        cross = torch.div(rows, self.beams, rounding_mode="floor") if sentences is None else sentences
        changed = moved(cross)
        cross_kv = [(_take(c.cross_k, cross, changed), _take(c.cross_v, cross, changed)) for c in self.layers]
        mask = None if self.src_mask is None else self.src_mask[cross]
        if torch.is_grad_enabled():  # autograd: new tensors of their own (two views of one buffer confuse it)
            layers = [
                LayerCache(
                    c.self_k[: self.length].index_select(1, rows), c.self_v[: self.length].index_select(1, rows), *kv
                )
                for c, kv in zip(self.layers, cross_kv)
            ]
            return DecoderCache(tuple(layers), mask, self.length)
        history = self.history
        if history is not None and rows.numel() <= history.size(2):
            changed = moved(rows)
            if changed is not None and self.length:
                move_rows(history, rows, changed, self.length)
        else:
            history = self.gather_history(rows)
        return DecoderCache(layer_views(history, rows.numel(), cross_kv), mask, self.length, history)

    def gather_history(self, rows: Tensor) -> Tensor:
        """A new history holding `rows` of every layer's filled positions, with the same room."""
        first = self.layers[0].self_k
        capacity = max(first.size(0), self.length)
        history = first.new_empty(2 * len(self.layers), capacity, rows.numel(), *first.shape[2:])
        for i, c in enumerate(self.layers):
            for j, buffer in enumerate((c.self_k, c.self_v)):
                torch.index_select(buffer[: self.length], 1, rows, out=history[2 * i + j, : self.length])
        return history

    def with_room(self, positions: int) -> DecoderCache:
        """This cache with room for at least `positions` target positions (twice its room when that is more)."""
        history = self.history
        if history is None or positions <= history.size(1):
            return self
        rows = self.layers[0].self_k.size(1)
        grown = history.new_empty(history.size(0), max(2 * history.size(1), positions), rows, *history.shape[3:])
        grown[:, : self.length] = history[:, : self.length, :rows]
        cross_kv = [(c.cross_k, c.cross_v) for c in self.layers]
        return DecoderCache(layer_views(grown, rows, cross_kv), self.src_mask, self.length, grown)


def move_rows(history: Tensor, rows: Tensor, changed: Tensor, length: int) -> None:
    """history[:, :length, i] = history[:, :length, rows[i]] for the `changed` rows i, in place.

    As one gather and one scatter of whole (H * d_k) rows of the buffer seen as a matrix, for all layers
    at once, instead of indexing each layer's (length, N, H, d_k) keys and values, which reads them element
    by element: one tensor's reorder of 392 rows x 8 positions, 29% of them moving, took 138 us indexed and
    68 us as rows on a 2-core Zen 4 EPYC; over a beam-4 decode of the Multi30k test set, 214 ms against 253.
    Sources are read before any row is written.
    """
    blocks, capacity, room = history.shape[:3]
    matrix = history.view(blocks * capacity * room, -1)  # (2L * C * R, H * d_k)
    block, position = (torch.arange(n, device=rows.device) for n in (blocks, length))
    starts = ((block[:, None] * capacity + position) * room).view(-1, 1)  # (2L * length, 1): each position's row 0
    matrix.index_copy_(0, (starts + changed).view(-1), matrix.index_select(0, (starts + rows[changed]).view(-1)))


def layer_views(history: Tensor, rows: int, cross_kv: list[tuple[Tensor, Tensor]]) -> tuple[LayerCache, ...]:
    """Each layer's cache: its self-attention keys/values as views of `rows` rows of `history`."""
    return tuple(
        LayerCache(history[2 * i, :, :rows], history[2 * i + 1, :, :rows], k, v) for i, (k, v) in enumerate(cross_kv)
    )


class DecoderLayer(nn.Module):
    """Section 3.1, decoder: masked self-attention, attention over the encoder, feed-forward."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, self_attention=True)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, self_attention=False)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout)
        self.res_self = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.res_cross = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.res_ffn = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(
        self, x: Tensor, cache: LayerCache, t0: int, src_mask: Tensor | None, self_mask: Tensor | None, causal: bool
    ) -> tuple[Tensor, LayerCache]:
        q, k, v = self.self_attn.project_qkv(self.res_self.before(x))
        self_k, self_v = append_history(cache.self_k, k, t0), append_history(cache.self_v, v, t0)
        t = t0 + x.size(1)
        k, v = self_k[:t].permute(1, 2, 0, 3), self_v[:t].permute(1, 2, 0, 3)  # (N, H, t, d_k), strided views
        x = self.res_self.after(x, self.self_attn.attend(q, k, v, self_mask, causal))
        x = self.res_cross.after(x, self.attend_memory(self.res_cross.before(x), cache, src_mask))
        x = self.res_ffn.after(x, self.ffn(self.res_ffn.before(x)))
        return x, LayerCache(self_k, self_v, cache.cross_k, cache.cross_v)

    def attend_memory(self, x: Tensor, cache: LayerCache, src_mask: Tensor | None) -> Tensor:
        """Cross-attention where a sentence's N / n rows (its beams) share one copy of its keys/values:
        the rows' queries line up as one longer query block of the sentence."""
        N, T, d = x.shape
        n = cache.cross_k.size(0)
        q = self.cross_attn.project_q(x.reshape(n, (N // n) * T, d))  # (n, H, beams * T, d_k)
        return self.cross_attn.attend(q, cache.cross_k, cache.cross_v, src_mask).reshape(N, T, d)


@dataclass(frozen=True)
class Encoded:
    """The encoder's output: memory (B, S, d_model) and its padding mask."""

    memory: Tensor
    src_mask: Tensor | None  # (B, 1, 1, S) bool, True = real token; None = no padding


class Transformer(nn.Module):
    """Figure 1: encoder and decoder stacks, shared embeddings (3.4), output softmax."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        positions = PositionalEncoding(cfg.d_model, cfg.max_positions)
        src_table = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD)
        tgt_table = (
            src_table
            if cfg.share_embeddings == "all"
            else nn.Embedding(cfg.target_vocab_size, cfg.d_model, padding_idx=PAD)
        )
        self.src_embed = Embedding(src_table, positions, cfg.dropout)
        self.tgt_embed = Embedding(tgt_table, positions, cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        # Pre-norm leaves each stack's output unnormalised, so it needs a final LayerNorm.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.output_proj = (
            None if cfg.share_embeddings != "none" else Linear(cfg.d_model, cfg.target_vocab_size, bias=False)
        )
        self.output_packed: PackedWeight | None = None  # the tied output matrix in oneDNN's layout (`prepack`)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform matrices, zero biases; embeddings N(0, d_model^-0.5) as tensor2tensor does."""
        for name, p in self.named_parameters():
            if p.dim() > 1 and "table" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        for table in dict.fromkeys((self.src_embed.table, self.tgt_embed.table)):  # ordered: same seed, same init
            nn.init.normal_(table.weight, mean=0.0, std=self.cfg.d_model**-0.5)
            with torch.no_grad():
                table.weight[PAD].zero_()

    def encode(self, src: Tensor) -> Encoded:
        """Source ids (B, S), right-padded with 0 -> memory (B, S, d_model)."""
        pad = src.eq(PAD)
        # Without padding, SDPA may take its unmasked fast path. Finding out costs a device
        # sync, so only the CPU (where it is free) checks; other devices always get the mask.
        has_pad = bool(pad.any()) if src.device.type == "cpu" else True
        src_mask = (~pad)[:, None, None, :] if has_pad else None  # (B, 1, 1, S)
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return Encoded(self.encoder_norm(x), src_mask)

    def init_cache(self, encoded: Encoded, capacity: int = 0) -> DecoderCache:
        """Cross-attention keys/values once per sentence; room for `capacity` target positions
        (the cache grows beyond it when needed; 0 suits teacher forcing)."""
        cross_kv = []
        for layer in self.decoder:
            assert isinstance(layer, DecoderLayer)
            # Contiguous once here, or every step's attention copies these views of the projection.
            k, v = (x.contiguous() for x in layer.cross_attn.project_kv(encoded.memory))  # (B, H, S, d_k)
            cross_kv.append((k, v))
        B, H, _, d_k = cross_kv[0][0].shape
        if capacity == 0 or torch.is_grad_enabled():
            # Teacher forcing: keys/values become views of their projections. Autograd: buffers of their own.
            empty = (capacity, B, H, d_k)
            layers = [LayerCache(k.new_empty(empty), k.new_empty(empty), k, v) for k, v in cross_kv]
            return DecoderCache(tuple(layers), encoded.src_mask, 0)
        history = cross_kv[0][0].new_empty(2 * len(cross_kv), capacity, B, H, d_k)  # (2L, C, B, H, d_k)
        return DecoderCache(layer_views(history, B, cross_kv), encoded.src_mask, 0, history)

    def decode_step(self, tgt: Tensor, cache: DecoderCache) -> tuple[Tensor, DecoderCache]:
        """Next target ids (N, T) after `cache.length` earlier ones -> logits (N, T, V), new cache."""
        states, cache = self.decode_states(tgt, cache)
        return self.project(states), cache

    def decode_states(self, tgt: Tensor, cache: DecoderCache) -> tuple[Tensor, DecoderCache]:
        """`decode_step` before the output projection: the decoder's last states (N, T, d_model), new cache."""
        T, t0 = tgt.size(1), cache.length
        cache = cache.with_room(t0 + T)
        # A query may see every earlier position: T == 1 needs no mask; a block that starts at
        # 0 is plain causal; a later block needs the offset (bottom-right aligned) mask.
        causal, self_mask = T > 1 and t0 == 0, None
        if T > 1 and t0 > 0:
            self_mask = torch.ones(T, t0 + T, dtype=torch.bool, device=tgt.device).tril(diagonal=t0)
        x = self.tgt_embed(tgt, offset=t0)
        new_layers = []
        for layer, layer_cache in zip(self.decoder, cache.layers):
            x, layer_cache = layer(x, layer_cache, t0, cache.src_mask, self_mask, causal)
            new_layers.append(layer_cache)
        states: Tensor = self.decoder_norm(x)
        return states, DecoderCache(tuple(new_layers), cache.src_mask, t0 + T, cache.history)

    def project(self, x: Tensor) -> Tensor:
        """Pre-softmax linear transformation, sharing the embedding matrix (3.4) unless untied."""
        if self.output_proj is not None:
            logits: Tensor = self.output_proj(x)
            return logits
        return linear(x, self.tgt_embed.table.weight, packed=self.output_packed)  # (B, T, V)

    def prepack(self) -> None:
        """Reorder weights of products into oneDNN's layout once, for inference on the CPU: every weight where
        fp32 products go through oneDNN, those measured faster so where MKL was kept (`pack` in
        mtkit/model/linear.py); elsewhere this does nothing.

        Costs a second copy of those weights; a later change of a weight (training, `to`) makes
        its copy unused, not wrong.
        """
        relu_after = {id(m.w_1) for m in self.modules() if isinstance(m, FeedForward)}  # Eq. (2)'s inner layer
        for module in self.modules():
            if isinstance(module, Linear):
                module.packed = pack(module.weight, module.bias is not None, id(module) in relu_after)
        if self.output_proj is None:
            self.output_packed = pack(self.tgt_embed.table.weight)

    def decode(self, tgt_in: Tensor, encoded: Encoded) -> Tensor:
        """Teacher forcing: decoder inputs (B, T) -> logits (B, T, V) at every position at once.

        Targets are right-padded, so the causal mask alone keeps padding out of every real
        position; logits at padding positions are ignored by the loss.
        """
        logits, _ = self.decode_step(tgt_in, self.init_cache(encoded))
        return logits

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(tgt_in, self.encode(src))
