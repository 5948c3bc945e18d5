"""The Transformer of "Attention Is All You Need" (Vaswani et al. 2017), section 3.

Shapes: B batch, S source length, T target length, H heads, d_k = d_model / H.
Padding is token id 0 and always on the right. Incremental decoding keeps its state in an
explicit `DecoderCache` (mtkit/model/cache.py) that goes into `decode_step` and comes back out
of it. The CPU kernels behind the products, attention and dropout live in mtkit/kernels; which
of them a layer uses is decided once by mtkit.runtime and set on the layer (`runtime.apply`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.config import PAD, ModelConfig
from mtkit.kernels.attention import attention_math, fused_attention, math_attention_is_faster
from mtkit.model.cache import DecoderCache, LayerCache, append_history
from mtkit.model.dropout import Dropout
from mtkit.model.linear import Linear, TiedOutput, linear_relu


class PositionalEncoding(nn.Module):
    """Section 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same)."""

    pe: Tensor

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        # Computed on the CPU whatever the default device: under `with torch.device("meta")` (a model built
        # without storage, mtkit/checkpoint.py) torch.arange runs its meta decomposition, whose first call
        # imports sympy and torch._dynamo: tens of MiB of RSS and seconds for every model loaded.
        cpu = torch.device("cpu")
        pos = torch.arange(max_positions, dtype=torch.float32, device=cpu).unsqueeze(1)  # (P, 1)
        steps = torch.arange(0, d_model, 2, dtype=torch.float32, device=cpu)
        inv_freq = torch.exp(steps * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_positions, d_model, device=cpu)
        pe[:, 0::2] = torch.sin(pos * inv_freq)
        pe[:, 1::2] = torch.cos(pos * inv_freq)
        self.register_buffer("pe", pe.to(torch.get_default_device()), persistent=False)  # (P, d_model); never saved

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
    """Section 3.2.2: the h heads' d_k-wide slices of a projection, side by side."""
    B, T, d = x.shape
    return x.view(B, T, heads, d // heads).transpose(1, 2)  # (B, H, T, d_k)


def merge_heads(x: Tensor) -> Tensor:
    """Section 3.2.2: Concat(head_1, ..., head_h)."""
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


class FeedForward(nn.Module):
    """Section 3.3, Eq. (2): FFN(x) = max(0, x W_1 + b_1) W_2 + b_2.

    `swish` replaces max(0, .) with x sigmoid(x) (SiLU), the activation of OPUS-MT's Marian models.
    """

    def __init__(self, d_model: int, d_ff: int, activation_dropout: float, activation: str = "relu"):
        super().__init__()
        self.w_1, self.w_2 = Linear(d_model, d_ff), Linear(d_ff, d_model)
        self.dropout = Dropout(activation_dropout)
        self.swish = activation == "swish"

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.silu(self.w_1(x)) if self.swish else linear_relu(self.w_1, x)
        out: Tensor = self.w_2(self.dropout(hidden))
        return out


class Residual(nn.Module):
    """Sections 3.1 and 5.4: LayerNorm(x + Dropout(Sublayer(x))) (post-norm, the paper's default).

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
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout, cfg.activation)
        self.res_attn = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.res_ffn = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        q, k, v = self.self_attn.project_qkv(self.res_attn.before(x))
        x = self.res_attn.after(x, self.self_attn.attend(q, k, v, src_mask))
        return self.res_ffn.after(x, self.ffn(self.res_ffn.before(x)))


class DecoderLayer(nn.Module):
    """Section 3.1, decoder: masked self-attention, attention over the encoder, feed-forward."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, self_attention=True)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, self_attention=False)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout, cfg.activation)
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
    """Section 3.1: the encoder's output, memory (B, S, d_model), and its padding mask."""

    memory: Tensor
    src_mask: Tensor | None  # (B, 1, 1, S) bool, True = real token; None = no padding


class Transformer(nn.Module):
    """Figure 1: encoder and decoder stacks, shared embeddings (3.4), output softmax."""

    final_logits_bias: Tensor  # (V,), with cfg.output_bias only

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
            TiedOutput(tgt_table)
            if cfg.share_embeddings != "none"
            else Linear(cfg.d_model, cfg.target_vocab_size, bias=False)
        )
        if cfg.output_bias:  # Marian's final_logits_bias: saved and loaded, never trained
            self.register_buffer("final_logits_bias", torch.zeros(cfg.target_vocab_size))
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
        # sync, so only the CPU (where it is free) checks; other devices always get the mask, and
        # so does a step torch.compile traces (a data-dependent branch would split its graph).
        has_pad = bool(pad.any()) if src.device.type == "cpu" and not torch.compiler.is_compiling() else True
        src_mask = (~pad)[:, None, None, :] if has_pad else None  # (B, 1, 1, S)
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return Encoded(self.encoder_norm(x), src_mask)

    def init_cache(self, encoded: Encoded, capacity: int = 0) -> DecoderCache:
        """Cross-attention keys/values once per sentence; room for `capacity` target positions
        (the cache grows beyond it when needed; 0 suits teacher forcing)."""
        return DecoderCache.start(self.cross_kv(encoded.memory), encoded.src_mask, capacity)

    def cross_kv(self, memory: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Each decoder layer's cross-attention keys and values (B, H, S, d_k) of the encoder's `memory`."""
        cross_kv = []
        for layer in self.decoder:
            assert isinstance(layer, DecoderLayer)
            # Contiguous once here, or every step's attention copies these views of the projection.
            k, v = (x.contiguous() for x in layer.cross_attn.project_kv(memory))  # (B, H, S, d_k)
            cross_kv.append((k, v))
        return cross_kv

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
        logits: Tensor = self.output_proj(x)  # (B, T, V)
        if self.cfg.output_bias:
            logits = logits + self.final_logits_bias.to(logits.dtype)
        return logits

    def decode(self, tgt_in: Tensor, encoded: Encoded) -> Tensor:
        """Teacher forcing: decoder inputs (B, T) -> logits (B, T, V) at every position at once.

        Targets are right-padded, so the causal mask alone keeps padding out of every real
        position; logits at padding positions are ignored by the loss.
        """
        logits, _ = self.decode_step(tgt_in, self.init_cache(encoded))
        return logits

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(tgt_in, self.encode(src))
