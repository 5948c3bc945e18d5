"""Section 5.3, Eq. (3): the warmup schedule at the paper's settings, and the optional cooldown."""

import pytest

from mtkit.train.schedule import budget_done, cooldown_factor, inverse_sqrt_lr, learning_rate


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


def test_cooldown_off_is_the_papers_schedule() -> None:
    for step in (1, 400, 4000, 90_000):
        lr = learning_rate(
            step, 1e6, d_model=512, warmup=4000, scale=1.0, max_steps=100_000, max_minutes=1.0, cooldown=0.0
        )
        assert lr == inverse_sqrt_lr(step, 512, 4000)


def test_cooldown_falls_linearly_to_zero_over_the_last_fraction_of_the_step_budget() -> None:
    def factor(step: int) -> float:
        lr = learning_rate(step, 0.0, d_model=256, warmup=40, scale=0.5, max_steps=100, max_minutes=0, cooldown=0.2)
        return lr / inverse_sqrt_lr(step, 256, 40, 0.5)

    assert factor(1) == factor(50) == 1.0 and factor(81) == pytest.approx(1.0)  # update 81 starts at 80% of the budget
    assert factor(91) == pytest.approx(0.5) and factor(100) == pytest.approx(0.05)
    assert factor(101) == 0.0 and factor(150) == 0.0  # past the budget (a resumed run): never negative


def test_cooldown_follows_whichever_budget_runs_out_first() -> None:
    assert budget_done(10, 30.0, max_steps=100, max_minutes=1.0) == pytest.approx(0.5)  # the clock leads
    assert budget_done(90, 30.0, max_steps=100, max_minutes=1.0) == pytest.approx(0.9)  # the updates lead
    assert budget_done(90, 1e9, max_steps=100, max_minutes=0.0) == pytest.approx(0.9)  # no wall-clock budget
    assert cooldown_factor(0.9, 0.25) == pytest.approx(0.4)
    assert cooldown_factor(0.5, 1.0) == pytest.approx(0.5) and cooldown_factor(0.99, 0.0) == 1.0
