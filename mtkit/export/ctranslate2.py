"""`mtkit export --format ctranslate2`: an mtkit model as a CTranslate2 directory (the CPU engine people deploy with).

The model is declared with CTranslate2's own `TransformerSpec` (its converters for fairseq and
OpenNMT-py do the same), so CTranslate2 checks that every weight is set and does the
quantization itself. What has to be right for CTranslate2 to compute what mtkit computes:

- Positions: mtkit's sinusoidal table interleaves sin and cos (PE(pos, 2i) = sin, 2i+1 = cos,
  section 3.5); CTranslate2's built-in table puts all sines first (it differs by up to 2.0),
  so mtkit's own table is written into the model, row p for position p from 0.
- Self-attention's fused Q, K, V rows and cross-attention's fused K, V rows are already in
  CTranslate2's fused layout (query, key, value stacked along the output dimension).
- Post-norm (pre-norm gets the final LayerNorms), ReLU, embeddings times sqrt(d_model), tied
  output projection, LayerNorm epsilon 1e-5 (PyTorch's; CTranslate2's default differs).
- Tokens: the vocabulary is the SentencePiece model's pieces in id order, so a CTranslate2
  token index is mtkit's id; the source gets EOS appended and the decoder starts from BOS.
  The tokenizer is copied beside the weights to tokenize with (`Tokenizer.files`): mtkit's SentencePiece model
  as `spm.model`; an OPUS-MT model's as `source.spm` and `target.spm`, as CTranslate2's own converter leaves
  them, with `marian-tokenizer.json` (its bundle, which `mtkit translate -m DIR` reads).

The directory itself is written by mtkit/export/target.py.
"""

from __future__ import annotations

import hashlib
import logging
import typing
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, UNK, ExportConfig
from mtkit.data.tokenizer import load_tokenizer
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.files import CT2_MODEL, TOKENIZER_FILES, VMAP
from mtkit.model.transformer import MultiHeadAttention, Transformer

logger = logging.getLogger(__name__)

# Every name this format may write (checked against a user's files in the target before any work).
FILES = (
    CT2_MODEL,
    "config.json",
    "shared_vocabulary.json",
    "source_vocabulary.json",
    "target_vocabulary.json",
    *TOKENIZER_FILES,
    "source.spm",
    "target.spm",
    VMAP,
)
MISSING_EXTRA = "exporting to CTranslate2 needs the ctranslate2 package; install it with: pip install 'mtkit[ct2]'."


def import_extra() -> Any:
    """The optional `ct2` extra, or one sentence that says how to install it."""
    try:
        import ctranslate2  # type: ignore[import-untyped]
        import ctranslate2.specs  # type: ignore[import-untyped]
    except ImportError:
        raise MtkitError(MISSING_EXTRA) from None
    return ctranslate2


def check(config: ExportConfig) -> None:
    """Every quantization CTranslate2 offers is accepted."""


def write(ckpt: dict[str, Any], source: Path, tmp: Path, config: ExportConfig) -> dict[str, Any]:
    """The CTranslate2 model of `ckpt` (validated, quantized) and its SentencePiece model, saved in `tmp`; returns
    what the export record adds (the vocabulary map's identity)."""
    model = typing.cast(Transformer, checkpoint.build_from(ckpt).float().eval())
    vocab = load_tokenizer(ckpt["vocab"])  # mtkit's SentencePiece model or an OPUS-MT tokenizer
    spec = ctranslate2_spec(model, vocab)
    try:
        spec.validate()
        spec.optimize(quantization=config.quantization)
    except ValueError as exc:  # CTranslate2 lists every unset or unsupported weight in one message
        raise MtkitError(f"CTranslate2 refused the model: {' '.join(str(exc).split())}") from None
    spec.save(str(tmp))
    for name, data in vocab.files().items():
        (tmp / name).write_bytes(data)
    added = {}
    if ckpt.get("shortlist") is not None:
        added["vmap"] = write_vmap(ckpt, vocab, model.cfg, tmp / VMAP)
    logger.info("converted to CTranslate2 (%s)", config.quantization)
    return added


def write_vmap(ckpt: dict[str, Any], vocab: Vocab, cfg: Any, path: Path) -> dict[str, str]:
    """The model's lexical shortlist (mtkit/shortlist.py) as CTranslate2's vocabulary map: a line per source piece,
    `PIECE<TAB>CANDIDATE CANDIDATE ...`, and the always-kept frequent pieces on the line whose key is empty;
    `translate_batch(use_vmap=True)` then searches each batch over its union, as mtkit does. Returns its identity
    for the export record: its own sha256 and its vocabulary's (`mtkit translate -m DIR` refuses a vmap.txt that
    is not this one, or a record of another vocabulary)."""
    from mtkit.decode.shortlist import Shortlist

    shortlist = Shortlist.of(ckpt, "the model")
    assert shortlist is not None
    source, target = pieces(vocab, cfg.vocab_size), pieces(vocab, cfg.target_vocab_size)
    lines = ["\t" + " ".join(target[i] for i in shortlist.frequent.tolist()) + "\n"]
    for s, row in enumerate(shortlist.candidates.tolist()):
        found = [target[t] for t in row if t >= 0]
        if found and s < len(source):
            lines.append(f"{source[s]}\t{' '.join(found)}\n")
    data = "".join(lines).encode("utf-8")
    path.write_bytes(data)
    logger.info("wrote the shortlist as CTranslate2's vocabulary map (%d source pieces)", len(lines) - 1)
    return {"sha256": hashlib.sha256(data).hexdigest(), "spm_sha256": hashlib.sha256(ckpt["vocab"]).hexdigest()}


