"""Checkpoints: written atomically, loaded safely (`weights_only=True`), rebuilt from their config.

An mtkit file is a dict:
    format        "mtkit"
    version       1
    kind          "checkpoint" (training state included) or "model" (weights only)
    model_config  dataclasses.asdict(ModelConfig)
    model         the state_dict
    vocab         the SentencePiece model's serialized bytes (or None)
    step          updates done when it was written
    ... training state (optimizer, scheduler, scaler, RNG, data position) for kind "checkpoint".
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from mtkit.config import ModelConfig, config_from_dict
from mtkit.errors import MtkitError

FORMAT, VERSION = "mtkit", 1


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save to a temporary file in the same directory, fsync, then rename over `path`.

    A crash at any moment leaves either the old file or the new one, never half of one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def model_payload(model: torch.nn.Module, config: ModelConfig, vocab: bytes | None, step: int = 0,
                  kind: str = "model", **extra: Any) -> dict[str, Any]:
    """The dict that `load` accepts, for a model and what is needed to rebuild and use it."""
    return {"format": FORMAT, "version": VERSION, "kind": kind, "model_config": dataclasses.asdict(config),
            "model": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "vocab": vocab,
            "step": step, **extra}


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Load an mtkit file safely on CPU; anything else gets one clear sentence."""
    path = Path(path)
    if not path.is_file():
        raise MtkitError(f"model file {path} does not exist.")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle, zip and weights-only errors all mean the same to a user
        raise MtkitError(f"{path} is not a readable mtkit model or checkpoint ({type(exc).__name__}).") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise MtkitError(f"{path} is not an mtkit model or checkpoint.")
    if obj.get("version") != VERSION:
        raise MtkitError(f"{path} has mtkit format version {obj.get('version')!r}; this mtkit reads version {VERSION}.")
    return obj


def config_of(ckpt: dict[str, Any]) -> ModelConfig:
    return config_from_dict(ModelConfig, ckpt["model_config"])


def build_from(ckpt: dict[str, Any]) -> torch.nn.Module:
    """Rebuild the model from the config saved beside its weights, reporting every mismatch at once."""
    from mtkit.model import Transformer

    model = Transformer(config_of(ckpt))
    try:
        missing, unexpected = model.load_state_dict(ckpt["model"], strict=False)
    except RuntimeError as exc:  # shape mismatches; torch lists them all in one message
        raise MtkitError(f"the weights do not fit the saved model config: {exc}".replace("\n", " ")) from None
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing weights: {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected weights: {', '.join(unexpected)}")
        raise MtkitError(f"the weights do not fit the saved model config ({'; '.join(parts)}).")
    return model
