"""mtkit's own files as model sources: a model or checkpoint file, and a run directory (`mtkit train --out`).

A file is opened memory-mapped: the weights of a large checkpoint are never read to describe it, and its
optimizer state never to translate with it. A run directory translates with its newest readable checkpoint,
as resuming picks it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtkit.errors import MtkitError
from mtkit.facts import CHECKPOINT_NAME, architecture, best_score, parameters, run_metrics
from mtkit.provenance import distilled_from, read_run_json
from mtkit.sources import defaults


class ModelFile:
    """An mtkit file: a checkpoint (training state included), an averaged model or a model file."""

    kind = "mtkit file"
    engine = "mtkit"

    def __init__(self, path: Path):
        self.path = path

    @staticmethod
    def claims(path: Path) -> bool:
        return path.is_file()

    def checkpoint(self) -> dict[str, Any]:
        """The file's dict, its weights and config checked (`checkpoint.require_model`)."""
        from mtkit import checkpoint

        ckpt = checkpoint.load(self.path, mmap=True)
        checkpoint.require_model(ckpt, self.path)
        return ckpt

    def decode_defaults(self) -> dict[str, Any]:
        return defaults.of(self.checkpoint(), where=self.path)

    def describe(self) -> dict[str, Any]:
        return describe_file(self.path)


class RunDirectory:
    """A run directory: it translates with its newest readable checkpoint, and describes the whole run."""

    kind = "mtkit run directory"
    engine = "mtkit"

    def __init__(self, path: Path):
        self.path = path

    @staticmethod
    def claims(path: Path) -> bool:
        """A directory with a run's marks (asked after the exported and Hugging Face directories)."""
        marks = ("config.json", "metrics.jsonl", "run.json")
        return path.is_dir() and (any((path / m).is_file() for m in marks) or any(path.glob("*.pt")))

    def newest(self) -> Path:
        return Path(self._newest()["path"])

    def checkpoint(self) -> dict[str, Any]:
        return dict(self._newest()["checkpoint"])

    def decode_defaults(self) -> dict[str, Any]:
        """Its newest readable checkpoint's."""
        newest = self._newest()
        return defaults.of(newest["checkpoint"], where=newest["path"])

    def _newest(self) -> dict[str, Any]:
        """The newest readable checkpoint's path and dict, read once (as resume picks it), or one sentence."""
        newest, unreadable = _newest_readable(
            self.path, _checkpoints(self.path), read=lambda p: {"path": str(p), "checkpoint": ModelFile(p).checkpoint()}
        )
        if newest is None:
            why = f": {unreadable[0]['file']}: {unreadable[0]['why']}" if unreadable else ""
            raise MtkitError(f"{self.path} is a run directory without a readable checkpoint{why}.")
        return newest

    def describe(self) -> dict[str, Any]:
        return describe_run(self.path)


def _vocabulary(vocab: bytes | None) -> dict[str, Any] | None:
    if not vocab:
        return None
    from mtkit.data.tokenizer import load_tokenizer

    try:
        pieces: int | None = len(load_tokenizer(vocab))
    except Exception:  # sentencepiece's own errors have no common type; the size is then unknown
        pieces = None
    return {"pieces": pieces, "sha256": hashlib.sha256(vocab).hexdigest(), "bytes": len(vocab)}


