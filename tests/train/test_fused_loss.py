"""The chunked, fused label-smoothed loss equals the plain autograd version in value and gradient."""

import pytest
import torch
import torch.nn.functional as F

from mtkit.config import PAD
from mtkit.train import loss as loss_module
from mtkit.train.loss import label_smoothed_sums


def reference_sums(logits: torch.Tensor, target: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss as mtkit computed it before: full float32 log-probabilities through autograd."""
    lprobs = F.log_softmax(logits.reshape(-1, logits.size(-1)).float(), dim=-1)
    flat = target.reshape(-1)
    real = flat.ne(PAD)
    nll = -lprobs.gather(1, flat.unsqueeze(1)).squeeze(1)
    smooth = -lprobs.mean(dim=-1)
    loss = ((1.0 - eps) * nll + eps * smooth).masked_fill(~real, 0.0).sum()
    return loss, nll.detach().masked_fill(~real, 0.0).sum()


def batch(seed: int = 0, B: int = 5, T: int = 7, V: int = 53) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = 4.0 * torch.randn(B, T, V, generator=g)
    target = torch.randint(1, V, (B, T), generator=g)
    target[1, 4:] = PAD
    target[3, 1:] = PAD
    return logits, target


def loss_and_grad(fn, logits: torch.Tensor, target: torch.Tensor, eps: float, scale: float):
    x = logits.clone().requires_grad_()
    loss, nll = fn(x, target, eps)
    (loss * scale).backward()
    return loss.detach(), nll, x.grad


@pytest.mark.parametrize("chunk_elements", [1 << 24, 3 * 53, 53])  # one chunk; several; one row at a time
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_and_gradient_equal_the_autograd_reference(monkeypatch, chunk_elements, eps):
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", chunk_elements)
    logits, target = batch()
    ours = loss_and_grad(label_smoothed_sums, logits, target, eps, scale=0.37)
    ref = loss_and_grad(reference_sums, logits, target, eps, scale=0.37)
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[1], ref[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[2], ref[2], rtol=1e-5, atol=1e-6)
    assert ours[2].reshape(-1, 53)[target.reshape(-1).eq(PAD)].abs().max() == 0  # padding gets no gradient


def test_gradient_flows_through_a_model_like_autograd(monkeypatch):
    """Through a linear output layer (the shape of the real use), the weight gradients match too."""
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", 2 * 53)
    _, target = batch()
    torch.manual_seed(3)
    proj = torch.nn.Linear(16, 53)
    hidden = torch.randn(5, 7, 16)
    grads = []
    for fn in (label_smoothed_sums, reference_sums):
        proj.zero_grad()
        loss, _ = fn(proj(hidden), target, 0.1)
        (loss / 11).backward()
        grads.append(proj.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_without_grad_the_sums_are_the_same():
    """Validation runs under no_grad and takes the path that writes no gradient."""
    logits, target = batch(seed=4)
    with torch.no_grad():
        loss, nll = label_smoothed_sums(logits, target, 0.1)
    ref_loss, ref_nll = reference_sums(logits, target, 0.1)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-5)


def test_a_second_backward_is_refused_not_wrong():
    """The gradient buffer is scaled in place; reusing it would silently double-scale."""
    logits, target = batch(seed=5)
    x = logits.clone().requires_grad_()
    loss, _ = label_smoothed_sums(x, target, 0.1)
    (loss * 2.0).backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward pass"):
        (loss * 2.0).backward()


def test_bf16_logits_give_a_float32_loss_and_a_bf16_gradient():
    logits, target = batch(seed=6)
    x = logits.to(torch.bfloat16).requires_grad_()
    loss, nll = label_smoothed_sums(x, target, 0.1)
    loss.backward()
    ref_loss, _ = reference_sums(logits.to(torch.bfloat16).float(), target, 0.1)
    assert loss.dtype == nll.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-4)


def test_bf16_logits_take_chunks_whose_float32_temporary_stays_below_the_mmap_threshold(monkeypatch):
    """bf16 logits: chunks of at most 16 MB of float32 (8k vocabulary: 524 rows, not fp32's 2,097), same sums."""
    cpu = torch.device("cpu")
    assert loss_module._chunk_rows(8000, torch.bfloat16, cpu) * 8000 * 4 <= 16 << 20
    assert loss_module._chunk_rows(8000, torch.float32, cpu) == (1 << 24) // 8000
    logits, target = batch(seed=7)
    results = []
    for elements in (1 << 22, 2 * 53):  # one chunk; two rows at a time
        monkeypatch.setattr(loss_module, "TEMPORARY_CHUNK_ELEMENTS", elements)
        x = logits.to(torch.bfloat16).requires_grad_()
        loss, nll = label_smoothed_sums(x, target, 0.1)
        loss.backward()
        results.append((loss.detach(), nll, x.grad))
    for one, chunked in zip(*results):
        torch.testing.assert_close(chunked, one, rtol=1e-6, atol=1e-5)


def test_on_a_gpu_a_batch_is_one_chunk_and_padding_is_zeroed_without_waiting_for_the_device():
    """No CPU heap to spare there, and each chunk is more kernel launches: a 4,096-token batch of the paper's
    37k vocabulary is one chunk in bf16 and fp32. Padding rows are zeroed by a mask there (a `nonzero` would
    wait for the GPU once per chunk), with the same result as the CPU's index fill."""
    cuda = torch.device("cuda")
    for dtype in (torch.bfloat16, torch.float32):
        assert loss_module._chunk_rows(37000, dtype, cuda) >= 4096
    g = torch.Generator().manual_seed(8)
    real = torch.rand(9, generator=g) > 0.4
    real[0], real[1] = True, False
    by_index, by_mask = (torch.randn(9, 5, generator=torch.Generator().manual_seed(9)) for _ in range(2))
    loss_module._zero_rows_by_index(by_index, real)
    loss_module._zero_rows_by_mask(by_mask, real)
    torch.testing.assert_close(by_mask, by_index, rtol=0, atol=0)
    assert by_mask[~real].abs().max() == 0 and by_mask[real].abs().min() > 0
