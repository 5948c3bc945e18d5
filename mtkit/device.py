"""Facts of the machine: which torch device a command runs on (one rule for training and decoding alike), and
how many CPU threads PyTorch runs with, found without importing torch (CTranslate2's path runs without it)."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mtkit.errors import MtkitError

if TYPE_CHECKING:
    import torch


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """ "auto": CUDA when present (one GPU per local rank), else CPU; anything else is checked."""
    import torch

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


def default_threads() -> int:
    """The CPU threads mtkit's own engine would run with, PyTorch's count, found without importing torch: torch's
    own setting where torch is already imported; else its default, OMP_NUM_THREADS (or MKL_NUM_THREADS) or the
    machine's physical cores."""
    loaded = sys.modules.get("torch")
    if loaded is not None:
        return int(loaded.get_num_threads())
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return physical_cores()


def physical_cores() -> int:
    """Physical cores (not hyperthreads), as PyTorch counts them by default; os.cpu_count() where /proc says none."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    cores: set[tuple[str, str]] = set()
    package = core = ""
    for line in text.splitlines() + [""]:
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "physical id":
            package = value
        elif key == "core id":
            core = value
        elif not key and core:
            cores.add((package, core))
            package = core = ""
    return len(cores) or os.cpu_count() or 1


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (what `lscpu` prints), else what Python's platform module knows:
    the machine every recipe's results.md names beside its figures."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's instruction-set flags as Linux names them (avx2, avx512_bf16, amx_bf16, ...), from /proc/cpuinfo
    or the given text of it; empty where there is none (not Linux), and the caller asks PyTorch instead."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 names the line "flags", arm64 "Features"
            return frozenset(value.split())
    return frozenset()
