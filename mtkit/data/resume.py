"""A resumable cleaning run's files (`mtkit clean`): PREFIX.LANG.part, the duplicate rules' hash logs and
PREFIX.clean-state.json, checkpointed, cut back on resume, and published under their names at the end.

The state is written only after the text and hashes it counts are on disk (fsync), every `checkpoint_s`
seconds and at the end. A rerun whose settings (inputs, rules, the scoring models' sha256: whatever changes
the output) equal the state's cuts the files back to it and goes on; any other starts over, with one
warning saying what changed. Publishing moves each .part over its final name, or, where the final name is a
named pipe or a device, writes it into it (each in its own thread: a reader of two pipes, `paste A B`, reads
them in step), as mtkit/atomic.py does for every output.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mtkit.atomic import is_special, open_special, write_atomic

logger = logging.getLogger(__name__)

LOGS = {"duplicate": "exact", "near_duplicate": "near"}  # the hash log of each duplicate rule: PREFIX.NAME-hashes.part
CHANGED = {
    "format": "it was written by another version of mtkit",
    "inputs": "the input files changed",
    "langs": "the languages changed",
    "config": "the rules or their settings changed",
    "scorer": "the dual cross-entropy models (or their device) changed",
}


@dataclass(frozen=True)
class Outputs:
    finals: tuple[Path, ...]  # PREFIX.SRC_LANG, PREFIX.TGT_LANG
    state: Path

    @classmethod
    def of(cls, prefix: Path, langs: Sequence[str]) -> Outputs:
        return cls(tuple(Path(f"{prefix}.{lang}") for lang in langs), Path(f"{prefix}.clean-state.json"))

    @property
    def parts(self) -> list[Path]:
        return [Path(f"{p}.part") for p in self.finals]

    @property
    def logs(self) -> dict[str, Path]:
        prefix = str(self.state).removesuffix(".clean-state.json")
        return {rule: Path(f"{prefix}.{name}-hashes.part") for rule, name in LOGS.items()}

    def hashes(self, state: dict[str, Any]) -> dict[str, np.ndarray]:
        """Each duplicate rule's hashes as far as `state` counts them."""
        counts = state.get("hashes", [0] * len(LOGS))
        return {rule: _read_hashes(path, n) for (rule, path), n in zip(self.logs.items(), counts)}

    @contextlib.contextmanager
    def writing(self, settings: dict[str, Any], state: dict[str, Any], checkpoint_s: float) -> Iterator[Writer]:
        """The .part files and logs (cut back to `state`) opened to append, checkpointed as the writer goes and
        once at the end."""
        self.finals[0].parent.mkdir(parents=True, exist_ok=True)
        files = [open(p, "ab") for p in (*self.parts, *self.logs.values())]
        try:
            writer = Writer(self, settings, files, checkpoint_s)
            writer.done, writer.stats = state.get("pairs_done", 0), state.get("stats", {})
            yield writer
            writer.checkpoint()
        finally:
            for f in files:
                f.close()

    def publish(self, record: Path, text: str) -> None:
        """The finished parts under their names (written into a pipe or a device), then the record."""
        special = [(part, final) for part, final in zip(self.parts, self.finals) if is_special(final)]
        for part, final in zip(self.parts, self.finals):
            if not is_special(final):
                os.replace(part, final)
        _copy_into(special)
        write_atomic(record, text)
        for path in (*self.logs.values(), self.state, *(part for part, _ in special)):
            path.unlink(missing_ok=True)


class Writer:
    """Appends each chunk's kept lines and added hashes; `due` checkpoints every `checkpoint_s` seconds."""

    def __init__(self, outs: Outputs, settings: dict[str, Any], files: list[BinaryIO], checkpoint_s: float):
        self.outs, self.settings, self.files, self.checkpoint_s = outs, settings, files, checkpoint_s
        self.last = time.monotonic()
        self.done, self.stats = 0, {}

    def write(self, src: bytes, tgt: bytes, added: dict[str, np.ndarray], done: int, stats: dict[str, Any]) -> None:
        self.files[0].write(src)
        self.files[1].write(tgt)
        for rule, f in zip(LOGS, self.files[2:]):
            if rule in added:
                f.write(added[rule].tobytes())
        self.done, self.stats = done, stats

    def due(self) -> None:
        """A checkpoint if the last one is `checkpoint_s` old."""
        if time.monotonic() - self.last >= self.checkpoint_s:
            self.checkpoint()
            self.last = time.monotonic()

    def checkpoint(self) -> None:
        """The state after `done` pairs, written once the text and hashes it counts are on disk."""
        for f in self.files:
            f.flush()
            os.fsync(f.fileno())
        state = {
            **self.settings,
            "pairs_done": self.done,
            "bytes": [f.tell() for f in self.files[:2]],
            "hashes": [f.tell() // 8 for f in self.files[2:]],
            "stats": self.stats,
        }
        write_atomic(self.outs.state, json.dumps(state) + "\n")


def resume_state(outs: Outputs, settings: dict[str, Any]) -> dict[str, Any]:
    """The state of an interrupted run with these settings, its files cut back to it; {} to start afresh."""
    state: dict[str, Any] = {}
    if outs.state.is_file():
        try:
            state = json.loads(outs.state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
    files = (*outs.parts, *outs.logs.values())
    if state:
        changed = [key for key, value in settings.items() if state.get(key) != json.loads(json.dumps(value))]
        sizes = [*state.get("bytes", []), *(8 * n for n in state.get("hashes", []))]
        if not changed and all(p.is_file() and p.stat().st_size >= n for p, n in zip(files, sizes)):
            for p, n in zip(files, sizes):
                os.truncate(p, n)
            return state
        why = CHANGED.get(changed[0], f"its {changed[0]} changed") if changed else "its files are shorter than it says"
        logger.warning("not resuming the interrupted run in %s: %s; starting over", outs.state, why)
    for p in files:
        p.unlink(missing_ok=True)
    return {}


def _read_hashes(path: Path, n: int) -> np.ndarray:
    if not n:
        return np.zeros(0, np.uint64)
    return np.fromfile(path, dtype=np.uint64, count=n)


def _copy_into(pairs: list[tuple[Path, Path]]) -> None:
    """Each file into its pipe or device, all at once (a pipe's open waits for its reader)."""
    errors: list[BaseException] = []

    def copy(part: Path, final: Path) -> None:
        try:
            with open(part, "rb") as f, open_special(final) as out:
                shutil.copyfileobj(f, out, 1 << 20)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=copy, args=pair, daemon=True) for pair in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # joined in steps, so that Ctrl-C reaches the main thread
            thread.join(0.5)
    if errors:
        raise errors[0]
