"""The fp32 CPU products' backend: the rule (pins, measurement, other devices), the oneDNN check, the kernel caps."""

from __future__ import annotations

import os

import pytest
import torch

from mtkit.errors import MtkitError
from mtkit.runtime import Runtime, cap_kernel_caches, kept, matmul


@pytest.mark.parametrize("pin, want", [("default", "default"), ("onednn", "onednn")])
def test_the_environment_pins_the_choice(monkeypatch, pin, want):
    monkeypatch.setenv(matmul.BACKEND_ENV, pin)
    name, why, measured = matmul.resolve_backend(torch.device("cpu"))
    assert name == (want if matmul.onednn_works() else "default") and not measured
    assert pin in why or "no working oneDNN" in why


def test_a_bad_pin_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(matmul.BACKEND_ENV, "fast")
    with pytest.raises(MtkitError, match="MTKIT_CPU_MATMUL='fast'; choose one of: auto, default, onednn"):
        matmul.resolve_backend(torch.device("cpu"))


@pytest.mark.skipif(not matmul.onednn_works(), reason="this PyTorch build has no oneDNN linear op")
def test_auto_picks_onednn_only_when_it_measures_faster(monkeypatch):
    monkeypatch.setenv(matmul.BACKEND_ENV, "auto")
    monkeypatch.setenv(kept.REMEASURE_ENV, "1")  # each answer timed, not read from the first one's record
    for speedup, want in ((2.3, "onednn"), (1.05, "default")):
        monkeypatch.setattr(matmul, "onednn_speedup", lambda d_model, training, s=speedup: s)
        name, why, measured = matmul.resolve_backend(torch.device("cpu"))
        assert name == want and f"{speedup:.2f}x" in why and measured


def test_other_devices_keep_the_default():
    assert matmul.resolve_backend(torch.device("meta")).name == "default"


def test_an_unknown_backend_is_refused_with_the_choices():
    with pytest.raises(MtkitError, match="default, onednn"):
        Runtime(matmul="mkl")


def test_the_check_works_inside_inference_mode():
    matmul.onednn_works.cache_clear()
    try:
        with torch.inference_mode():
            assert matmul.onednn_works() == hasattr(torch.ops.mkldnn, "_linear_pointwise")
    finally:
        matmul.onednn_works.cache_clear()


def test_the_kernel_caches_are_capped_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "500")
    cap_kernel_caches(64, 16)
    assert os.environ["LRU_CACHE_CAPACITY"] == "64" and os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "500"
