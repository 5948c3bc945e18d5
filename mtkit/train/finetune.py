"""`mtkit train DATA --init MODEL`: a run that starts from a trained model's weights (fine-tuning).

MODEL is anything mtkit/sources/ names: an mtkit model or checkpoint, a run directory, a Hugging Face Marian
directory (an OPUS-MT model too) or a Hub name. The architecture is MODEL's: a `--preset` or `--set` that disagrees
is refused in one sentence, as is data encoded with another vocabulary (`mtkit bpe DATA --from MODEL`
encodes it with MODEL's own). Only the weights are taken: the optimizer starts fresh, and where the user
gives none, the schedule is the fine-tuning one below. Everything else is an ordinary run; run.json
names the starting model and its sha256 (`Start.record`).

The fine-tuning schedule: Eq. (3)'s shape (linear warmup, then inverse square root) with a short warmup,
FINETUNE_WARMUP updates (or --warmup), and its peak scaled to FINETUNE_PEAK_LR (unless --lr-scale is
given), a tenth or less of the paper's peak (7e-4 for `base`): the rate people fine-tune OPUS-MT models at,
low enough to keep what the model knows.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint, sources
from mtkit.config import ModelConfig, config_diff
from mtkit.errors import MtkitError

FINETUNE_WARMUP = 1000  # updates
FINETUNE_PEAK_LR = 1e-4
# Fields a fine-tuning run may change: regularisation, not the architecture.
FREE_FIELDS = ("dropout", "attention_dropout", "activation_dropout")


@dataclass(frozen=True)
class Start:
    """The weights a run starts from, the architecture they fix, and what run.json says of them."""

    model_cfg: ModelConfig
    state: dict[str, torch.Tensor]
    vocab: bytes
    record: dict[str, Any]


def sha256_of(path: Path) -> str:
    """A file's sha256, or a directory's: of its files' names and contents, in name order."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(str(f.relative_to(path)).encode() + b"\0")
        with open(f, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def load_start(name: str, revision: str | None = None) -> Start:
    """MODEL's weights and config (`name`: what the user typed, a path or a Hub name at `revision`)."""
    source = sources.find(name, revision)
    ckpt = source.checkpoint()
    if not ckpt.get("vocab"):
        raise MtkitError(f"{name} holds no vocabulary, so data cannot be encoded as it was trained.")
    cfg = checkpoint.config_of(ckpt)
    path = source.path
    if isinstance(source, sources.RunDirectory):  # the checkpoint it starts from, not the whole run
        path = source.newest()
    record = {"model": name, "path": str(path.resolve()), "sha256": sha256_of(path)}
    return Start(cfg, ckpt["model"], ckpt["vocab"], record)


def architecture(start: Start, preset: ModelConfig | None, overrides: dict[str, Any], name: str) -> ModelConfig:
    """MODEL's config with the free fields the user gave; a preset or override that disagrees is one sentence."""
    fixed = {k: v for k, v in overrides.items() if k not in FREE_FIELDS}
    differ = [k for k, v in fixed.items() if getattr(start.model_cfg, k) != v]
    if differ:
        k = differ[0]
        raise MtkitError(
            f"--init {name} fixes the architecture, and its {k} is {getattr(start.model_cfg, k)!r}, not "
            f"{fixed[k]!r}; drop that option (the model's architecture is used)."
        )
    if preset is not None:
        ignore = {"vocab_size", "tgt_vocab_size", "max_positions", *FREE_FIELDS}
        diffs = [d for d in config_diff(start.model_cfg, preset) if d.split(":")[0] not in ignore]
        if diffs:
            raise MtkitError(
                f"--init {name} fixes the architecture, which is not --preset's ({diffs[0]}, model != preset); "
                "drop --preset or pick the one it was trained with."
            )
    free = {k: v for k, v in overrides.items() if k in FREE_FIELDS}
    return dataclasses.replace(start.model_cfg, **free)


def check_data(start: Start, data_vocab: bytes, data: str, name: str) -> None:
    """The data must be encoded with MODEL's own vocabulary; said before anything is built."""
    if data_vocab != start.vocab:
        raise MtkitError(
            f"{data} was encoded with another vocabulary than {name}'s; encode it with the model's own: "
            f"mtkit bpe {data} --from {name}."
        )


def schedule_defaults(cfg: ModelConfig, warmup: int | None = None) -> dict[str, Any]:
    """TrainConfig fields for fine-tuning, under what the user gives: the warmup (`warmup` when the user gave
    one) and a scale putting the peak at FINETUNE_PEAK_LR (Eq. 3 peaks at d_model^-0.5 x warmup^-0.5)."""
    warmup = warmup or FINETUNE_WARMUP
    return {"warmup": warmup, "lr_scale": FINETUNE_PEAK_LR / (cfg.d_model**-0.5 * warmup**-0.5)}


def start_from(trainer: Any, start: Start) -> None:
    """A new run's freshly built model takes MODEL's weights (every one, or one sentence); run.json will name MODEL.

    Called once, by `mtkit.train.trainer.train`, for a run that resumes nothing (a resumed run continues its
    checkpoint). `trainer` is a Trainer (not imported: the trainer imports this module)."""
    missing, unexpected = trainer.model.load_state_dict(start.state, strict=False)
    if missing or unexpected:
        raise MtkitError(
            f"--init {start.record['model']}'s weights do not fit its own config ({missing + unexpected})."
        )
    trainer.started_from = start.record
