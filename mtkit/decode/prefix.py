"""A forced target prefix (interactive MT, forced tags): the output begins with given tokens, then the search goes on.

The prefix is forced one step at a time, as fairseq's `prefix_tokens` and Sockeye's target prefix
are: at step t a sentence whose prefix has a token there may only emit that token, so its
log-probability counts in the hypothesis' score like any other token's. Sentences of one batch
may have prefixes of different lengths (padded with PAD, which no search ever emits).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from mtkit.config import PAD


def prefix_tensor(prefixes: list[list[int]], device: torch.device) -> Tensor | None:
    """(B, P) ids right-padded with PAD; None when no sentence has a prefix (the search then skips the step)."""
    width = max(map(len, prefixes), default=0)
    if width == 0:
        return None
    out = torch.full((len(prefixes), width), PAD, dtype=torch.long)
    for row, ids in enumerate(prefixes):
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out.to(device)


def force_prefix(lprobs: Tensor, prefix: Tensor | None, t: int) -> Tensor:
    """`lprobs` (n, ..., V) with every token but prefix[:, t] at -inf in the rows whose prefix reaches step t.

    prefix (n, P): one row per sentence of `lprobs` (its beams or samples share it). Not in place.
    """
    if prefix is None or t >= prefix.size(1):
        return lprobs
    forced = prefix[:, t]  # (n,)
    shape = (-1,) + (1,) * (lprobs.dim() - 1)
    index = forced.view(shape).expand(*lprobs.shape[:-1], 1)  # (n, ..., 1)
    only = torch.full_like(lprobs, -math.inf).scatter(-1, index, lprobs.gather(-1, index))
    return torch.where(forced.ne(PAD).view(shape), only, lprobs)