def describe_file(path: Path, ckpt: dict[str, Any] | None = None) -> dict[str, Any]:
    """A model or checkpoint file (or the dict a Marian directory was read into: `ckpt`); a damaged or foreign one
    is one sentence."""
    from mtkit import checkpoint

    if ckpt is None:
        ckpt = checkpoint.load(path, mmap=True)
    checkpoint.require_model(ckpt, path)
    try:
        config = checkpoint.config_of(ckpt)
        state = ckpt["model"]
        params = parameters(state)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise MtkitError(f"{path} is an mtkit file, but a damaged one ({type(exc).__name__}: {exc}).") from None
    data, progress = ckpt.get("data") or {}, ckpt.get("progress") or {}
    return {
        "path": str(path),
        "bytes": sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size,
        "kind": ckpt.get("kind"),
        "format_version": ckpt["version"],
        "architecture": architecture(config),
        "model_config": ckpt["model_config"],
        "parameters": params,
        "vocabulary": _vocabulary(ckpt.get("vocab")),
        "step": int(ckpt.get("step", 0)),
        "epoch": data["epoch"] + 1 if "epoch" in data else None,
        "training_hours": round(progress["elapsed"] / 3600, 4) if "elapsed" in progress else None,
        "best_valid": best_score(ckpt),
        "train_config": ckpt.get("train_config"),
        "provenance": ckpt.get("provenance"),
        "averaged_from": ckpt.get("averaged_from"),
        "taken_from": ckpt.get("taken_from"),
        "student": distilled_from(ckpt.get("provenance")),
        "shortlist": _shortlist(ckpt.get("shortlist")),
        "decode_defaults": defaults.of(ckpt, where=path),
    }


def _shortlist(record: Any) -> dict[str, Any] | None:
    """What a model file's shortlist is (mtkit/data/shortlist.py), without its tables."""
    if not isinstance(record, dict):
        return None
    return {k: record.get(k) for k in ("k", "frequent_count", "learned_from")}


# ---- a run directory ------------------------------------------------------------------------------------


def _step_of(path: Path, numbered: dict[int, Path]) -> int | None:
    """checkpoint_<step>.pt by its name; last/best by the numbered file they are a link to, else by loading."""
    match = CHECKPOINT_NAME.fullmatch(path.name)
    if match:
        return int(match.group(1))
    for step, other in numbered.items():
        if os.path.samefile(path, other):
            return step
    from mtkit import checkpoint

    try:
        return int(checkpoint.load(path, mmap=True).get("step", 0))
    except MtkitError:
        return None


def _checkpoints(run: Path) -> list[dict[str, Any]]:
    files = sorted(p for p in run.glob("*.pt") if p.is_file())
    numbered = {int(m.group(1)): p for p in files if (m := CHECKPOINT_NAME.fullmatch(p.name))}
    rows = [{"file": p.name, "step": _step_of(p, numbered), "bytes": p.stat().st_size} for p in files]
    return sorted(rows, key=lambda r: (r["step"] is None, r["step"] or 0, r["file"]))


def describe_run(run: Path) -> dict[str, Any]:
    config = run / "config.json"
    checkpoints = _checkpoints(run)
    if not config.is_file() and not (run / "metrics.jsonl").is_file() and not checkpoints:
        raise MtkitError(f"{run} is not an mtkit run directory (no config.json, metrics.jsonl or checkpoints).")
    try:
        saved = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else None
    except ValueError:
        raise MtkitError(f"{config} is not valid JSON; is {run} an mtkit run directory?") from None
    newest, unreadable = _newest_readable(run, checkpoints)
    return {
        "run": str(run),
        "config": saved,
        "metrics": run_metrics(run),
        "checkpoints": checkpoints,
        "newest": newest,
        "unreadable": unreadable,
        "provenance": read_run_json(run),
    }


def _newest_readable(
    run: Path, checkpoints: list[dict[str, Any]], read: Callable[[Path], dict[str, Any]] | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The newest checkpoint that loads, as resume picks it: checkpoint_last.pt, then checkpoint_<step>.pt
    newest first, as `read` gives it (`describe_file`: what `mtkit info` says of it). The damaged ones before it
    are listed with the reason, never fatal to the listing."""
    read = read or describe_file
    numbered = [r["file"] for r in reversed(checkpoints) if CHECKPOINT_NAME.fullmatch(r["file"])]
    unreadable: list[dict[str, Any]] = []
    for name in dict.fromkeys(["checkpoint_last.pt", *numbered]):
        if not (run / name).is_file():
            continue
        try:
            return read(run / name), unreadable
        except MtkitError as exc:
            unreadable.append({"file": name, "why": str(exc)})
    if not numbered and not unreadable and checkpoints:  # only other .pt files (an averaged.pt)
        newest = run / checkpoints[-1]["file"]
        try:
            return read(newest), unreadable
        except MtkitError as exc:
            unreadable.append({"file": newest.name, "why": str(exc)})
    return None, unreadable
