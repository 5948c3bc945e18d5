"""Where training stands, and how that travels in a checkpoint so that a resumed run continues exactly.

A checkpoint keeps it under three keys (mtkit/checkpoint.py): `step`; `data`, the position in
the batch plan with what that plan was made from (the position read back is this one); `progress`,
every field but the step (the early-stopping and wall-clock state). `Progress.state_dict` writes
them and `Progress.from_state_dict` reads them back.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any

from mtkit.config import TrainConfig

logger = logging.getLogger(__name__)


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
    valid_due: bool = False  # a signal cut (or kept from running) the validation due at this step

    def state_dict(self, world_size: int, cfg: TrainConfig) -> dict[str, Any]:
        """The checkpoint's `step`, `data` and `progress` entries."""
        return {
            "step": self.step,
            "data": {
                "epoch": self.epoch,
                "batch": self.batch,
                "world_size": world_size,
                "max_tokens": cfg.max_tokens,
                "seed": cfg.seed,
            },
            "progress": {k: v for k, v in dataclasses.asdict(self).items() if k != "step"},
        }

    @classmethod
    def from_state_dict(cls, ckpt: dict[str, Any], world_size: int, cfg: TrainConfig) -> Progress:
        """Where `ckpt` stopped; the start of the next epoch when the batch plan changed (another world
        size, --max-tokens or --seed make other batches, so "batch 5 of epoch 3" would mean another batch)."""
        data, known = ckpt["data"], {f.name for f in dataclasses.fields(cls)}
        saved = {k: v for k, v in ckpt["progress"].items() if k in known}
        p = cls(**{**saved, "step": ckpt["step"], "epoch": data["epoch"], "batch": data["batch"]})
        if (data["world_size"], data["max_tokens"], data["seed"]) != (world_size, cfg.max_tokens, cfg.seed):
            p.epoch, p.batch = (p.epoch + 1 if p.batch else p.epoch), 0
            logger.warning(
                "world size, --max-tokens or --seed changed, so the batches differ: "
                "continuing at the start of epoch %d instead of where the run stopped",
                p.epoch + 1,
            )
        return p
