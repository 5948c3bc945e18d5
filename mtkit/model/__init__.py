"""The Transformer model (paper section 3) and how to build one from a preset."""

from __future__ import annotations

from typing import Any

from mtkit.config import ModelConfig, model_config
from mtkit.model.cache import DecoderCache
from mtkit.model.transformer import Encoded, Transformer


def build_model(preset: str | ModelConfig, vocab_size: int | None = None, **overrides: Any) -> Transformer:
    """A freshly initialised Transformer from a preset name (plus vocabulary size) or a ModelConfig.

    Examples:
        >>> sum(p.numel() for p in build_model("base", 37000).parameters())  # about 63 M
    """
    if isinstance(preset, ModelConfig):
        if vocab_size is not None or overrides:
            raise TypeError("pass either a ModelConfig or a preset name with vocab_size and overrides")
        return Transformer(preset)
    if vocab_size is None:
        raise TypeError("build_model(preset_name, vocab_size, **overrides) needs the vocabulary size")
    return Transformer(model_config(preset, vocab_size, **overrides))


__all__ = ["DecoderCache", "Encoded", "Transformer", "build_model"]
