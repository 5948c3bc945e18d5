"""Resuming a run, the rules about files: which checkpoint to continue from, and what it must agree with.

`find_checkpoint` takes checkpoint_last.pt, or when that is unreadable (or holds NaN weights) the
newest readable checkpoint_<step>.pt, skipping the one that is the same file as last (a hard
link, see `checkpoint.save_checkpoint`), with a warning naming the broken file. Under torchrun
every rank reads RUN itself (as fairseq and Lightning do: the optimizer state of `big` is too
large to broadcast), so `agreed_checkpoint` has the ranks compare what they found and refuses
when they differ: RUN was not on a filesystem every node sees. `check_same_run` refuses another
model config, another SentencePiece model or another corpus (bpe.json's sha256 of each raw input);
`kept_max_tokens` keeps the value --max-tokens auto resolved to when the run started, and `kept_runtime`
the runtime decisions it made (precision, the fp32 CPU products' backend, packing: `runtime_record`), so
that a measurement which could answer otherwise at this start (oneDNN against MKL is close on some CPUs)
cannot make a resumed run compute differently from a straight one. What a checkpoint holds is the
trainer's to say (`Trainer.state_dict`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint
from mtkit.config import ModelConfig, TrainConfig, config_diff, config_from_dict
from mtkit.data.dataset import DataDir
from mtkit.errors import MtkitError
from mtkit.facts import CHECKPOINT_NAME
from mtkit.runtime import Runtime
from mtkit.runtime.matmul import BACKEND_ENV
from mtkit.train import distributed as dist
from mtkit.train.plan import TrainingData

logger = logging.getLogger(__name__)

# ---- which checkpoint ---------------------------------------------------------------------------------


def check_run_config(run_dir: Path, model_cfg: ModelConfig) -> None:
    """Refuse a run directory whose config.json describes another model."""
    saved = run_dir / "config.json"
    if not saved.is_file():
        return
    try:
        old = config_from_dict(ModelConfig, json.loads(saved.read_text(encoding="utf-8"))["model"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MtkitError(f"{saved} is not a valid mtkit run config ({exc}); use another --out.") from None
    diff = config_diff(old, model_cfg)
    if diff:
        raise MtkitError(
            f"{run_dir} holds a run with a different model config ({'; '.join(diff)}); "
            "use the same options to resume, or another --out."
        )


def _numbered_newest_first(run_dir: Path) -> list[Path]:
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := CHECKPOINT_NAME.fullmatch(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def _readable(path: Path) -> dict[str, Any]:
    """A checkpoint with training state and finite weights, or MtkitError saying what is wrong with it."""
    ckpt = checkpoint.load_training_state(path)
    checkpoint.check_finite(ckpt, path)
    return ckpt


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def find_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """checkpoint_last.pt, else the newest readable numbered checkpoint (warning), else None.

    None with checkpoint files present is refused: starting afresh there would mix two runs.
    """
    if not run_dir.is_dir():  # a rank > 0 on a host that does not share rank 0's disk
        return None
    last = run_dir / "checkpoint_last.pt"
    broken: list[str] = []
    skip = None
    if last.is_file():
        try:
            return _readable(last)
        except MtkitError as exc:
            broken.append(f"{last.name}: {exc}")
            skip = _inode(last)
    for path in _numbered_newest_first(run_dir):
        if skip is not None and _inode(path) == skip:
            continue  # the same bytes as the broken checkpoint_last.pt
        try:
            ckpt = _readable(path)
        except MtkitError as exc:
            broken.append(f"{path.name}: {exc}")
            continue
        why = "; ".join(broken) if broken else f"{last.name} is missing"
        logger.warning("resuming from %s, the newest readable checkpoint (%s)", path.name, why)
        return ckpt
    leftovers = sorted(p.name for p in run_dir.glob("checkpoint*.pt"))
    if leftovers:
        why = f" ({'; '.join(broken)})" if broken else ""
        raise MtkitError(
            f"{run_dir} holds checkpoints ({', '.join(leftovers)}) but none can be resumed{why}; "
            "rerun with --restart to move them aside and start afresh, or use another --out."
        )
    return None


def _where(ckpt: dict[str, Any] | None) -> tuple[int, int, int, float] | None:
    """What tells two checkpoints apart cheaply: step, position and the run's elapsed seconds (a float no
    other save of any run repeats)."""
    if ckpt is None:
        return None
    data = ckpt["data"]
    return ckpt["step"], data["epoch"], data["batch"], float(ckpt["progress"]["elapsed"])


def _said(where: tuple[int, int, int, float] | None) -> str:
    return "no checkpoint" if where is None else f"the checkpoint of step {where[0]}, {where[3]:.0f} s into its run"


def agreed_checkpoint(run_dir: Path, world: dist.World) -> dict[str, Any] | None:
    """`find_checkpoint` on every rank, and the same answer on every rank, or one sentence on every rank.

    Each rank reads RUN itself. Where RUN is a directory of each node's own disk, rank 0 would
    resume and the others start at step 0 with empty Adam moments; DDP syncs only the weights,
    so the replicas would drift apart silently and later hang. A refusal found on one rank
    (no readable checkpoint) is every rank's, so that no rank waits for the others forever.
    """
    try:
        ckpt, problem = find_checkpoint(run_dir), ""
    except MtkitError as exc:
        ckpt, problem = None, str(exc)
    seen = dist.all_gather_objects((problem, _where(ckpt)), world)
    problems = [said for said, _ in seen if said]
    if problems:
        raise MtkitError(problem or problems[0])
    first = seen[0][1]
    for rank, (_, where) in enumerate(seen):
        if where != first:
            raise MtkitError(
                f"the processes see different things in {run_dir} (rank 0: {_said(first)}; rank {rank}: "
                f"{_said(where)}): RUN must be on a filesystem every node sees, so give --out a path on a shared disk."
            )
    return ckpt


# ---- what a checkpoint must agree with ----------------------------------------------------------------


def check_corpus(
    saved: dict[str, dict[str, str]] | None, current: dict[str, dict[str, str]], run_dir: Path, data: DataDir
) -> None:
    """Refuse another corpus: one sentence naming the first file whose sha256 differs."""
    for split, langs in (saved or {}).items():
        for lang, sha in langs.items():
            now = current.get(split, {}).get(lang)
            if now is not None and now != sha:
                raise MtkitError(
                    f"{run_dir} was trained on other data: raw/{split}.{lang} had sha256 {sha[:12]}... "
                    f"and {data.path}/bpe.json now says {now[:12]}...; resume with the same data, "
                    "or use another --out."
                )


def check_same_run(
    ckpt: dict[str, Any], run_dir: Path, model_cfg: ModelConfig, cfg: TrainConfig, data: TrainingData
) -> None:
    """Refuse to resume `ckpt` with another model, SentencePiece model or corpus; warn about changed
    training settings (they are allowed: a lower --lr-scale or a later --max-steps is a common resume)."""
    diff = config_diff(checkpoint.config_of(ckpt), model_cfg)
    if diff:
        raise MtkitError(
            f"checkpoint_last.pt in {run_dir} has a different model config "
            f"({'; '.join(diff)}); use the same options to resume, or another --out."
        )
    if ckpt.get("vocab") != data.vocab:
        raise MtkitError(
            f"{run_dir} was trained with another SentencePiece model than the data's spm.model; "
            "use the same data to resume, or another --out."
        )
    check_corpus(ckpt.get("corpus"), data.corpus, run_dir, data.dir)
    # "auto" (precision, compile, length buckets) is resolved afresh each start, so the saved value is no change;
    # what --max-tokens auto falls back to on a CPU matters only at a fresh start.
    unresolved = {f.name: "auto" for f in dataclasses.fields(cfg) if getattr(cfg, f.name) == "auto"}
    saved = config_from_dict(TrainConfig, ckpt["train_config"])
    saved = dataclasses.replace(saved, **unresolved, max_tokens_fallback=cfg.max_tokens_fallback)
    if cfg.update_tokens > 0:  # a token target: update_freq is derived from it at start (settle), as auto is
        saved = dataclasses.replace(saved, update_tokens=cfg.update_tokens, update_freq=cfg.update_freq)
    changed = config_diff(saved, cfg)
    if changed:
        logger.warning("resuming with changed training settings: %s", "; ".join(changed))


def kept_max_tokens(cfg: TrainConfig, ckpt: dict[str, Any]) -> TrainConfig:
    """--max-tokens auto on resume: the value the run resolved at its start (its checkpoint's batch position
    records it), not a new probe, which could answer another number and so make other batches."""
    if cfg.max_tokens != "auto":
        return cfg
    tokens = int(ckpt["data"]["max_tokens"])
    logger.info("--max-tokens auto: keeping the %s tokens a batch this run resolved at its start", f"{tokens:,}")
    return dataclasses.replace(cfg, max_tokens=tokens)


def runtime_record(runtime: Runtime, device: torch.device) -> dict[str, Any]:
    """What a checkpoint keeps of the run's runtime decisions (plain values: it loads with weights_only)."""
    caches = list(runtime.kernel_caches) if runtime.kernel_caches is not None else None
    return {**dataclasses.asdict(runtime), "kernel_caches": caches, "device": device.type}


