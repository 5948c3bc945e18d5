"""A model whose weights hold NaN (a diverged run): translate and average refuse it with one sentence."""

from __future__ import annotations

import pytest
import torch

from mtkit import checkpoint
from mtkit.errors import MtkitError
from tests.support.cli import run_cli


@pytest.fixture
def nan_model(cli_model, tmp_path):
    ckpt = checkpoint.load(cli_model)
    name = next(k for k, t in ckpt["model"].items() if t.is_floating_point())
    ckpt["model"][name] = ckpt["model"][name].clone().fill_(float("nan"))
    path = tmp_path / "checkpoint_20.pt"
    checkpoint.atomic_save(ckpt, path)
    return path, name


def test_translate_refuses_a_nan_model(nan_model) -> None:
    """fault: translate with a NaN model; expected: exit 1, one sentence naming the file and the weight."""
    path, name = nan_model
    result = run_cli("translate", "-m", path, input="a man runs\n")
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stdout == ""
    assert "holds NaN or infinite weights" in result.stderr and name in result.stderr


def test_average_refuses_a_nan_checkpoint(nan_model, cli_model, tmp_path) -> None:
    """fault: average including a NaN checkpoint; expected: exit 1, one sentence, no output file."""
    path, _ = nan_model
    out = tmp_path / "averaged.pt"
    result = run_cli("average", cli_model, path, "-o", out)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{path} holds NaN or infinite weights" in " ".join(result.stderr.split()) and not out.exists()


def test_check_finite_accepts_a_finite_model(cli_model) -> None:
    ckpt = checkpoint.load(cli_model)
    checkpoint.check_finite(ckpt, cli_model)
    ckpt["model"][next(iter(ckpt["model"]))] = torch.tensor([float("inf")])
    with pytest.raises(MtkitError, match="NaN or infinite"):
        checkpoint.check_finite(ckpt, cli_model)
