"""Section 5.3, Eq. (3): the warmup schedule at the paper's settings."""

import pytest

from mtkit.train.schedule import inverse_sqrt_lr


@pytest.mark.parametrize("step, expected", [(1000, 1.75e-4), (4000, 6.99e-4), (16000, 3.49e-4)])
def test_schedule_matches_the_papers_formula(step, expected):
    assert inverse_sqrt_lr(step, d_model=512, warmup=4000) == pytest.approx(expected, rel=2e-3)


def test_schedule_rises_linearly_then_decays_as_inverse_square_root():
    lr = lambda s: inverse_sqrt_lr(s, d_model=512, warmup=4000)  # noqa: E731
    assert lr(2000) == pytest.approx(2 * lr(1000))
    assert lr(4000) == max(lr(s) for s in range(1, 20001))
    assert lr(16000) == pytest.approx(lr(4000) / 2)
    assert lr(0) == lr(1) > 0
    assert inverse_sqrt_lr(100, 512, 4000, scale=2.0) == pytest.approx(2 * lr(100))
