"""Dropout (section 5.4, residual dropout) as a module, through the CPU dropout kernel (mtkit/kernels/dropout.py)."""

from __future__ import annotations

from torch import Tensor, nn

from mtkit.kernels.dropout import dropout


class Dropout(nn.Dropout):
    """nn.Dropout (same `p`, no parameters) through `mtkit.kernels.dropout.dropout`, cheaper on the CPU."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)
