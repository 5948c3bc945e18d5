"""mtkit's Transformer as Transformers' `MarianMTModel`, both ways: config fields, weight names, one permutation.

Marian (Junczys-Dowmunt et al. 2018, and its port in Hugging Face Transformers) is the paper's
architecture: post-norm residual blocks, ReLU, embeddings times sqrt(d_model), sinusoidal positions,
source, target and output embeddings tied. Three things differ in form only:

- Positions: mtkit interleaves sin and cos (PE(pos, 2i) = sin, 2i+1 = cos, section 3.5); Marian puts
  all sines first, then all cosines, with the same frequencies. Transformers never reads a position
  table from the file (it computes its own), so instead the model dimension itself is permuted:
  Marian's coordinate j is mtkit's coordinate P[j], P = (0, 2, 4, ..., 1, 3, 5, ...). Every weight that
  reads or writes the model dimension is permuted along it (embeddings, attention inputs and output
  projections, both feed-forward layers, LayerNorms), which computes exactly the same function:
  LayerNorm and the residual sums are indifferent to the order of coordinates, and the heads' own
  coordinates (the Q, K, V outputs) are left alone.
- Self-attention's fused Q, K, V matrix and cross-attention's fused K, V are Marian's separate
  `q_proj`, `k_proj`, `v_proj`, stacked along the output dimension in that order.
- Names: `encoder.{i}.res_attn.norm` is `model.encoder.layers.{i}.self_attn_layer_norm`, and so on
  (the table in `layer_rules`).

`load_marian_dir` reads such a directory back (config.json, model.safetensors, source.spm) as the
dict `checkpoint.load` returns, for a model mtkit can represent exactly; anything else is one sentence
naming the difference. Weights are read with safetensors only, never with pickle.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from mtkit.config import BOS, EOS, PAD, ModelConfig
from mtkit.errors import MtkitError
from mtkit.files import EXPORT_RECORD, read_model_file
from mtkit.marian.sizes import Weights, check_shapes, check_sizes

IN, OUT, NONE = "in", "out", "none"  # which axis of a weight is the model dimension (to permute)
HF_MISSING = (
    "reading a Hugging Face model directory needs the safetensors package; install it with: pip install 'mtkit[hf]'."
)
ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish"}  # Transformers' names -> ModelConfig.activation
POSITION_KEYS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")


def permutation(d_model: int) -> torch.Tensor:
    """P with marian_vector = mtkit_vector[P]: mtkit's even (sine) coordinates first, then its odd (cosine) ones."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _permute(t: torch.Tensor, axis: str, index: torch.Tensor) -> torch.Tensor:
    if axis == IN:
        return t[:, index].contiguous()
    if axis == OUT:
        return t[index].contiguous()
    return t.clone()


def _attention(mtkit: str, marian: str, fused: tuple[str, ...], fused_name: str) -> list[tuple[str, tuple, str]]:
    """One attention block: the fused input projection split into Marian's, then W^O."""
    return [
        (f"{mtkit}.{fused_name}.weight", tuple(f"{marian}.{p}_proj.weight" for p in fused), IN),
        (f"{mtkit}.{fused_name}.bias", tuple(f"{marian}.{p}_proj.bias" for p in fused), NONE),
        (f"{mtkit}.out_proj.weight", (f"{marian}.out_proj.weight",), OUT),
        (f"{mtkit}.out_proj.bias", (f"{marian}.out_proj.bias",), OUT),
    ]


def _norm(mtkit: str, marian: str) -> list[tuple[str, tuple, str]]:
    return [(f"{mtkit}.norm.{p}", (f"{marian}.{p}",), OUT) for p in ("weight", "bias")]


def _ffn(mtkit: str, marian: str) -> list[tuple[str, tuple, str]]:
    """Eq. (2): W_1 reads the model dimension (its bias is d_ff-long), W_2 writes it."""
    return [
        (f"{mtkit}.ffn.w_1.weight", (f"{marian}.fc1.weight",), IN),
        (f"{mtkit}.ffn.w_1.bias", (f"{marian}.fc1.bias",), NONE),
        (f"{mtkit}.ffn.w_2.weight", (f"{marian}.fc2.weight",), OUT),
        (f"{mtkit}.ffn.w_2.bias", (f"{marian}.fc2.bias",), OUT),
    ]


