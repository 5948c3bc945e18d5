"""Section 5.4: label-smoothed cross entropy; padding adds nothing."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from mtkit.config import PAD
from mtkit.train.loss import label_smoothed_sums


def label_smoothed_loss(logits, target, eps):
    """The trainer's loss with the token count it divides by (counted here, as the trainer takes it from the data)."""
    loss, nll = label_smoothed_sums(logits, target, eps)
    return SimpleNamespace(loss=loss, nll=nll, tokens=int(target.ne(PAD).sum()))


def test_loss_equals_a_hand_computed_value():
    # One real token, vocabulary of 4, logits chosen so the probabilities are simple.
    logits = torch.log(torch.tensor([[[0.1, 0.2, 0.3, 0.4]]]))
    target = torch.tensor([[2]])
    eps = 0.1
    # q = (1 - eps) * onehot(2) + eps / 4 everywhere
    expected = -((1 - eps + eps / 4) * math.log(0.3) + eps / 4 * (math.log(0.1) + math.log(0.2) + math.log(0.4)))
    sums = label_smoothed_loss(logits, target, eps)
    assert sums.loss.item() == pytest.approx(expected, rel=1e-6)
    assert sums.nll.item() == pytest.approx(-math.log(0.3), rel=1e-6)
    assert sums.tokens == 1


def test_padding_positions_add_zero():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    target = torch.tensor([[4, 5, 6], [4, PAD, PAD]])
    full = label_smoothed_loss(logits, target, 0.1)
    real_only = (
        label_smoothed_loss(logits[:1], target[:1], 0.1).loss
        + label_smoothed_loss(logits[1:, :1], target[1:, :1], 0.1).loss
    )
    assert full.loss.item() == pytest.approx(real_only.item(), rel=1e-6)
    assert full.tokens == 4
    logits2 = logits.clone()
    logits2[1, 1:] = 100.0 * torch.randn(2, 7)  # whatever the model says at padding does not matter
    assert label_smoothed_loss(logits2, target, 0.1).loss.item() == pytest.approx(full.loss.item(), rel=1e-6)


def test_matches_torch_cross_entropy_with_label_smoothing():
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[2, 3:] = PAD
    ours = label_smoothed_loss(logits, target, 0.1).loss
    theirs = F.cross_entropy(
        logits.reshape(-1, 11), target.reshape(-1), ignore_index=PAD, label_smoothing=0.1, reduction="sum"
    )
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
