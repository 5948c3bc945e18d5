"""Section 5.4: cross entropy with label smoothing (epsilon_ls = 0.1), padding ignored."""

from __future__ import annotations

from typing import NamedTuple

import torch.nn.functional as F
from torch import Tensor

from mtkit.config import PAD


class LossSums(NamedTuple):
    """Sums over the real (non-pad) target tokens; divide by `tokens` for means."""

    loss: Tensor  # label-smoothed cross entropy, what is minimised
    nll: Tensor  # plain negative log-likelihood (detached), for perplexity
    tokens: int


def label_smoothed_loss(logits: Tensor, target: Tensor, smoothing: float) -> LossSums:
    """Summed label-smoothed cross entropy of logits (B, T, V) against target ids (B, T).

    The target distribution is (1 - eps) on the reference plus eps / V on every class, the
    same definition as `torch.nn.functional.cross_entropy(label_smoothing=eps)` (tests hold
    the two equal). It is written out here so that one log-softmax yields both the smoothed
    loss and the plain NLL for perplexity; calling cross_entropy twice would normalise the
    (tokens x V) logits twice. Padding positions contribute exactly zero. Float32 throughout.
    """
    loss, nll_sum = label_smoothed_sums(logits, target, smoothing)
    return LossSums(loss, nll_sum, int(target.ne(PAD).sum()))


def label_smoothed_sums(logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """(smoothed loss sum, detached NLL sum) without counting tokens.

    Counting them needs `int(...)`, which waits for the device; the trainer already knows
    each batch's token count from the data, so it calls this and never stalls a GPU queue.
    """
    lprobs = F.log_softmax(logits.reshape(-1, logits.size(-1)).float(), dim=-1)  # (N, V)
    flat_target = target.reshape(-1)  # (N,)
    real = flat_target.ne(PAD)
    nll = -lprobs.gather(1, flat_target.unsqueeze(1)).squeeze(1)  # (N,)
    smooth = -lprobs.mean(dim=-1)  # (N,) = sum over classes of (1/V) * -log p
    loss = ((1.0 - smoothing) * nll + smoothing * smooth).masked_fill(~real, 0.0).sum()
    nll_sum = nll.detach().masked_fill(~real, 0.0).sum()
    return loss, nll_sum
