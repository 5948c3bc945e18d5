"""Measured decisions kept per machine, so that the same command on the same machine decides the same way.

Three decisions are taken by timing: the fp32 CPU products' backend (mtkit/runtime/matmul.py), what
`--precision auto` resolves to where bf16 instructions exist (mtkit/runtime/bf16.py and precision.py), and
which weights decoding packs for oneDNN (mtkit/runtime/packing.py). A timing taken while other work runs can
fall on the other side of its bar, and the two backends round differently: two identical trainings started
under different load took different kernels and ended with different weights. So, as autotuning caches do
(Triton's, TVM's tuning logs, cuDNN's benchmark mode within a process), a measurement is taken once per
machine and kept in a small JSON file, keyed by what it depends on: the CPU's model name and flags (or the
GPU's name), the torch version, the CPU threads and the variables that cap the instructions used
(ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS, ATEN_CPU_CAPABILITY). A later process with the same key
reads the answer instead of timing again; a new torch, another thread count or another CPU measure anew.

The file is `measured.json` in mtkit's cache directory (`$MTKIT_CACHE`, else the user's cache directory:
~/.cache/mtkit on Linux, honouring $XDG_CACHE_HOME). `MTKIT_REMEASURE=1` times again and keeps the new answer;
deleting the file forgets every answer. The entry's date and file travel in each decision's reason, which the
run's log and its checkpoints record.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import torch

from mtkit.atomic import write_atomic
from mtkit.data.fetch import default_cache_dir
from mtkit.device import cpu_flags, cpu_name

logger = logging.getLogger(__name__)

FILE = "measured.json"
FORMAT, VERSION = "mtkit-measured", 1
REMEASURE_ENV = "MTKIT_REMEASURE"  # 1: time again (and keep the new answer) instead of reading a kept one
ISA_ENV = "ONEDNN_MAX_CPU_ISA"  # caps oneDNN's instructions, so it changes what a measurement finds
# MKL's and PyTorch's own kernels' caps, likewise; in the key only where set (entries made without them stay valid).
OTHER_ISA_ENVS = ("MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")

T = TypeVar("T")


class Kept(NamedTuple):
    """A measurement's answer, and where it came from: timed by this process (`fresh`) or read from `path`."""

    value: Any
    measured: str  # the UTC date and time it was timed
    fresh: bool
    path: Path

    def note(self) -> str:
        """The reason's tail: when it was measured and how to measure again."""
        if self.fresh:
            return f"measured now, kept for this machine in {self.path}"
        return f"measured {self.measured}, kept in {self.path}; {REMEASURE_ENV}=1 measures again"


def cache_file() -> Path:
    return default_cache_dir() / FILE


def machine(device: torch.device) -> dict[str, Any]:
    """What a measurement on `device` depends on, besides its own settings."""
    flags = " ".join(sorted(cpu_flags()))
    facts: dict[str, Any] = {
        "cpu": cpu_name(),
        "cpu_flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "torch": str(torch.__version__),
        "threads": torch.get_num_threads(),
        "onednn_max_cpu_isa": os.environ.get(ISA_ENV, ""),
        **{name.lower(): value for name in OTHER_ISA_ENVS if (value := os.environ.get(name))},
    }
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
        facts["cuda"] = torch.version.cuda
    return facts


def key(what: str, settings: Mapping[str, Any], device: torch.device) -> tuple[str, dict[str, Any]]:
    """The entry's name in the file (a hash of everything it depends on) and that everything, for a reader."""
    entry = {"what": what, "settings": dict(settings), "device": device.type, "machine": machine(device)}
    canonical = json.dumps(entry, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24], json.loads(canonical)


def read(path: Path) -> dict[str, Any]:
    """The kept entries; none where the file is missing, unreadable or not this format (it is then rewritten)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("format") == FORMAT else None
    return entries if isinstance(entries, dict) else {}


def remembered(what: str, settings: Mapping[str, Any], device: torch.device, measure: Callable[[], T]) -> Kept:
    """`measure()`'s answer (a JSON value) for `what` with `settings` on this machine: read from the file where
    it was kept before, else timed now and kept. A file that cannot be written costs only the keeping (a
    warning); the answer is used either way."""
    path = cache_file()
    name, entry = key(what, settings, device)
    again = os.environ.get(REMEASURE_ENV, "") not in ("", "0")
    found = None if again else read(path).get(name)
    if isinstance(found, dict) and "value" in found:
        logger.debug("%s: kept answer %r from %s", what, found["value"], path)
        return Kept(found["value"], str(found.get("measured", "")), False, path)
    value = measure()
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    entries = read(path)
    entries[name] = {**entry, "value": value, "measured": when}
    try:
        text = json.dumps({"format": FORMAT, "version": VERSION, "entries": entries}, indent=1, default=str)
        write_atomic(path, text + "\n")
    except OSError as exc:
        logger.warning("could not keep the measurement in %s (%s): the next start measures again", path, exc)
    return Kept(value, when, True, path)