def layer_rules(cfg: ModelConfig) -> list[tuple[str, tuple[str, ...], str]]:
    """Every layer weight as data: (mtkit name, Marian names it is split into along dim 0, permuted axis)."""
    rules = []
    for i in range(cfg.encoder_layers):
        e, m = f"encoder.{i}", f"model.encoder.layers.{i}"
        rules += _attention(f"{e}.self_attn", f"{m}.self_attn", ("q", "k", "v"), "qkv_proj")
        rules += _norm(f"{e}.res_attn", f"{m}.self_attn_layer_norm")
        rules += _ffn(e, m) + _norm(f"{e}.res_ffn", f"{m}.final_layer_norm")
    for i in range(cfg.decoder_layers):
        e, m = f"decoder.{i}", f"model.decoder.layers.{i}"
        rules += _attention(f"{e}.self_attn", f"{m}.self_attn", ("q", "k", "v"), "qkv_proj")
        rules += _norm(f"{e}.res_self", f"{m}.self_attn_layer_norm")
        rules += [
            (f"{e}.cross_attn.q_proj.weight", (f"{m}.encoder_attn.q_proj.weight",), IN),
            (f"{e}.cross_attn.q_proj.bias", (f"{m}.encoder_attn.q_proj.bias",), NONE),
        ]
        rules += _attention(f"{e}.cross_attn", f"{m}.encoder_attn", ("k", "v"), "kv_proj")
        rules += _norm(f"{e}.res_cross", f"{m}.encoder_attn_layer_norm")
        rules += _ffn(e, m) + _norm(f"{e}.res_ffn", f"{m}.final_layer_norm")
    return rules


def embedding_names(share: str) -> dict[str, tuple[str, ...]]:
    """mtkit's embedding matrices and every Marian name that holds the same matrix (all permuted along IN)."""
    if share == "all":
        shared = (
            "model.shared.weight",
            "model.encoder.embed_tokens.weight",
            "model.decoder.embed_tokens.weight",
            "lm_head.weight",
        )
        return {"src_embed.table.weight": shared, "tgt_embed.table.weight": shared}
    names = {
        "src_embed.table.weight": ("model.encoder.embed_tokens.weight",),
        "tgt_embed.table.weight": ("model.decoder.embed_tokens.weight", "lm_head.weight"),
    }
    if share == "none":
        names["tgt_embed.table.weight"] = ("model.decoder.embed_tokens.weight",)
        names["output_proj.weight"] = ("lm_head.weight",)
    return names


# --------------------------------------------------------------------------- mtkit -> Marian
def marian_config(cfg: ModelConfig) -> dict[str, Any]:
    """MarianConfig's fields for `cfg`; a pre-norm model has no Marian form (Marian is post-norm only)."""
    if cfg.pre_norm:
        raise MtkitError(
            "this model is pre-norm, and Transformers' Marian is post-norm only; export it --format ctranslate2."
        )
    fields: dict[str, Any] = {
        "vocab_size": cfg.vocab_size,
        "decoder_vocab_size": cfg.target_vocab_size,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.encoder_layers,
        "decoder_layers": cfg.decoder_layers,
        "encoder_attention_heads": cfg.heads,
        "decoder_attention_heads": cfg.heads,
        "encoder_ffn_dim": cfg.d_ff,
        "decoder_ffn_dim": cfg.d_ff,
        "activation_function": cfg.activation,  # Eq. (2): relu, or swish
        "scale_embedding": True,  # times sqrt(d_model), 3.4
        "max_position_embeddings": cfg.max_positions,
        "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        "activation_dropout": cfg.activation_dropout,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "init_std": cfg.d_model**-0.5,  # mtkit's embedding init (tensor2tensor's), for layers added in fine-tuning
        "share_encoder_decoder_embeddings": cfg.share_embeddings == "all",
        "tie_word_embeddings": cfg.share_embeddings != "none",
        "pad_token_id": PAD,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "decoder_start_token_id": BOS,  # mtkit's decoder starts from <s>, not from <pad> as OPUS-MT's do
        "forced_eos_token_id": EOS,  # at the length limit only EOS may follow, as in mtkit's search
        "is_encoder_decoder": True,
        "architectures": ["MarianMTModel"],
    }
    return fields


