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

On a CPU, where the user gives none of them (`cpu_defaults`): one batch an update (--update-freq 1, not the
preset's ~25,000 tokens an update, which is minutes an update there) of FINETUNE_CPU_MAX_TOKENS tokens, and a
warmup that fits the budget: a tenth of the updates the run can make (--max-steps, or what --max-minutes buys
at the estimated CPU speed, `cpu_update_seconds`), at most FINETUNE_WARMUP. Without them 30 minutes of
fine-tuning an OPUS-MT-sized model on 2 cores was about 30 updates, every one under 3% of the peak rate.

A run directory that already holds a run is refused (`check_new_run`): resuming it would ignore MODEL.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mtkit import checkpoint, sources
from mtkit.config import ModelConfig, TrainConfig, config_diff
from mtkit.errors import MtkitError

FINETUNE_WARMUP = 1000  # updates
FINETUNE_PEAK_LR = 1e-4
# A CPU's batch when fine-tuning: the small preset's, measured faster per token than 4,096 on 2 cores
# (mtkit/config.py), and an update a few seconds long for an OPUS-MT-sized model there.
FINETUNE_CPU_MAX_TOKENS = 2048
WARMUP_SHARE = 10  # the warmup is at most a tenth of the updates the budget allows
# `small`'s training speed on 2 CPU cores (source + target tokens a second), the yardstick of the budget's estimate
# (docs/benchmarks.md, "Figures behind the code's choices": this module).
SMALL_CPU_TOKENS_PER_S = 4650.0
# Fields a fine-tuning run may change: regularisation, not the architecture.
FREE_FIELDS = ("dropout", "attention_dropout", "activation_dropout")
TRAIN_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainConfig))


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


def cpu_defaults(model: ModelConfig, train: TrainConfig, given: Mapping[str, Any], threads: int) -> dict[str, Any]:
    """Fine-tuning's TrainConfig fields on a CPU where the user gave none (the module docstring's rule): one batch
    of FINETUNE_CPU_MAX_TOKENS an update, and a warmup of a tenth of the budget's updates (at most 1,000)."""
    out: dict[str, Any] = {}
    if "update_freq" not in given:
        out.update(update_freq=1, update_tokens=0)
    if "max_tokens" not in given:
        out.update(max_tokens=FINETUNE_CPU_MAX_TOKENS, max_tokens_fallback=FINETUNE_CPU_MAX_TOKENS)
    if "warmup" not in given:
        cpu = dataclasses.replace(train, **{**out, **{k: v for k, v in given.items() if k in TRAIN_FIELDS}})
        budget = [cpu.max_steps] if "max_steps" in given else []
        if cpu.max_minutes > 0:
            budget.append(int(60 * cpu.max_minutes / cpu_update_seconds(model, cpu, threads)))
        if budget:
            out["warmup"] = max(1, min(FINETUNE_WARMUP, min(budget) // WARMUP_SHARE))
    return out


def _compute_per_token(cfg: ModelConfig) -> float:
    """Weights a token passes through (6 N FLOPs a token in training; Kaplan et al. 2020): a cost ratio."""
    d, d_ff = cfg.d_model, cfg.d_ff
    encoder = cfg.encoder_layers * (4 * d * d + 2 * d * d_ff)
    decoder = cfg.decoder_layers * (8 * d * d + 2 * d * d_ff)
    return encoder + decoder + cfg.target_vocab_size * d / 2  # the output projection serves target tokens only


def cpu_update_seconds(model_cfg: ModelConfig, train_cfg: TrainConfig, threads: int) -> float:
    """A rough time per update on CPU, scaled from `small`'s measured throughput by compute and threads."""
    from mtkit.config import PRESETS

    small = dataclasses.replace(PRESETS["small"].model, vocab_size=8000)
    per_token = _compute_per_token(model_cfg) / _compute_per_token(small)
    if train_cfg.max_tokens == "auto":  # as a CPU resolves it: the preset's value
        train_cfg = dataclasses.replace(train_cfg, max_tokens=train_cfg.max_tokens_fallback)
    train_cfg = train_cfg.for_world(1)  # an estimate's update, not the run's settings
    tokens = 2 * int(train_cfg.max_tokens) * train_cfg.update_freq
    return tokens * per_token / (SMALL_CPU_TOKENS_PER_S * max(threads or torch.get_num_threads(), 1) / 2)


def check_new_run(run_dir: Path) -> None:
    """--init starts a run: a RUN that already holds one (a config or a checkpoint) is refused in one sentence,
    never resumed with MODEL ignored. (--restart moves such a run aside first.)"""
    if (run_dir / "config.json").is_file() or any(run_dir.glob("checkpoint*.pt")):
        raise MtkitError(f"{run_dir} holds a run: resume it without --init, or use another --out.")


def start_weights(model: torch.nn.Module, resumed: dict[str, torch.Tensor] | None, init: Start | None) -> None:
    """A freshly built model takes its starting weights, in the one place a run's weights come from: the
    checkpoint it resumes (every weight), else --init's model (every one, or one sentence), else it keeps its
    seeded initialisation. Called by `settings.settle` before the model is moved or its runtime applied."""
    if resumed is not None:
        model.load_state_dict(resumed)
        return
    if init is None:
        return
    missing, unexpected = model.load_state_dict(init.state, strict=False)
    if missing or unexpected:
        raise MtkitError(f"--init {init.record['model']}'s weights do not fit its own config ({missing + unexpected}).")
