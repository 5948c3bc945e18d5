"""The sizes in a Hugging Face Marian config.json, checked before they are used: one sentence naming the field.

A missing `vocab_size` was a TypeError, a `d_model` unlike the weights' an IndexError deep in the
conversion (mtkit/marian.py); here each is said with the field and the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError

# The config.json fields of a Marian model that are sizes: each a positive whole number.
WHOLE_FIELDS = (
    "vocab_size",
    "d_model",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_layers",
    "decoder_layers",
)


def check_sizes(hf: dict[str, Any], path: Path) -> None:
    """Each of WHOLE_FIELDS a positive whole number, or one sentence naming it and the file."""
    optional = [name for name in ("decoder_vocab_size", "max_position_embeddings") if hf.get(name) is not None]
    for name in (*WHOLE_FIELDS, *optional):  # read as numbers: a missing or mistyped one is said, not a TypeError
        value = hf.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            said = "is missing" if value is None else f"is {json.dumps(value)[:40]}"
            raise MtkitError(f"{path / 'config.json'}: the field {name} {said}; it must be a positive whole number.")


def check_shapes(
    tensors: dict[str, torch.Tensor], cfg: ModelConfig, path: Path, embeddings: dict[str, tuple[str, ...]]
) -> None:
    """The weights' sizes against config.json's: a disagreement is one sentence naming the field and the file."""
    tgt_vocab = cfg.tgt_vocab_size or cfg.vocab_size
    tgt_field = "decoder_vocab_size" if cfg.tgt_vocab_size else "vocab_size"
    expected: list[tuple[tuple[str, ...], tuple[tuple[str, int], ...]]] = []
    for mtkit_name, aliases in embeddings.items():
        rows = ("vocab_size", cfg.vocab_size) if mtkit_name.startswith("src") else (tgt_field, tgt_vocab)
        expected.append((aliases, (rows, ("d_model", cfg.d_model))))
    for side, layers in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
        for i in range(layers):
            m = f"model.{side}.layers.{i}"
            expected.append(((f"{m}.self_attn.q_proj.weight",), (("d_model", cfg.d_model), ("d_model", cfg.d_model))))
            expected.append(((f"{m}.fc1.weight",), ((f"{side}_ffn_dim", cfg.d_ff), ("d_model", cfg.d_model))))
    for aliases, dims in expected:
        name = next((a for a in aliases if a in tensors), None)
        if name is None:
            continue  # said with every other missing weight by from_marian
        shape = tuple(tensors[name].shape)
        if len(shape) != len(dims):
            raise MtkitError(
                f"{path}: the weight {name} has shape {list(shape)}; a Marian model's has {len(dims)} axes."
            )
        for size, (field, value) in zip(shape, dims):
            if size != value:
                raise MtkitError(
                    f"{path / 'config.json'}: the field {field} ({value}) disagrees with the weights ({name} is "
                    f"{list(shape)}); the file was edited or belongs to another model."
                )
