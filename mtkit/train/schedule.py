"""Section 5.3, Eq. (3): the inverse-square-root learning rate with linear warmup."""

from __future__ import annotations


def inverse_sqrt_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Step counts updates from 1; step 0 (before the first update) is treated as step 1 so that
    the optimiser never starts at a learning rate of exactly zero or infinity.
    """
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