def to_marian(state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """mtkit's state_dict as MarianMTModel's (float32), every alias of a tied matrix included."""
    index = permutation(cfg.d_model)
    out: dict[str, torch.Tensor] = {}
    for name, marian_names, axis in layer_rules(cfg):
        parts = state[name].float().chunk(len(marian_names), dim=0)
        out.update((m, _permute(p, axis, index)) for m, p in zip(marian_names, parts))
    for name, aliases in embedding_names(cfg.share_embeddings).items():
        table = _permute(state[name].float(), IN, index)
        out.update(dict.fromkeys(aliases, table))
    out["final_logits_bias"] = torch.zeros(1, cfg.target_vocab_size)  # mtkit's output layer has no bias
    return out


# --------------------------------------------------------------------------- Marian -> mtkit
def _refuse(path: Path, difference: str) -> MtkitError:
    return MtkitError(f"{path} is a Marian model that mtkit cannot represent: {difference}.")


def model_config_of(hf: dict[str, Any], path: Path) -> ModelConfig:
    """ModelConfig for a Marian config.json, or one sentence naming the first thing mtkit's model lacks."""

    def field(name: str, default: Any = None) -> Any:
        return hf.get(name, default)

    if field("model_type") != "marian":
        raise MtkitError(f"{path} holds a Transformers {field('model_type')!r} model; mtkit reads Marian models only.")
    check_sizes(hf, path)
    checks = [
        (
            field("activation_function", "gelu") in ACTIVATIONS,
            f"activation_function {field('activation_function', 'gelu')!r} (mtkit has relu and swish)",
        ),
        (field("scale_embedding", False) is True, "embeddings not scaled by sqrt(d_model) (scale_embedding false)"),
        (not field("normalize_before", False), "pre-norm layers (normalize_before)"),
        (not field("add_final_layer_norm", False), "a final LayerNorm (add_final_layer_norm)"),
        (
            not field("normalize_embedding", False) and not field("layernorm_embedding", False),
            "a LayerNorm on the embeddings",
        ),
        (
            field("static_position_embeddings", True) is not False,
            "learned positions (static_position_embeddings false)",
        ),
        (field("encoder_ffn_dim") == field("decoder_ffn_dim"), "different encoder and decoder d_ff"),
        (field("encoder_attention_heads") == field("decoder_attention_heads"), "different encoder and decoder heads"),
        (field("d_model", 1) % 2 == 0, "an odd d_model"),
        (
            field("share_encoder_decoder_embeddings", True) is False or field("tie_word_embeddings", True) is not False,
            "source and target embeddings shared but the output projection not",
        ),
    ]
    for ok, difference in checks:
        if not ok:
            raise _refuse(path, difference)
    ids = (field("pad_token_id"), field("eos_token_id"), field("decoder_start_token_id"))
    if ids != (PAD, EOS, BOS):
        raise _refuse(
            path,
            f"token ids (pad, eos, decoder start) = {ids}, and mtkit's are fixed at ({PAD}, {EOS}, {BOS}): "
            "its vocabulary and embeddings would have to be reordered",
        )
    share = (
        "all"
        if field("share_encoder_decoder_embeddings", True) is not False
        else ("decoder" if field("tie_word_embeddings", True) is not False else "none")
    )
    vocab = int(field("vocab_size"))
    tgt_vocab = int(field("decoder_vocab_size") or vocab)
    try:
        return ModelConfig(
            vocab_size=vocab,
            tgt_vocab_size=None if tgt_vocab == vocab else tgt_vocab,
            d_model=int(field("d_model")),
            d_ff=int(field("encoder_ffn_dim")),
            heads=int(field("encoder_attention_heads")),
            encoder_layers=int(field("encoder_layers")),
            decoder_layers=int(field("decoder_layers")),
            dropout=float(field("dropout", 0.1)),
            attention_dropout=float(field("attention_dropout", 0.0)),
            activation_dropout=float(field("activation_dropout", 0.0)),
            max_positions=int(field("max_position_embeddings", 1024)),
            share_embeddings=share,
            activation=ACTIVATIONS[field("activation_function")],
        )
    except (TypeError, ValueError) as exc:
        raise MtkitError(f"{path / 'config.json'} has a missing or invalid field ({exc}).") from None


def from_marian(tensors: Mapping[str, torch.Tensor], cfg: ModelConfig, path: Path) -> dict[str, torch.Tensor]:
    """MarianMTModel's weights (any of a tied matrix's names) as mtkit's state_dict; every missing one listed."""
    check_shapes(tensors, cfg, path, embedding_names(cfg.share_embeddings))
    inverse = torch.argsort(permutation(cfg.d_model))
    bias = tensors.get("final_logits_bias")
    if bias is not None and bool(bias.ne(0).any()):
        raise _refuse(path, "an output bias (final_logits_bias is not zero), which mtkit's output layer lacks")
    state: dict[str, torch.Tensor] = {}
    missing: list[str] = []
    for name, marian_names, axis in layer_rules(cfg):
        if not all(m in tensors for m in marian_names):
            missing += [m for m in marian_names if m not in tensors]
            continue
        parts = [_permute(tensors[m].float(), axis, inverse) for m in marian_names]
        state[name] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)  # one part: no second copy
    tables: dict[tuple[str, ...], torch.Tensor] = {}
    for name, aliases in embedding_names(cfg.share_embeddings).items():
        found = next((a for a in aliases if a in tensors), None)
        if found is None:
            missing.append(aliases[0])
            continue
        if aliases not in tables:  # a tied matrix is one tensor under each of its mtkit names
            tables[aliases] = _permute(tensors[found].float(), IN, inverse)
        state[name] = tables[aliases]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise MtkitError(f"{path} lacks weights its config.json needs ({', '.join(missing[:3])}{more}).")
    return state


