"""A run from the user's words: the configs made in one function, with fine-tuning's rules, then the trainer.

fairseq_cli/train.py's composition root, with nanoGPT's three starts side by side: from scratch (a preset's
architecture and training defaults), resumed (RUN holds a run: mtkit/train/resume.py) or pretrained (`init`: a
model's weights and architecture, mtkit/train/finetune.py). `configure` turns what the user said (a preset, the
TrainConfig and ModelConfig fields they gave, `auto` included, --set's model fields, the model to start from)
into a ModelConfig and a TrainConfig; `train()` (mtkit/train/trainer.py) then finishes every "auto" at start.
`mtkit train` and Python callers both come through `run`, so both get the same fine-tuning rules:

    from mtkit.train.start import run
    run("data/my-en-fr", "runs/ft", init="Helsinki-NLP/opus-mt-en-fr", max_minutes=30)
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import Any

from mtkit.config import PRESETS, ModelConfig, Preset, TrainConfig, model_config
from mtkit.data.dataset import DataDir, open_data
from mtkit.device import pick_device
from mtkit.errors import MtkitError
from mtkit.train import finetune
from mtkit.train.stopping import TrainResult

logger = logging.getLogger(__name__)

DEFAULT_PRESET = "base"
MODEL_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelConfig))


def starting_model(init: str | None, revision: str | None = None) -> finetune.Start | None:
    """The model `init` names (an mtkit file, a Marian directory, or a Hub name at `revision`), read once by
    `finetune.load_start`; None without `init`. The one place a run's starting model is asked for."""
    if init is None:
        return None

    return finetune.load_start(init, revision)


def train_config(
    preset: str | None, given: Mapping[str, Any], start: finetune.Start | None, device: str, threads: int = 0
) -> tuple[Preset, TrainConfig]:
    """The preset the run starts from and its TrainConfig: the preset's training defaults, fine-tuning's where
    `start` is given (its schedule; on a CPU one batch an update and a warmup that fits the budget), and the
    user's `given` fields over them (a value the config refuses raises its ConfigError)."""
    chosen = PRESETS[preset or DEFAULT_PRESET]
    given = {k: v for k, v in given.items() if k in finetune.TRAIN_FIELDS}
    if start is not None:
        defaults = cpu_fine_tuning(start.model_cfg, chosen.train, given, device, threads)
        defaults.update(finetune.schedule_defaults(start.model_cfg, given.get("warmup") or defaults.get("warmup")))
        chosen = dataclasses.replace(chosen, train=dataclasses.replace(chosen.train, **defaults))
    if "update_freq" in given:
        given = {**given, "update_tokens": 0}  # an explicit --update-freq wins over the preset's token target
    if isinstance(chosen.train.max_tokens, int):  # what --max-tokens auto is on a CPU: the preset's value
        given = {**given, "max_tokens_fallback": chosen.train.max_tokens}
    return chosen, dataclasses.replace(chosen.train, **given)


def cpu_fine_tuning(
    model: ModelConfig, train: TrainConfig, given: Mapping[str, Any], device: str, threads: int
) -> dict[str, Any]:
    """`finetune.cpu_defaults` where the run will be on a CPU (a CPU device, or auto without CUDA); else none."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 or pick_device(device).type != "cpu":
        return {}
    return finetune.cpu_defaults(model, train, given, threads)


def architecture(
    chosen: Preset,
    preset_given: bool,
    given: Mapping[str, Any],
    overrides: Mapping[str, Any],
    data: DataDir,
    start: finetune.Start | None,
    init: str | None,
) -> ModelConfig:
    """The run's ModelConfig: the preset's with the data's vocabulary and the user's fields, or with `start` its
    model's own (a preset or field that disagrees refused; data encoded with another vocabulary refused)."""
    model_given = {k: v for k, v in given.items() if k in MODEL_FIELDS}
    if start is None:
        return model_config(chosen.name, data.vocab_size, **{**model_given, **overrides})
    name = init or start.record["model"]
    model_cfg = finetune.architecture(start, chosen.model if preset_given else None, {**model_given, **overrides}, name)
    finetune.check_data(start, data.vocab_bytes(), str(data.path), name)
    return model_cfg


