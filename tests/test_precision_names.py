"""Precision is one word (mtkit/precision.py): every use takes its names, its dtype map and its check from there."""

from __future__ import annotations

import pytest
import torch

from mtkit.config import EngineConfig, TrainConfig
from mtkit.decode.ct2 import COMPUTE_TYPES
from mtkit.errors import MtkitError
from mtkit.precision import DECODE_PRECISION_CHOICES, PRECISION_CHOICES, RESOLVED, check_precision, torch_dtype
from mtkit.runtime import Runtime, resolve_precision


def test_training_decoding_and_ctranslate2_choose_from_the_same_names():
    assert set(DECODE_PRECISION_CHOICES) == {*PRECISION_CHOICES, "int8"} == set(COMPUTE_TYPES)
    assert set(RESOLVED) == set(DECODE_PRECISION_CHOICES) - {"auto"}
    assert [torch_dtype(p) for p in RESOLVED] == [torch.float32, torch.bfloat16, torch.float16, torch.float32]


def test_one_check_says_the_choices_of_each_use():
    with pytest.raises(MtkitError, match=r"unknown precision 'fp8'; choose one of: auto, fp32, bf16, fp16, int8\."):
        check_precision("fp8")
    with pytest.raises(MtkitError, match=r"choose one of: auto, fp32, bf16, fp16\."):
        resolve_precision("int8", torch.device("cpu"))
    with pytest.raises(MtkitError, match=r"choose one of: fp32, bf16, fp16, int8\."):
        Runtime(precision="auto")  # a decision names what it computes in


def test_the_configs_refuse_a_precision_by_its_field():
    with pytest.raises(MtkitError, match="precision"):
        TrainConfig(precision="int8")
    with pytest.raises(MtkitError, match="precision"):
        EngineConfig(precision="fp8")
    assert EngineConfig().precision == "fp32"
