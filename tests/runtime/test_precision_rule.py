"""`--precision auto`: one rule for training and translation, decided by the CPU's capability and a measurement."""

import itertools
import math
import os
from types import SimpleNamespace

import pytest
import torch

import mtkit
from mtkit.errors import MtkitError
from mtkit.runtime import decide_training, matmul, precision, resolve_dtype, resolve_precision

CPU = torch.device("cpu")


@pytest.fixture
def cpu_rule(monkeypatch):
    """Lift the tests' fp32 pin; the caller sets the capability and the measured speed-up."""
    monkeypatch.delenv(precision.AUTO_ENV, raising=False)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "")  # the rule may set it; monkeypatch restores it
    monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)  # likewise

    def set_cpu(native: bool, speedup: float) -> None:
        monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
        monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda d_model=512: speedup)

    return set_cpu


def test_auto_is_bf16_on_a_cpu_with_native_bf16_that_measures_faster(cpu_rule):
    cpu_rule(native=True, speedup=1.8)
    name, why = resolve_precision("auto", CPU)
    assert name == "bf16" and "native bf16" in why and "1.80x" in why
    assert resolve_dtype("auto", CPU) is torch.bfloat16  # translate follows the same rule


def test_auto_is_fp32_when_bf16_is_native_but_not_faster(cpu_rule):
    cpu_rule(native=True, speedup=1.02)
    name, why = resolve_precision("auto", CPU)
    assert name == "fp32" and "measured only 1.02x" in why


def test_auto_is_fp32_without_bf16_instructions_and_never_measures(cpu_rule, monkeypatch):
    cpu_rule(native=False, speedup=5.0)
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda d_model=512: pytest.fail("measured"))
    name, why = resolve_precision("auto", CPU)
    assert name == "fp32" and "no AVX512-BF16 or AMX" in why
    assert resolve_dtype("auto", CPU) is torch.float32


def test_cpu_training_caps_the_kernel_caches_unless_the_environment_says(cpu_rule):
    cpu_rule(native=False, speedup=1.0)
    plan = decide_training("fp32", CPU, mtkit.build_model("tiny", 40).cfg)
    assert os.environ["LRU_CACHE_CAPACITY"] == "64"
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == ""  # set (by the fixture) before: kept
    assert plan.kernel_caches == (64, 16) and plan.packing == "none"  # what the ranks that adopt it cap


def test_explicit_choices_are_kept_and_checked(cpu_rule):
    cpu_rule(native=False, speedup=1.0)
    assert resolve_precision("fp32", CPU) == ("fp32", "asked for")
    assert resolve_precision("bf16", CPU)[0] == "bf16"  # translate may still ask for bf16 anywhere
    with pytest.raises(MtkitError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", CPU)
    with pytest.raises(MtkitError, match="unknown precision 'fp8'"):
        resolve_precision("fp8", CPU)


def test_training_knows_the_choice_and_the_reason(cpu_rule):
    cpu_rule(native=False, speedup=1.0)
    chosen = decide_training("auto", CPU, mtkit.build_model("tiny", 40, d_model=64, heads=4).cfg)
    assert chosen.precision == "fp32" and chosen.why.startswith("this CPU (")


def test_training_refuses_bf16_on_a_cpu_without_bf16_instructions_and_fp16_on_any(cpu_rule):
    cpu_rule(native=False, speedup=1.0)
    cfg = mtkit.build_model("tiny", 40).cfg
    with pytest.raises(MtkitError, match="bf16 is about 20x slower than fp32 on this CPU"):
        decide_training("bf16", CPU, cfg)
    with pytest.raises(MtkitError, match="--precision fp16 needs a CUDA device"):
        decide_training("fp16", CPU, cfg)


def test_the_tests_pin_auto_to_fp32(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(precision, "bf16_matmul_speedup", lambda d_model=512: 3.0)
    assert resolve_precision("auto", CPU) == ("fp32", f"{precision.AUTO_ENV}=fp32")


def clock(durations: list[float]) -> SimpleNamespace:
    """A `time` whose perf_counter makes the timed calls, in order, last `durations` seconds each."""
    ticks = itertools.accumulate(x for d in durations for x in (0.0, d))
    return SimpleNamespace(perf_counter=lambda: next(ticks))


@pytest.mark.parametrize("onednn", [False, True])
def test_the_product_measurement_is_fp32s_best_time_over_bf16s_measured_once_per_size(monkeypatch, onednn):
    """Best of 3 each, fp32 counting its faster backend; on real products, timed by a scripted clock."""
    if onednn and not matmul.onednn_works():
        pytest.skip("oneDNN's linear op is missing from this PyTorch build")
    monkeypatch.setattr(precision, "onednn_works", lambda: onednn)
    rounds = [(4.0, 2.0, 5.0), (3.0, 1.0, 2.5), (5.0, 1.5, 6.0)]  # (fp32, bf16, fp32 oneDNN) per round
    monkeypatch.setattr(precision, "time", clock([d for r in rounds for d in (r if onednn else r[:2])]))
    measure = precision.bf16_matmul_speedup
    measure.cache_clear()
    try:
        first = measure(16)
        assert first == (2.5 if onednn else 3.0) / 1.0
        assert measure(16) == first  # measured once: the scripted clock has no tick left for a second measurement
    finally:
        measure.cache_clear()  # no later test sees the scripted ratio


def test_training_measures_a_whole_pass_not_a_product(cpu_rule, monkeypatch):
    cpu_rule(native=True, speedup=1.8)  # the products alone would say bf16
    monkeypatch.setattr(precision, "bf16_update_speedup", lambda cfg, loss, matmul, tokens=2048: 0.93)
    cfg = mtkit.build_model("tiny", 40).cfg
    name, why = resolve_precision("auto", CPU, model=cfg)
    assert name == "fp32" and "a training pass measured only 0.93x fp32" in why
    assert decide_training("auto", CPU, cfg).precision == "fp32"


def test_the_pass_measurement_leaves_the_rng_alone_and_is_taken_once_per_model():
    cfg = mtkit.build_model("tiny", 40).cfg
    measure = precision.bf16_update_speedup
    measure.cache_clear()  # a measurement cached by another test would leave the RNG alone without running
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    ratio = measure(cfg, tokens=64)
    assert torch.equal(torch.rand(3), expected)  # training's seed decides the weights, not this measurement
    assert math.isfinite(ratio) and measure.cache_info().currsize == 1
    assert measure(cfg, tokens=64) == ratio and measure.cache_info().hits == 1
