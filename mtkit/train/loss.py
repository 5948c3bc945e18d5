"""Section 5.4: cross entropy with label smoothing (epsilon_ls = 0.1), padding ignored.

The loss is computed chunk by chunk over the target tokens and its gradient with respect to
the logits is written during the forward pass, so the full (tokens x V) float32
log-probabilities never exist: with a 37k vocabulary they are the largest tensor of a
training step, and autograd's version (log_softmax, gather, mean, their backward) walks that
memory about eight times. This is the approach of fused cross-entropy kernels (Liger,
Apex's xentropy), written with PyTorch ops: no extra dependency, and the same code on every device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from mtkit.config import PAD

# Rows of logits handled at once: chunk x V values, 64 MB of float32. Smaller, cache-sized chunks measured slower
# (docs/benchmarks.md, "Figures behind the code's choices": this module): each op is a parallel region, and fewer,
# larger ones pay less for it.
CHUNK_ELEMENTS = 1 << 24
# With bf16 or fp16 logits each chunk's float32 log-probabilities are a temporary of their own. Chunks of 16 MB of
# float32 keep it below glibc's 32 MB mmap threshold, so the heap reuses its memory, where a 64 MB one is mapped
# anew per chunk and faulted in page by page (the same row). float32 logits have no such temporary and keep the
# larger chunks.
TEMPORARY_CHUNK_ELEMENTS = 1 << 22
# Other devices (a GPU): neither reason holds there (no parallel regions to pay for, no glibc heap), and each
# chunk is another dozen kernel launches where launches already bound a small update (on an H200 `base` trained
# slower in bf16 than in fp32 at 4,096 tokens an update: docs/benchmarks.md, "GPU runs"). One chunk of up to
# 1 GiB of float32 instead: a 4,096-token batch of a 37k vocabulary is 151M elements, one chunk (docs/benchmarks.md,
# "Figures behind the code's choices": this module).
# Not yet timed on a GPU.
DEVICE_CHUNK_ELEMENTS = 1 << 28


def label_smoothed_sums(logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """(summed label-smoothed cross entropy, detached summed NLL) of logits (B, T, V) against target ids (B, T): the
    loss that trains (section 5.4).

    The target distribution is (1 - eps) on the reference plus eps / V on every class, the
    same definition as `torch.nn.functional.cross_entropy(label_smoothing=eps)` (tests hold
    the two equal). One log-softmax per chunk yields both the smoothed loss and the plain NLL
    for perplexity. Padding positions contribute exactly zero. Float32 arithmetic throughout.
    Tokens are not counted: counting needs `int(...)`, which waits for the device; the trainer
    already knows each batch's token count from the data, so it never stalls a GPU queue.
    """
    if torch.compiler.is_compiling():  # traced: plain ops, which inductor fuses (this path would split the graph)
        return plain_sums(logits, target, smoothing)
    flat_logits = logits.reshape(-1, logits.size(-1))  # (N, V)
    flat_target = target.reshape(-1)  # (N,)
    if torch.is_grad_enabled() and logits.requires_grad:
        return _SmoothedCrossEntropy.apply(flat_logits, flat_target, smoothing)
    loss, nll = _chunked_sums(flat_logits, flat_target, smoothing, grad_out=None)
    return loss, nll


def plain_sums(logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """`label_smoothed_sums`' numbers in plain autograd ops, for a step that torch.compile traces.

    The eager version writes its gradient during the forward pass to spare memory passes; compiled, inductor
    fuses these ops into a few kernels anyway, and the eager version's data-pointer test and CPU row indexing
    (`nonzero`, a data-dependent size) would break the graph.
    """
    lprobs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    real = target.ne(PAD)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    loss = ((1.0 - smoothing) * nll - smoothing * lprobs.mean(dim=-1)).masked_fill(~real, 0.0).sum()
    return loss, nll.masked_fill(~real, 0.0).sum().detach()


def _chunk_rows(vocab: int, dtype: torch.dtype, device: torch.device) -> int:
    if device.type != "cpu":
        elements = DEVICE_CHUNK_ELEMENTS
    else:
        elements = CHUNK_ELEMENTS if dtype == torch.float32 else min(CHUNK_ELEMENTS, TEMPORARY_CHUNK_ELEMENTS)
    return max(1, elements // max(vocab, 1))


def _chunked_sums(logits: Tensor, target: Tensor, smoothing: float, grad_out: Tensor | None) -> tuple[Tensor, Tensor]:
    """Loss and NLL sums over (N, V) logits, a chunk of rows at a time; fills `grad_out` (N, V) when given.

    Per row with log-probabilities l: nll = -l[y], smooth = -mean(l), loss = (1 - eps) nll + eps smooth.
    `grad_out` receives softmax - (1 - eps) onehot(y), zero on padding rows: the gradient without its
    constant -eps / V, which the backward adds in the same pass that scales it.
    """
    loss = logits.new_zeros((), dtype=torch.float32)
    nll_sum = logits.new_zeros((), dtype=torch.float32)
    step = _chunk_rows(logits.size(1), logits.dtype, logits.device)
    for lo in range(0, logits.size(0), step):
        x, y = logits[lo : lo + step], target[lo : lo + step]  # (c, V), (c,)
        lprobs = _log_softmax_fp32(x, grad_out[lo : lo + step] if grad_out is not None else None)  # (c, V)
        real = y.ne(PAD)
        nll = -lprobs.gather(1, y.unsqueeze(1)).squeeze(1)  # (c,)
        smooth = -lprobs.mean(dim=-1)  # (c,) = sum over classes of (1/V) * -log p
        loss = loss + ((1.0 - smoothing) * nll + smoothing * smooth).masked_fill(~real, 0.0).sum()
        nll_sum = nll_sum + nll.masked_fill(~real, 0.0).sum()
        if grad_out is not None:
            _softmax_minus_target(lprobs, y, real, smoothing, grad_out[lo : lo + step])
    return loss, nll_sum


def _log_softmax_fp32(x: Tensor, out: Tensor | None) -> Tensor:
    """Float32 log-probabilities of a chunk, written straight into `out` when it is float32 (no temporary)."""
    if out is not None and out.dtype == torch.float32 and x.dtype == torch.float32:
        return torch.log_softmax(x, dim=-1, out=out)
    return torch.log_softmax(x.float(), dim=-1)


def _softmax_minus_target(lprobs: Tensor, y: Tensor, real: Tensor, smoothing: float, out: Tensor) -> None:
    """out = softmax - (1 - eps) onehot(y) on real rows, 0 on padding rows; `lprobs` is consumed in place."""
    probs = lprobs.exp_()  # (c, V)
    probs.scatter_add_(1, y.unsqueeze(1), probs.new_full((y.numel(), 1), smoothing - 1.0))
    if probs.data_ptr() != out.data_ptr():
        out.copy_(probs)  # low-precision logits: the gradient is stored in their dtype
    _zero_rows(out, real)


def _zero_rows(t: Tensor, real: Tensor) -> None:
    """Zero the padding rows of t (rows, V): on the CPU by index (`_zero_rows_by_index`), elsewhere by mask."""
    if t.device.type == "cpu":
        _zero_rows_by_index(t, real)
    else:
        _zero_rows_by_mask(t, real)


def _zero_rows_by_index(t: Tensor, real: Tensor) -> None:
    """An index fill touches the padding rows alone, where a masked fill reads every row. Finding those rows
    (`nonzero`) must know how many there are, which on a GPU waits for its queue to drain: once per chunk."""
    pad = real.logical_not().nonzero().squeeze(1)
    if pad.numel():
        t.index_fill_(0, pad, 0.0)


def _zero_rows_by_mask(t: Tensor, real: Tensor) -> None:
    """A masked fill: every row read, nothing waited for (GPUs)."""
    t.masked_fill_(real.logical_not().unsqueeze(1), 0.0)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Forward computes the sums and most of d(loss sum)/d(logits); backward finishes and scales it in one pass."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        grad = torch.empty_like(logits)  # (N, V) in the logits' dtype: what the output layer's backward reads
        loss, nll = _chunked_sums(logits.detach(), target, smoothing, grad_out=grad)
        # Not an input or output, so it is kept on ctx rather than through save_for_backward.
        ctx.grad, ctx.target, ctx.smoothing, ctx.consumed = grad, target, smoothing, False
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor | None) -> tuple[Tensor, None, None]:
        if ctx.consumed:  # the gradient buffer was scaled in place and handed to autograd the first time
            raise RuntimeError("the fused label-smoothed loss supports one backward pass; compute the loss again")
        ctx.consumed = True
        grad, scale = ctx.grad, grad_loss.to(ctx.grad.dtype)  # a tensor: float() would wait for a GPU
        shift = scale * (-ctx.smoothing / grad.size(1))  # the -eps / V term, scaled
        grad = torch.addcmul(shift, grad, scale, out=grad)  # (grad - eps / V) * scale in one pass, in place
        _zero_rows(grad, ctx.target.ne(PAD))  # padding rows took the shift too
        return grad, None, None
