"""Model files made from a run's checkpoints: the average of the last N (paper section 6.1: 5 for base, 20 for
big), or one checkpoint's weights without its training state; which checkpoints a run directory offers, and the
refusal of an output that would replace one of them. The file format itself is mtkit/checkpoint.py's."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint
from mtkit.config import config_diff
from mtkit.errors import MtkitError
from mtkit.facts import CHECKPOINT_FILE, CHECKPOINT_NAME
from mtkit.sources.defaults import KEY


def run_checkpoints(run: str | os.PathLike, last: int) -> list[Path]:
    """The newest `last` checkpoint_<step>.pt files of a run directory by step, oldest first.

    checkpoint_last.pt and checkpoint_best.pt are copies of numbered ones and never counted.
    """
    run = Path(run)
    if not run.is_dir():
        raise MtkitError(f"run directory {run} does not exist.")
    if last < 1:
        raise MtkitError(f"--last must be a positive number of checkpoints, got {last}.")
    names = ((p, CHECKPOINT_NAME.fullmatch(p.name)) for p in run.iterdir())
    numbered = sorted((int(m.group(1)), p) for p, m in names if m)
    if not numbered:
        raise MtkitError(f"{run} holds no checkpoint_<step>.pt files to average.")
    return [p for _, p in numbered[-last:]]


def check_output(output: str | os.PathLike, inputs: Sequence[str | os.PathLike]) -> None:
    """Refuse, before anything is read or written, an output that would replace what a run needs.

    `average` writes a model-only file: over one of its inputs, or over a training checkpoint
    (checkpoint_<step>.pt, checkpoint_last.pt, checkpoint_best.pt), it would destroy the
    training state that resume and later averages read. Paths are compared as files (resolved
    links, same inode), never as strings: `-o ./B`, `-o link-to-B` and a hard link are all B.
    """
    out = Path(output)
    if out.is_dir():
        raise MtkitError(f"--output {out} is a directory; give a file name, e.g. {out / 'averaged.pt'}.")
    for given in inputs:
        if out.resolve() == Path(given).resolve() or (out.exists() and os.path.samefile(out, given)):
            raise MtkitError(f"--output {out} is {given}, one of the checkpoints to average; give another file name.")
    if CHECKPOINT_FILE.fullmatch(out.name):
        raise MtkitError(
            f"--output {out} is named like a training checkpoint, and `average` writes a model-only file "
            "that resume and `average RUN` would take for one; name it e.g. averaged.pt."
        )


def _tied_keys(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """Each state_dict key mapped to the first key that holds the very same tensor (shared embeddings, 3.4)."""
    first: dict[tuple, str] = {}
    return {
        key: first.setdefault(
            (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype), key
        )
        for key, t in state.items()
    }


# What only resuming needs: Adam's two moments (twice the weights' size), the loss scaler, the random states.
RESUME_ONLY = ("optimizer", "scaler", "rng")


def model_file(path: str | os.PathLike) -> dict[str, Any]:
    """A kind "model" file of one checkpoint: the same weights and everything `info`, `export` and decoding read
    (settings, step, scores, provenance), without the training state only resuming needs (a third of the size with
    Adam); `taken_from` names the checkpoint, its step and sha256."""
    ckpt = checkpoint.load(path, mmap=True)
    checkpoint.check_finite(ckpt, path)
    model = {key: value for key, value in ckpt.items() if key not in RESUME_ONLY}
    return {**model, "kind": "model", "taken_from": _source(path, ckpt)}


def average(paths: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """A kind "model" file whose weights are the checkpoints' mean (paper section 6.1: last 5 or 20); of one
    checkpoint, its `model_file` (the same weights, not an "average of 1").

    Streams: one checkpoint (memory-mapped) plus a float32 accumulator at a time. Tied weights
    are averaged once and saved as one tensor under all their keys, so the tie survives a
    save and load. Checkpoints of different configs or vocabularies are refused.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise MtkitError("no checkpoints to average.")
    if len(paths) == 1:
        return model_file(paths[0])
    first = checkpoint.load(paths[0], mmap=True)
    checkpoint.check_finite(first, paths[0])
    config, vocab, state = checkpoint.config_of(first), first.get("vocab"), first["model"]
    tied = _tied_keys(state)
    total = {
        key: state[key].to(torch.float32, copy=True) for key in set(tied.values()) if state[key].is_floating_point()
    }
    step = int(first.get("step", 0))
    sources, newest, defaults = [_source(paths[0], first)], first.get("provenance"), first.get(KEY)
    for path in paths[1:]:
        ckpt = checkpoint.load(path, mmap=True)
        checkpoint.check_finite(ckpt, path)
        diff = config_diff(config, checkpoint.config_of(ckpt))
        if diff:
            raise MtkitError(f"cannot average {paths[0]} and {path}: their model configs differ ({'; '.join(diff)}).")
        if ckpt.get("vocab") != vocab:
            raise MtkitError(f"cannot average {paths[0]} and {path}: their SentencePiece vocabularies differ.")
        if set(ckpt["model"]) != set(state):
            odd = sorted(set(ckpt["model"]) ^ set(state))
            raise MtkitError(f"cannot average {paths[0]} and {path}: weights {', '.join(odd)} are in only one of them.")
        for key, acc in total.items():
            acc.add_(ckpt["model"][key])
        sources.append(_source(path, ckpt))
        if int(ckpt.get("step", 0)) >= step:
            step, newest, defaults = int(ckpt.get("step", 0)), ckpt.get("provenance", newest), ckpt.get(KEY, defaults)
        del ckpt
    mean: dict[str, torch.Tensor] = {}
    for key in tied.values():
        if key not in mean:  # integer tensors, if any, are taken from the first file
            mean[key] = total[key].div_(len(paths)).to(state[key].dtype) if key in total else state[key].clone()
    return {
        "format": checkpoint.FORMAT,
        "version": checkpoint.VERSION,
        "kind": "model",
        "model_config": dataclasses.asdict(config),
        "model": {key: mean[tied[key]] for key in state},
        "vocab": vocab,
        "step": step,
        "provenance": newest,
        "averaged_from": sources,
        **({KEY: defaults} if defaults is not None else {}),  # the newest's (mtkit/sources/defaults.py)
    }


def _source(path: str | os.PathLike, ckpt: dict[str, Any]) -> dict[str, Any]:
    """One averaged file as the average's provenance names it: the file as given, its step and sha256."""
    from mtkit.provenance import sha256_file

    return {"file": str(path), "step": int(ckpt.get("step", 0)), "sha256": sha256_file(Path(path))}
