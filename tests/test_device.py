"""One device rule for training and decoding: names checked, Apple GPUs accepted where torch has them."""

import pytest
import torch

from mtkit.device import cpu_flags, pick_device
from mtkit.errors import MtkitError


def test_cpu_and_auto_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("cpu") == torch.device("cpu") and pick_device("auto") == torch.device("cpu")


def test_mps_is_accepted_where_torch_has_it(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device("mps") == torch.device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(MtkitError, match="Apple's GPU \\(MPS\\).*use --device cpu"):
        pick_device("mps")


@pytest.mark.parametrize(
    "name, message",
    [("tpu", "unknown --device 'tpu'; use auto, cpu, cuda, cuda:N or mps"), ("meta", "unsupported --device 'meta'")],
)
def test_unknown_devices_list_the_valid_ones(name, message):
    with pytest.raises(MtkitError, match=message):
        pick_device(name)


def test_cpu_flags_are_read_from_cpuinfos_first_flags_line():
    text = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpu_flags(text) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags("processor : 0\nFeatures : fp asimd bf16\n") == {"fp", "asimd", "bf16"}  # arm64's name
    assert cpu_flags("no flags here\n") == frozenset()
