"""The length rules of a search, without torch: the length penalty and each sentence's longest output.

Here, apart from the beam search that applies them to tensors, so that CTranslate2's path behind mtkit's text
pipeline (mtkit/decode/ct2.py, mtkit/decode/encode.py) keeps the same rules without importing torch.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mtkit.config import DecodeConfig

if TYPE_CHECKING:
    from torch import Tensor


def length_penalty(length: Tensor | float, alpha: float, kind: str) -> Tensor | float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, Eq. 14); fairseq's |Y|^alpha; or 1.

    Non-decreasing in |Y| for alpha >= 0, which the early-stopping bound relies on.
    """
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if kind == "fairseq":
        return length**alpha
    if kind == "none":
        return length * 0.0 + 1.0  # keeps the argument's type: a tensor stays a tensor
    raise ValueError(f"unknown length penalty {kind!r}")


def max_output_length(src_length: int, config: DecodeConfig, max_positions: int) -> int:
    """Tokens a sentence may emit before EOS: floor(a * |X| + b), capped so that BOS + output fit the positions."""
    return min(max(math.floor(config.max_len_a * src_length + config.max_len_b), 0), max_positions - 1)