def kept_runtime(ckpt: dict[str, Any] | None, precision: str, device: torch.device, compiled: bool) -> Runtime | None:
    """The runtime `ckpt`'s run decided at its start, for its resume; None (decide afresh, as at a start) for a
    checkpoint older than the record, another device type, another --precision or MTKIT_CPU_MATMUL pin asked
    for now, or oneDNN's products under a compiled step (which cannot run them)."""
    saved = (ckpt or {}).get("runtime")
    if not isinstance(saved, dict) or saved.get("device") != device.type:
        return None
    try:
        fields = {f.name: saved[f.name] for f in dataclasses.fields(Runtime)}
        caches = fields["kernel_caches"]
        kept = Runtime(**{**fields, "kernel_caches": tuple(caches) if caches is not None else None})
    except (KeyError, TypeError, MtkitError):  # a field renamed since, or a oneDNN this build lacks
        return None
    pinned = os.environ.get(BACKEND_ENV, "auto")
    if precision not in ("auto", kept.precision) or pinned not in ("auto", kept.matmul):
        return None
    if compiled and device.type == "cpu" and kept.matmul == "onednn":
        return None
    logger.debug("keeping the run's runtime decisions from its checkpoint: %s", kept)
    return kept


def checkpoint_to_resume(
    run_dir: Path, world: dist.World, model_cfg: ModelConfig, cfg: TrainConfig, data: TrainingData
) -> dict[str, Any] | None:
    """The checkpoint every rank resumes from (None: a fresh start), refused when it is not this run's (what it
    keeps of its start, `kept_max_tokens` and `kept_runtime`, the run's settings take in `settings.settle`)."""
    check_run_config(run_dir, model_cfg)
    ckpt = agreed_checkpoint(run_dir, world)
    if ckpt is not None:
        check_same_run(ckpt, run_dir, model_cfg, cfg, data)
    return ckpt