def is_hf_dir(path: Path) -> bool:
    """A Hugging Face model directory: config.json naming a `model_type` (an mtkit run's config.json does not)."""
    try:
        config = json.loads(read_model_file(path / "config.json"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model_type" in config


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_model_file(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MtkitError(f"{path} is not readable JSON ({type(exc).__name__}).") from None


def _weights(path: Path) -> Weights:
    """model.safetensors, or the shards its index names, read lazily (`Weights`); a pickle-only directory is
    refused, not opened."""
    try:
        import safetensors  # noqa: F401
    except ImportError:
        raise MtkitError(HF_MISSING) from None
    index = _read_json(path / "model.safetensors.index.json")
    if isinstance(index, dict) and isinstance(index.get("weight_map"), dict):
        files = sorted({str(f) for f in index["weight_map"].values()})
    elif (path / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        pickled = "pytorch_model.bin" if (path / "pytorch_model.bin").exists() else "no model.safetensors"
        raise MtkitError(
            f"{path} holds {pickled}; mtkit reads weights from model.safetensors only (a pickle is never opened)."
        )
    return Weights(path, files)


def _vocabulary(path: Path) -> bytes:
    """The joint SentencePiece model, whose ids must be the model's (vocab.json in spm id order, one spm)."""
    from mtkit.data.vocab import Vocab

    tokenizer = _read_json(path / "tokenizer_config.json") or {}
    if tokenizer.get("separate_vocabs") or (path / "target_vocab.json").exists():
        raise _refuse(path, "separate source and target vocabularies (mtkit's vocabulary is joint)")
    try:
        proto = read_model_file(path / "source.spm")
        same = read_model_file(path / "target.spm") == proto
    except OSError as exc:
        raise MtkitError(f"{path} has no readable source.spm and target.spm ({exc.strerror or exc}).") from None
    if not same:
        raise _refuse(path, "different source.spm and target.spm (mtkit's SentencePiece model is joint)")
    sp = Vocab.from_bytes(proto).sp  # refuses special ids other than pad 0, unk 1, bos 2, eos 3
    vocab = _read_json(path / "vocab.json")
    if not isinstance(vocab, dict):
        raise MtkitError(f"{path} has no readable vocab.json.")
    for i in range(sp.get_piece_size()):
        if vocab.get(sp.id_to_piece(i)) != i:
            raise _refuse(
                path,
                f"vocab.json gives piece {sp.id_to_piece(i)!r} id {vocab.get(sp.id_to_piece(i))}, not its "
                f"SentencePiece id {i} (mtkit uses SentencePiece's ids)",
            )
    return proto


def load_marian_dir(path: str | os.PathLike) -> dict[str, Any]:
    """A Hugging Face Marian directory as the dict `checkpoint.load` returns (kind "model", less the file format
    and version that checkpoint.load adds), or one sentence."""
    path = Path(path)
    if not is_hf_dir(path):
        raise MtkitError(
            f"{path} is a directory, not a model file, and not a Hugging Face model directory either "
            "(no config.json with a model_type)."
        )
    hf = _read_json(path / "config.json")
    cfg = model_config_of(hf, path)
    proto = _vocabulary(path)
    state = from_marian(_weights(path), cfg, path)
    record = _read_json(path / EXPORT_RECORD) or {}
    return {
        "kind": "model",
        "model_config": dataclasses.asdict(cfg),
        "model": state,
        "vocab": proto,
        "step": int(record.get("step", 0)) if isinstance(record, dict) else 0,
        "provenance": record.get("provenance") if isinstance(record, dict) else None,
        "converted_from": {"format": "huggingface-marian", "dir": str(path)},
    }
