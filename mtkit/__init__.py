"""mtkit: a machine translation toolkit around the Transformer of Vaswani et al. (2017).

The Python API is small on purpose:

    import mtkit
    mtkit.PRESETS["base"].model          # the paper's base architecture (a ModelConfig)
    model = mtkit.build_model("base", 37000)

Names that need torch are imported on first use, so that `mtkit --help` stays instant.
"""

from __future__ import annotations

import importlib
from typing import Any

from mtkit.config import PRESETS, DecodeConfig, ModelConfig, Preset, SamplingConfig, TrainConfig
from mtkit.errors import MtkitError

__version__ = "0.3.0"

_LAZY = {
    "build_model": "mtkit.model",
    "Transformer": "mtkit.model",
    "Translator": "mtkit.decode.translator",
    "load_translator": "mtkit.decode.loading",  # `prepare`: any model, on its engine, by its own decoding defaults
    "Confidence": "mtkit.decode.confidence",  # translate_stream(confidence=...) with a reverse model or a calibrator
    "Glossary": "mtkit.decode.glossary",  # terms enforced in decoding: translate(lines, glossary=...)
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mtkit' has no attribute {name!r}")


__all__ = [
    "PRESETS",
    "DecodeConfig",
    "ModelConfig",
    "MtkitError",
    "Preset",
    "SamplingConfig",
    "TrainConfig",
    "__version__",
    *_LAZY,
]
