"""Scoring given translations: log P(target | source) under a model or an ensemble, by teacher forcing.

For filtering noisy corpora and for reranking (fairseq's --score-reference, sockeye-score). The
target is scored as a search would have produced it: log P(y_1..y_n, EOS | X), so |Y| = n + 1
counts the end-of-sentence token, as beam search's length does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import BOS, EOS, PAD
from mtkit.decode.ensemble import Ensemble
from mtkit.model.transformer import Transformer


def padded(rows: list[list[int]], device: torch.device) -> Tensor:
    """(B, max length) ids, right-padded with PAD."""
    out = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)


@torch.inference_mode()
def score_batch(
    model: Transformer | Ensemble, sources: list[list[int]], targets: list[list[int]]
) -> list[tuple[float, int]]:
    """(log P(target + EOS | source), target length + 1) for each pair, by one teacher-forced pass."""
    device = next((model.models[0] if isinstance(model, Ensemble) else model).parameters()).device
    src = padded([[*s, EOS] for s in sources], device)  # (B, S)
    tgt_in = padded([[BOS, *y] for y in targets], device)  # (B, T): right padding never reaches a real position
    tgt_out = padded([[*y, EOS] for y in targets], device)  # (B, T)
    if isinstance(model, Ensemble):  # two branches only for the type checker: the calls are the same
        logits = model.decode(tgt_in, model.encode(src))
    else:
        logits = model.decode(tgt_in, model.encode(src))
    lprobs = F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)  # (B, T, V)
    picked = lprobs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1).masked_fill(tgt_out.eq(PAD), 0.0)  # (B, T)
    return list(zip(picked.sum(1).tolist(), tgt_out.ne(PAD).sum(1).tolist()))
