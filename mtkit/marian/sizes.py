"""The sizes in a Hugging Face Marian config.json, checked before they are used: one sentence naming the field;
and the safetensors weights they describe, read one tensor at a time (`Weights`).

A missing `vocab_size` was a TypeError, a `d_model` unlike the weights' an IndexError deep in the
conversion (mtkit/marian/weights.py); here each is said with the field and the file.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
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
# max_position_embeddings has no weight to check it against (Marian's positions are sinusoidal, made here): a
# table of that many rows is allocated. Marian models have 512; this leaves room and keeps the table (at
# d_model 1024, 256 MiB) allocatable, so a crafted 2**40 is one sentence, not an allocation traceback.
MAX_POSITIONS = 1 << 16


def check_sizes(hf: dict[str, Any], path: Path) -> None:
    """Each of WHOLE_FIELDS a positive whole number (max_position_embeddings at most MAX_POSITIONS), or one sentence
    naming it and the file."""
    optional = [name for name in ("decoder_vocab_size", "max_position_embeddings") if hf.get(name) is not None]
    for name in (*WHOLE_FIELDS, *optional):  # read as numbers: a missing or mistyped one is said, not a TypeError
        value = hf.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            said = "is missing" if value is None else f"is {json.dumps(value)[:40]}"
            raise MtkitError(f"{path / 'config.json'}: the field {name} {said}; it must be a positive whole number.")
    positions = hf.get("max_position_embeddings")
    if positions is not None and positions > MAX_POSITIONS:
        raise MtkitError(
            f"{path / 'config.json'}: the field max_position_embeddings is {positions}; mtkit reads models of at most "
            f"{MAX_POSITIONS} positions (Marian's have 512)."
        )


def check_shapes(
    tensors: Mapping[str, torch.Tensor], cfg: ModelConfig, path: Path, embeddings: dict[str, tuple[str, ...]]
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
        shape = tensors.shape(name) if isinstance(tensors, Weights) else tuple(tensors[name].shape)  # not read
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


class Weights(Mapping[str, torch.Tensor]):
    """A directory's safetensors weights, each tensor read from its file only when asked for (safe_open) and held
    by the caller alone: a conversion that drops each source tensor once it is converted never holds the whole
    file beside its result (loading an opus-mt-en-de-sized model: the file's ~280 MiB are not resident at once).
    `pop` forgets a name and returns its tensor."""

    def __init__(self, path: Path, files: list[str]):
        from safetensors import safe_open

        self._open = safe_open
        self._where: dict[str, Path] = {}
        for name in files:
            if Path(name).name != name:
                raise MtkitError(
                    f"{path / 'model.safetensors.index.json'} names a file outside the directory ({name})."
                )
            with self._reading(path / name) as handle:
                self._where.update(dict.fromkeys(handle.keys(), path / name))

    @contextlib.contextmanager
    def _reading(self, file: Path) -> Iterator[Any]:
        try:
            with self._open(str(file), framework="pt", device="cpu") as handle:
                yield handle
        except MtkitError:
            raise
        except Exception as exc:  # safetensors' errors have no common type; all mean a damaged file
            raise MtkitError(f"{file} is not a readable safetensors file ({type(exc).__name__}).") from None

    def __getitem__(self, name: str) -> torch.Tensor:
        with self._reading(self._where[name]) as handle:
            return handle.get_tensor(name)

    def shape(self, name: str) -> tuple[int, ...]:
        """A tensor's shape, from the file's header: nothing is read."""
        with self._reading(self._where[name]) as handle:
            return tuple(handle.get_slice(name).get_shape())

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def pop(self, name: str, default: torch.Tensor) -> torch.Tensor:
        if name not in self._where:
            return default
        tensor = self[name]
        del self._where[name]
        return tensor
