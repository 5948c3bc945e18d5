"""Resuming a run: which checkpoint to continue from, what it must agree with, and what a checkpoint holds.

`find_checkpoint` takes checkpoint_last.pt, or when that is unreadable (or holds NaN weights) the
newest readable checkpoint_<step>.pt, skipping the one that is the same file as last (a hard
link, see `checkpoint.save_checkpoint`), with a warning naming the broken file. `restore` refuses
another model config, another SentencePiece model or another corpus (bpe.json's sha256 of each
raw input); `payload` is the training state that `restore` reads back.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit import checkpoint
from mtkit.config import ModelConfig, TrainConfig, config_diff, config_from_dict
from mtkit.data.dataset import DataDir
from mtkit.errors import MtkitError
from mtkit.train import distributed as dist

if TYPE_CHECKING:
    from mtkit.train.trainer import Trainer

logger = logging.getLogger(__name__)

CHECKED_SPLITS = ("train", "valid")  # the splits whose batches and scores a resumed run depends on


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint so that a resumed run continues exactly."""

    step: int = 0  # updates applied
    epoch: int = 0  # epoch in progress, from 0
    batch: int = 0  # next batch of this rank's share of the epoch
    best: float = math.inf  # best validation score so far (lower is better)
    bad_valids: int = 0  # validations since the last new best
    nonfinite: int = 0  # non-finite losses or gradients in a row
    elapsed: float = 0.0  # wall-clock seconds of the training loop (validation and saving included)


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
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := checkpoint.CHECKPOINT_NAME.fullmatch(p.name))]
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


# ---- what a checkpoint must agree with ----------------------------------------------------------------


def corpus_of(data: DataDir) -> dict[str, dict[str, str]]:
    """bpe.json's sha256 of each raw input file, for the splits a resumed run depends on."""
    splits = data.info.get("splits", {})
    return {split: dict(splits[split].get("inputs", {})) for split in CHECKED_SPLITS if split in splits}


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


def _check_same_model(ckpt: dict[str, Any], t: Trainer) -> None:
    diff = config_diff(checkpoint.config_of(ckpt), t.model_cfg)
    if diff:
        raise MtkitError(
            f"checkpoint_last.pt in {t.run_dir} has a different model config "
            f"({'; '.join(diff)}); use the same options to resume, or another --out."
        )
    if ckpt.get("vocab") != t.vocab:
        raise MtkitError(
            f"{t.run_dir} was trained with another SentencePiece model than the data's spm.model; "
            "use the same data to resume, or another --out."
        )


# ---- restore and save ---------------------------------------------------------------------------------


def _restore_position(ckpt: dict[str, Any], t: Trainer) -> None:
    """Epoch and batch from the checkpoint; the start of the next epoch when the batch plan changed."""
    cfg, p, data = t.cfg, t.progress, ckpt["data"]
    p.epoch, p.batch = data["epoch"], data["batch"]
    if (data["world_size"], data["max_tokens"], data["seed"]) != (t.world.size, cfg.max_tokens, cfg.seed):
        logger.warning(
            "world size, --max-tokens or --seed changed, so the batches differ: "
            "continuing at the start of epoch %d instead of where the run stopped",
            p.epoch + 2,
        )
        p.epoch, p.batch = (p.epoch + 1 if p.batch else p.epoch), 0


def restore(ckpt: dict[str, Any], t: Trainer) -> int:
    """Load model, optimizer, scaler, progress and RNG state into the trainer; returns the step."""
    cfg, world, p = t.cfg, t.world, t.progress
    _check_same_model(ckpt, t)
    check_corpus(ckpt.get("corpus"), t.corpus, t.run_dir, t.data)
    t.model.load_state_dict(ckpt["model"])
    t.optimizer.load_state_dict(ckpt["optimizer"])
    t.precision.load_state_dict(ckpt.get("scaler"))
    p.__dict__.update(ckpt["progress"], step=ckpt["step"])
    changed = config_diff(config_from_dict(TrainConfig, ckpt["train_config"]), cfg)
    if changed:
        logger.warning("resuming with changed training settings: %s", "; ".join(changed))
    _restore_position(ckpt, t)
    rng = ckpt["rng"]
    if len(rng) == world.size:
        checkpoint.set_rng_state(rng[world.rank])
    else:
        import torch

        torch.manual_seed(cfg.seed + world.rank + 7919 * p.step)
    return p.step


def payload(t: Trainer) -> dict[str, Any]:
    """The full training state (collective: every rank contributes its RNG state)."""
    p, cfg = t.progress, t.cfg
    rngs = dist.all_gather_objects(checkpoint.rng_state(), t.world)
    return checkpoint.model_payload(
        t.model,
        t.model_cfg,
        t.vocab,
        p.step,
        kind="checkpoint",
        train_config=dataclasses.asdict(cfg),
        optimizer=t.optimizer.state_dict(),
        scaler=t.precision.state_dict(),
        rng=rngs,
        data={
            "epoch": p.epoch,
            "batch": p.batch,
            "world_size": t.world.size,
            "max_tokens": cfg.max_tokens,
            "seed": cfg.seed,
        },
        progress={k: v for k, v in dataclasses.asdict(p).items() if k != "step"},
        corpus=t.corpus,
        provenance=t.provenance,
    )