def configure(
    data: DataDir,
    preset: str | None = None,
    given: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    start: finetune.Start | None = None,
    init: str | None = None,
    device: str = "auto",
    threads: int = 0,
) -> tuple[ModelConfig, TrainConfig]:
    """The run's configs from the user's words (see the module docstring): `given` TrainConfig and ModelConfig
    fields by name, `overrides` --set's model fields, `start` the model `init` names."""
    given = dict(given or {})
    chosen, train_cfg = train_config(preset, given, start, device, threads)
    model_cfg = architecture(chosen, preset is not None, given, dict(overrides or {}), data, start, init)
    return model_cfg, train_cfg


def settings(
    preset: str | None = None,
    *,
    init: str | None = None,
    revision: str | None = None,
    device: str = "auto",
    threads: int = 0,
    **given: Any,
) -> dict[str, Any]:
    """Every TrainConfig value a run with these words would use (the preset's, fine-tuning's, the user's), its
    `dropout` and `preset`: what `mtkit train --print-config` prints. `update_freq` None: from `update_tokens`."""
    chosen, train_cfg = train_config(preset, given, starting_model(init, revision), device, threads)
    resolved = {f.name: getattr(train_cfg, f.name) for f in dataclasses.fields(TrainConfig)}
    resolved["update_freq"] = None if train_cfg.update_tokens else train_cfg.update_freq
    model_given = {k: v for k, v in given.items() if k in MODEL_FIELDS}
    resolved.update(dropout=dataclasses.replace(chosen.model, **model_given).dropout, preset=chosen.name)
    return resolved


def run(
    data: str | os.PathLike,
    out: str | os.PathLike,
    preset: str | None = None,
    *,
    init: str | None = None,
    revision: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    device: str = "auto",
    threads: int = 0,
    restart: bool = False,
    **given: Any,
) -> TrainResult:
    """Train on DATA into OUT as `mtkit train` does: `preset`, `init` (a model to fine-tune: a file, a Marian
    directory or a Hub name at `revision`), `overrides` (--set's model fields) and any TrainConfig or
    ModelConfig field by name (`max_minutes=30`, `dropout=0.2`). Without a preset or `init`, on a CPU, a warning
    says what the default `base` costs an update there. Under torchrun, a rank that outlives another that died
    raises one sentence naming it (`lost_rank_sentence`)."""
    from mtkit.train import distributed
    from mtkit.train.trainer import train

    start = starting_model(init, revision)
    chosen, train_cfg = train_config(preset, given, start, device, threads)
    model_cfg = architecture(chosen, preset is not None, given, dict(overrides or {}), open_data(data), start, init)
    rank = int(os.environ.get("RANK", "0"))
    if preset is None and start is None and rank == 0:
        warn_default_preset(model_cfg, train_cfg, device, threads)
    try:
        return train(data, out, model_cfg, train_cfg, device=device, threads=threads, restart=restart, init=start)
    except RuntimeError as exc:  # a torchrun rank died or hung: one sentence, not gloo's traceback
        if int(os.environ.get("WORLD_SIZE", "1")) < 2 or not distributed.is_collective_failure(exc):
            raise
        raise MtkitError(lost_rank_sentence(rank, distributed.lost_ranks_here(), out, exc)) from None


def lost_rank_sentence(rank: int, lost: list[int], out: str | os.PathLike, exc: BaseException) -> str:
    """What a surviving torchrun rank says when another one died: who, why it stopped, how to resume."""
    from mtkit.train.distributed import COLLECTIVE_TIMEOUT

    who = (
        f"rank {', '.join(map(str, lost))} ended (killed, or out of memory)"
        if lost
        else "another rank stopped answering (its process ended, or it is on another machine and its link broke)"
    )
    reason = " ".join(str(exc).split())[:160]
    return (
        f"rank {rank} stopped: {who}, so the update could not be completed ({reason}; collectives wait "
        f"{COLLECTIVE_TIMEOUT.total_seconds() / 60:g} min at most); rerun the same torchrun command to resume "
        f"from {out}/checkpoint_last.pt."
    )


def warn_default_preset(model_cfg: ModelConfig, train_cfg: TrainConfig, device: str, threads: int) -> None:
    """No --preset on a machine without CUDA: say what `base` costs here before an hour has gone."""
    import torch

    if device not in ("auto", "cpu") or (device == "auto" and torch.cuda.is_available()):
        return
    seconds = finetune.cpu_update_seconds(model_cfg, train_cfg, threads or torch.get_num_threads())
    logger.warning(
        "no --preset given: training the paper's `%s` model, which on this CPU takes roughly %s an "
        "update; for a CPU, --preset small is the one to try.",
        DEFAULT_PRESET,
        f"{seconds:.0f} s" if seconds >= 2 else f"{seconds:.1f} s",
    )
