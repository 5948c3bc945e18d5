"""Validation during training: loss and perplexity on the dev set, summed over every rank.

Kept apart from the loop so that more measures slot in beside loss: `--valid-bleu` (greedy
translations scored by sacreBLEU) adds one entry to the returned dict, and `is_better`
says which entry picks checkpoint_best.pt.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mtkit.data.dataset import ParallelSplit
from mtkit.train.distributed import World, all_reduce_sum
from mtkit.train.loss import label_smoothed_sums
from mtkit.train.precision import Precision


@torch.no_grad()
def validate(model: torch.nn.Module, split: ParallelSplit, batches: list[np.ndarray], world: World,
             precision: Precision, smoothing: float) -> dict[str, float]:
    """Mean label-smoothed loss, NLL and perplexity per target token over this rank's share, summed over ranks.

    `model` is the bare module (not DDP): evaluation needs no gradient synchronisation, and
    ranks may hold different numbers of batches here.
    """
    was_training = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=world.device)  # loss, nll, tokens
    try:
        for indices in batches:
            batch = split.collate(indices)
            src = torch.from_numpy(batch.src).to(world.device, non_blocking=True)
            tgt_in = torch.from_numpy(batch.tgt_in).to(world.device, non_blocking=True)
            tgt_out = torch.from_numpy(batch.tgt_out).to(world.device, non_blocking=True)
            with precision.autocast():
                logits = model(src, tgt_in)
            loss, nll = label_smoothed_sums(logits, tgt_out, smoothing)
            sums[0] += loss.double()
            sums[1] += nll.double()
            sums[2] += batch.tgt_tokens
    finally:
        model.train(was_training)
    loss_sum, nll_sum, tokens = all_reduce_sum(sums, world).tolist()
    tokens = max(tokens, 1.0)
    nll = nll_sum / tokens
    return {"loss": loss_sum / tokens, "nll": nll, "ppl": math.exp(min(nll, 100.0)), "tokens": int(tokens)}


def is_better(metrics: dict[str, float], best: float) -> bool:
    """Lower validation NLL (perplexity) is better; a BLEU criterion would compare metrics['bleu'] here."""
    return metrics["nll"] < best


def score_of(metrics: dict[str, float]) -> float:
    return metrics["nll"]
