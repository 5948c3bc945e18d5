"""Checkpoints: written atomically, loaded safely (`weights_only=True`), rebuilt from their config.

An mtkit file is a dict:
    format        "mtkit"
    version       1
    kind          "checkpoint" (training state included) or "model" (weights only)
    model_config  dataclasses.asdict(ModelConfig)
    model         the state_dict
    vocab         the SentencePiece model's serialized bytes (or None)
    step          updates done when it was written
    provenance    the run's RUN/run.json record (mtkit/provenance.py), where the trainer wrote one
    averaged_from [{"file", "step", "sha256"}] of the checkpoints an averaged model is the mean of
    taken_from    {"file", "step", "sha256"} of the checkpoint a model file of one checkpoint was made of
    decode_defaults  the DecodeConfig fields the model decodes with unless told otherwise: {"beam": 1} for a
                  student, "shortlist": true once `mtkit shortlist` added one (mtkit/sources/defaults.py)
  and for kind "checkpoint" the training state (`Trainer.state_dict`, mtkit/train/trainer.py):
    train_config  dataclasses.asdict(TrainConfig), resolved for the world size
    optimizer     optimizer.state_dict() (Adam moments and step counts)
    scaler        GradScaler.state_dict() for fp16, else None (the schedule is a pure function of step)
    runtime       the run's runtime decisions, kept on resume: dataclasses.asdict(mtkit.runtime.Runtime) and
                  "device" (its type); missing in older checkpoints, whose resume decides afresh
    rng           one `rng_state()` dict per rank: python, numpy, torch, cuda generators
    data          {"epoch", "batch", "world_size", "max_tokens", "seed"}: where the next update starts
    progress      {"epoch", "batch", "best", "bad_valids", "nonfinite", "elapsed", "valid_due"}: early stopping,
                  wall-clock and a validation a signal cut short (mtkit/train/progress.py); missing keys default
    corpus        {split: {lang: sha256}} of the raw text bpe.json says the data was made from
  (what is resumed, and when it is refused: mtkit/train/resume.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from mtkit.atomic import atomic_file
from mtkit.config import ModelConfig, config_from_dict
from mtkit.errors import MtkitError

FORMAT, VERSION = "mtkit", 1


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """torch.save through `atomic_file`: a crash at any moment leaves the old file or the new one.

    A write that fails (disk full, quota, I/O error) is one sentence; torch reports it as a
    RuntimeError whose context is the OSError, so both are looked at.
    """
    try:
        with atomic_file(path) as f:
            torch.save(obj, f)
    except (OSError, RuntimeError) as exc:
        os_error = exc if isinstance(exc, OSError) else exc.__context__
        if not isinstance(os_error, OSError):
            raise
        raise MtkitError(
            f"cannot write {path} ({os_error.strerror or os_error}); nothing was replaced: the previous file is intact."
        ) from None


def save_checkpoint(
    payload: dict[str, Any], run_dir: str | os.PathLike, keep_last: int, best: bool = False, numbered: bool = True
) -> Path:
    """Write `checkpoint_<step>.pt` atomically, point `checkpoint_last.pt` (and `checkpoint_best.pt` when `best`)
    at it, keep the newest `keep_last`; returns the file written. `numbered=False`: only `checkpoint_best.pt`.

    The links are hard links to the new file, swapped in by rename, so the bytes are written once
    however large the model; where links are not supported they are atomic copies. Either way a
    reader always finds a complete previous or new file.
    """
    run_dir = Path(run_dir)
    if not numbered:
        atomic_save(payload, run_dir / "checkpoint_best.pt")
        return run_dir / "checkpoint_best.pt"
    path = run_dir / f"checkpoint_{payload['step']}.pt"
    atomic_save(payload, path)
    link_atomically(path, run_dir / "checkpoint_last.pt", payload)
    if best:
        link_atomically(path, run_dir / "checkpoint_best.pt", payload)
    steps = sorted(run_dir.glob("checkpoint_*.pt"), key=lambda p: _step_of(p.name))
    steps = [p for p in steps if _step_of(p.name) >= 0]
    for old in steps[:-keep_last]:
        old.unlink(missing_ok=True)  # checkpoint_last/best keep their own link to the inode
    return path


def link_atomically(source: Path, target: Path, payload: dict[str, Any] | None = None) -> None:
    """Make `target` name the same file as `source` in one rename; copy (atomically) if links fail."""
    tmp = target.with_name(f".{target.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        atomic_save(payload if payload is not None else load(source), target)


def _step_of(name: str) -> int:
    stem = name[len("checkpoint_") : -len(".pt")]
    return int(stem) if stem.isdigit() else -1


def remove_stale_temporaries(run_dir: str | os.PathLike) -> list[Path]:
    """Delete temporary files left by a process killed mid-write (they are never read)."""
    stale = [p for p in Path(run_dir).glob(".checkpoint*.tmp") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def rng_state() -> dict[str, Any]:
    """Every random generator training touches, in types that `torch.load(weights_only=True)` accepts."""
    import random

    import numpy as np

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` captured, so that dropout masks continue exactly where they stopped."""
    import random

    import numpy as np

    random.setstate(_as_tuples(state["python"]))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype("uint32"), n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def load_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """Load a kind "checkpoint" file (training state included) to resume from."""
    ckpt = load(path)
    if ckpt.get("kind") != "checkpoint" or "optimizer" not in ckpt:
        raise MtkitError(f"{path} holds no training state (kind {ckpt.get('kind')!r}); it cannot be resumed.")
    return ckpt


