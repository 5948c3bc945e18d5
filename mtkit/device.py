"""Which torch device a command runs on: one rule for training and decoding alike."""

from __future__ import annotations

import torch

from mtkit.errors import MtkitError


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """ "auto": CUDA when present (one GPU per local rank), else CPU; anything else is checked."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise MtkitError(f"unknown --device {name!r}; use auto, cpu, cuda, cuda:N or mps.") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise MtkitError(
                f"--device {name} asked for CUDA, but this machine/torch build has none; use --device cpu."
            )
        index = local_rank if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise MtkitError(f"--device {name}: there are only {torch.cuda.device_count()} CUDA device(s).")
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
    elif device.type == "mps":  # Apple GPUs; "auto" never picks it: not every operation mtkit uses is there yet
        if not torch.backends.mps.is_available():
            raise MtkitError(
                f"--device {name} asked for Apple's GPU (MPS), but this machine/torch build has none; use --device cpu."
            )
    elif device.type != "cpu":
        raise MtkitError(f"unsupported --device {name!r}; use auto, cpu, cuda, cuda:N or mps.")
    return device
