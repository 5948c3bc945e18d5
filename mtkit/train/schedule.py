"""Section 5.3, Eq. (3): the inverse-square-root learning rate with linear warmup, and an optional cooldown.

The cooldown is not in the paper. Its schedule never decays to zero, so a run that ends on a budget
(minutes or updates) ends at a high learning rate and its last checkpoint is noisy; the paper's answer is
to average the last checkpoints. `--lr-cooldown F` instead takes the rate linearly to 0 over the last
fraction F of the budget, the "warmup-stable-decay" shape that lets one checkpoint stand on its own.
"""

from __future__ import annotations


def inverse_sqrt_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Step counts updates from 1; step 0 (before the first update) is treated as step 1 so that
    the optimiser never starts at a learning rate of exactly zero or infinity.
    """
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def budget_done(step: int, elapsed_s: float, max_steps: int, max_minutes: float) -> float:
    """The fraction of the run's budget spent: updates or minutes, whichever runs out first (0 minutes: none)."""
    done = step / max_steps
    if max_minutes > 0:
        done = max(done, elapsed_s / (60.0 * max_minutes))
    return done


def cooldown_factor(done: float, cooldown: float) -> float:
    """1 until the last `cooldown` fraction of the budget, then linearly down to 0 at its end (0: always 1)."""
    if cooldown <= 0:
        return 1.0
    return min(1.0, max(0.0, (1.0 - done) / cooldown))


def learning_rate(
    step: int,
    elapsed_s: float,
    *,
    d_model: int,
    warmup: int,
    scale: float,
    max_steps: int,
    max_minutes: float,
    cooldown: float,
) -> float:
    """The rate of update `step` (from 1) taken `elapsed_s` seconds into the run: Eq. (3) times the cooldown."""
    done = budget_done(step - 1, elapsed_s, max_steps, max_minutes)
    return inverse_sqrt_lr(step, d_model, warmup, scale) * cooldown_factor(done, cooldown)