def model_payload(
    model: torch.nn.Module, config: ModelConfig, vocab: bytes | None, step: int = 0, kind: str = "model", **extra: Any
) -> dict[str, Any]:
    """The dict that `load` accepts, for a model and what is needed to rebuild and use it."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "model_config": dataclasses.asdict(config),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "vocab": vocab,
        "step": step,
        **extra,
    }


def load(path: str | os.PathLike, mmap: bool = False) -> dict[str, Any]:
    """Load an mtkit file safely on CPU; anything else gets one clear sentence.

    mmap=True maps the tensors from the file instead of reading them: parts never touched
    (an optimizer state, when only weights are needed) cost no memory.
    """
    path = Path(path)
    if path.is_dir():
        raise MtkitError(f"{path} is a directory, not an mtkit model or checkpoint file.")
    if not path.is_file():
        raise MtkitError(f"model file {path} does not exist.")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as exc:  # pickle, zip and weights-only errors all mean the same to a user
        raise MtkitError(f"{path} is not a readable mtkit model or checkpoint ({type(exc).__name__}).") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise MtkitError(f"{path} is not an mtkit model or checkpoint.")
    if obj.get("version") != VERSION:
        raise MtkitError(f"{path} has mtkit format version {obj.get('version')!r}; this mtkit reads version {VERSION}.")
    return obj


def require_model(ckpt: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse an mtkit file without the weights or the config to rebuild them: one sentence, not a KeyError.

    `load` accepts any mtkit dict (resume reads the training state); whatever needs the model
    (average, translate, serve, info, export) asks here first, `check_finite` included.
    """
    missing = [key for key in ("model", "model_config") if not isinstance(ckpt.get(key), dict)]
    if missing:
        raise MtkitError(
            f"{path} is an mtkit file, but a damaged one: it holds no {' and no '.join(missing)} "
            "(or it was not written by mtkit)."
        )


def check_finite(ckpt: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse weights holding NaN or inf (a diverged run): they would only make garbage or crash decoding."""
    require_model(ckpt, path)
    bad = [key for key, t in ckpt["model"].items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise MtkitError(
            f"{path} holds NaN or infinite weights ({', '.join(bad[:3])}{more}); the run diverged "
            "before it was saved: use an earlier checkpoint."
        )


def config_of(ckpt: dict[str, Any]) -> ModelConfig:
    """The ModelConfig a checkpoint, a model file or an export's record holds (its weights need not be there)."""
    if not isinstance(ckpt.get("model_config"), dict):  # callers that know the path have asked already
        raise MtkitError(
            "the model file is an mtkit file, but a damaged one: it holds no model_config "
            "(or it was not written by mtkit)."
        )
    return config_from_dict(ModelConfig, ckpt["model_config"])


def parameter_count(ckpt: dict[str, Any]) -> int:
    """The parameters of the model a checkpoint's (or an export record's) config describes, a tied weight once: the
    model built on the meta device (no memory, no weights read)."""
    from mtkit.model import Transformer

    with torch.device("meta"), without_init():
        model = Transformer(config_of(ckpt))
    return sum(p.numel() for p in model.parameters())


@contextlib.contextmanager
def without_init() -> Iterator[None]:
    """torch.nn.init's functions as no-ops while a model is built on the meta device, whose weights come next.

    On meta tensors they run PyTorch's Python decompositions, whose first use imports torch._dynamo and sympy:
    tens of MiB of memory and seconds for a process that only decodes (docs/benchmarks.md, "Figures behind the code's
    choices": this module). Transformers' `no_init_weights` does
    the same; nothing else runs in between (a process builds its models before it starts threads)."""
    names = ("uniform_", "normal_", "xavier_uniform_", "kaiming_uniform_", "zeros_", "ones_", "constant_")
    saved = {name: getattr(torch.nn.init, name) for name in names}
    try:
        for name in names:
            setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, function in saved.items():
            setattr(torch.nn.init, name, function)


def build_from(ckpt: dict[str, Any]) -> torch.nn.Module:
    """Rebuild the model from the config saved beside its weights, reporting every mismatch at once.

    The model is built without storage (on the meta device) and takes the checkpoint's tensors as its own
    (`assign`), in fp32 as a freshly built model has them: no random initialisation, and no second copy of the
    weights beside the checkpoint's (the same row). Its position
    tables, which no checkpoint holds, are computed afterwards."""
    from mtkit.model import Transformer
    from mtkit.model.transformer import PositionalEncoding

    with torch.device("meta"), without_init():
        model = Transformer(config_of(ckpt))
    # A parameter held by several modules (the output layer tied to the embedding) is assigned through one of
    # them: the others are given the same one again afterwards, so the tie holds.
    holders: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for module in model.modules():
        for name, param in module._parameters.items():
            if param is not None:
                holders.setdefault(id(param), []).append((module, name))
    state = {k: v.float() if v.is_floating_point() else v for k, v in ckpt["model"].items()}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    except RuntimeError as exc:  # shape mismatches; torch lists them all in one message
        raise MtkitError(f"the weights do not fit the saved model config: {exc}".replace("\n", " ")) from None
    for group in holders.values():
        loaded = next((p for p in (getattr(m, n) for m, n in group) if not p.is_meta), None)
        for module, name in group:
            if loaded is not None:
                setattr(module, name, loaded)
    for module in model.modules():
        if isinstance(module, PositionalEncoding):
            module.pe = PositionalEncoding(*reversed(module.pe.shape)).pe
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing weights: {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected weights: {', '.join(unexpected)}")
        raise MtkitError(f"the weights do not fit the saved model config ({'; '.join(parts)}).")
    return model
