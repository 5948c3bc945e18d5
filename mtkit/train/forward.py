"""One batch of sentence indices to its summed label-smoothed loss and NLL: the step training and validation share.

Training (accumulate, in the trainer) calls it under autograd and runs backward on the loss;
validation calls it under `torch.no_grad()`. Either way the numbers come from the same code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import torch

from mtkit.data.dataset import ParallelSplit
from mtkit.errors import MtkitError
from mtkit.train.loss import label_smoothed_sums
from mtkit.train.precision import Precision

LossSums = Callable[[torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]


def batch_loss(
    model: torch.nn.Module,
    split: ParallelSplit,
    indices: np.ndarray,
    precision: Precision,
    smoothing: float,
    device: torch.device,
    loss_sums: LossSums | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(loss sum, NLL sum, target tokens) of one batch; both sums are fp32 tensors on `device`.

    `loss_sums`: a compiled loss (mtkit/train/compile.py); None: label_smoothed_sums.
    """
    batch = split.collate(indices)
    src, tgt_in, tgt_out = (
        torch.from_numpy(a).to(device, non_blocking=True) for a in (batch.src, batch.tgt_in, batch.tgt_out)
    )
    with precision.autocast():
        logits = model(src, tgt_in)
    loss, nll = (loss_sums or label_smoothed_sums)(logits, tgt_out, smoothing)
    return loss, nll, batch.tgt_tokens


def accumulate(
    model: torch.nn.Module,
    split: ParallelSplit,
    group: list[np.ndarray],
    scale: float,
    precision: Precision,
    smoothing: float,
    device: torch.device,
    loss_sums: LossSums | None = None,
) -> torch.Tensor:
    """Forward and backward over the batches of one update; returns the summed (loss, nll) on the device.

    Each batch's loss sum is multiplied by `scale` (world_size / update tokens) before backward.
    With DDP, gradients are all-reduced only on the last batch (`no_sync` on the others).
    """
    sums = torch.zeros(2, device=device)
    for i, indices in enumerate(group):
        sync = i == len(group) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if sync else model.no_sync():  # type: ignore[operator]
            loss, nll, _ = batch_loss(model, split, indices, precision, smoothing, device, loss_sums)
            precision.backward(loss * scale)
        sums += torch.stack((loss.detach(), nll))
    return sums


@contextlib.contextmanager
def out_of_memory_hint(step: int, max_tokens: int) -> Iterator[None]:
    """An out-of-memory error in the update of `step` as one sentence that says what to change."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not isinstance(exc, torch.OutOfMemoryError) and "can't allocate memory" not in str(exc):
            raise
        raise MtkitError(
            f"out of memory on a batch at step {step}; lower --max-tokens (now {max_tokens},"
            f" e.g. {max_tokens // 2}) and raise --update-freq to keep the effective batch."
        ) from None