# --------------------------------------------------------------------------- the spec
def ctranslate2_spec(model: Transformer, vocab: Vocab) -> Any:
    """A CTranslate2 TransformerSpec holding `model`'s weights and `vocab`'s pieces (not yet quantized)."""
    from ctranslate2.specs import common_spec, transformer_spec  # type: ignore[import-untyped]

    cfg = model.cfg
    activation = common_spec.Activation.SWISH if cfg.activation == "swish" else common_spec.Activation.RELU
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers), cfg.heads, pre_norm=cfg.pre_norm, activation=activation
    )
    set_encoder(spec.encoder, model)
    set_decoder(spec.decoder, model)
    spec.register_source_vocabulary(pieces(vocab, cfg.vocab_size))
    spec.register_target_vocabulary(pieces(vocab, cfg.target_vocab_size))
    set_tokens(spec.config, vocab)
    spec.config.layer_norm_epsilon = typing.cast(Any, model.encoder[0]).res_attn.norm.eps
    return spec


def pieces(vocab: Vocab, size: int) -> list[str]:
    """The SentencePiece pieces in id order; embedding rows beyond them get unique placeholder names."""
    tokens = [vocab.piece(i) for i in range(len(vocab))]
    return tokens + [f"<mtkit_unused_{i}>" for i in range(len(tokens), size)]


def set_tokens(config: Any, vocab: Vocab) -> None:
    """mtkit's convention: the source is ids + [EOS], the decoder's first input is BOS."""
    config.unk_token = vocab.piece(UNK)
    config.bos_token = vocab.piece(BOS)
    config.eos_token = vocab.piece(EOS)
    config.decoder_start_token = config.bos_token
    config.add_source_bos = False
    config.add_source_eos = True


def _array(t: torch.Tensor) -> Any:
    return t.detach().float().cpu().numpy().copy()


def set_linear(spec: Any, layer: Any) -> None:
    spec.weight = _array(layer.weight)
    if layer.bias is not None:
        spec.bias = _array(layer.bias)


def set_layer_norm(spec: Any, norm: Any) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def set_attention(spec: Any, attn: MultiHeadAttention, norm: Any) -> None:
    """Self-attention: [fused QKV, W^O]; cross-attention: [W^Q, fused KV, W^O] (CTranslate2's order)."""
    if attn.self_attention:
        set_linear(spec.linear[0], attn.qkv_proj)
    else:
        set_linear(spec.linear[0], attn.q_proj)
        set_linear(spec.linear[1], attn.kv_proj)
    set_linear(spec.linear[-1], attn.out_proj)
    set_layer_norm(spec.layer_norm, norm)


def set_ffn(spec: Any, layer: Any) -> None:
    set_linear(spec.linear_0, layer.ffn.w_1)
    set_linear(spec.linear_1, layer.ffn.w_2)
    set_layer_norm(spec.layer_norm, layer.res_ffn.norm)


def set_embeddings(stack: Any, embedding_spec: Any, model: Transformer, table: Any) -> None:
    embedding_spec.weight = _array(table.weight)
    stack.scale_embeddings = True  # times sqrt(d_model), section 3.4
    stack.position_encodings.encodings = _array(model.src_embed.positions(model.cfg.max_positions))  # interleaved


def set_encoder(spec: Any, model: Transformer) -> None:
    set_embeddings(spec, spec.embeddings[0], model, model.src_embed.table)
    layer: Any
    for layer_spec, layer in zip(spec.layer, model.encoder):
        set_attention(layer_spec.self_attention, layer.self_attn, layer.res_attn.norm)
        set_ffn(layer_spec.ffn, layer)
    if model.cfg.pre_norm:
        set_layer_norm(spec.layer_norm, model.encoder_norm)


def set_decoder(spec: Any, model: Transformer) -> None:
    set_embeddings(spec, spec.embeddings, model, model.tgt_embed.table)
    projection: Any = model.output_proj if model.output_proj is not None else model.tgt_embed.table
    spec.projection.weight = _array(projection.weight)
    if model.cfg.output_bias:  # Marian's final_logits_bias
        spec.projection.bias = _array(model.final_logits_bias)
    layer: Any
    for layer_spec, layer in zip(spec.layer, model.decoder):
        set_attention(layer_spec.self_attention, layer.self_attn, layer.res_self.norm)
        set_attention(layer_spec.attention, layer.cross_attn, layer.res_cross.norm)
        set_ffn(layer_spec.ffn, layer)
    if model.cfg.pre_norm:
        set_layer_norm(spec.layer_norm, model.decoder_norm)
