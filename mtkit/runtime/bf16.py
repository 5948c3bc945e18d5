"""What `--precision auto` decides by: whether this device has bf16 instructions, and how much faster bf16 measures.

Not in the paper (it trained in fp32 on P100s). Native bf16 on an x86 CPU means the instructions that compute in
it, AVX512-BF16 (Cooper Lake, AMD Zen 4 and later) and AMX-BF16 (Sapphire Rapids and later); without them oneDNN
emulates bf16 with fp32 instructions and runs it far slower than fp32 (docs/benchmarks.md, "Figures behind the code's
choices": mtkit/runtime/precision.py). oneDNN's own test
(`torch.ops.mkldnn._is_mkldnn_bf16_supported`) answers yes for any AVX-512 CPU, since it runs bf16 there, so the
flags are read instead: Linux's /proc/cpuinfo, else PyTorch's own CPU checks. ONEDNN_MAX_CPU_ISA, which caps the
instructions oneDNN uses (also how an AMX Xeon stands in for an older CPU), caps them here too. On a CUDA GPU,
`torch.cuda.is_bf16_supported` (Ampere and later).

Each measurement times fp32 and bf16 back to back, one pair per batch shape, the order alternating from pair to
pair, and returns the median of the pairs' ratios: a load that comes and goes slows both runs of a pair alike, and
a burst during one pair moves the median little. The rule that reads them is mtkit/runtime/precision.py.
"""

from __future__ import annotations

import functools
import logging
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import ModelConfig, TrainConfig
from mtkit.device import cpu_flags
from mtkit.kernels.linear import onednn_linear
from mtkit.runtime.decision import Runtime, apply
from mtkit.runtime.matmul import onednn_works

logger = logging.getLogger(__name__)

Loss = Callable[[Tensor, Tensor], Tensor]  # (logits (B, T, V), targets (B, T)) -> the loss of a training pass

ISA_ENV = "ONEDNN_MAX_CPU_ISA"
# oneDNN's ISA names (its dnnl_cpu_isa_t) that include each kind of bf16 instruction; a cap below both leaves none.
AMX_ISAS = ("AVX512_CORE_AMX", "AVX10_1_512_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512_AMX_2")
BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512", "AVX10_2_512", *AMX_ISAS)
LENGTHS = (29, 31, 33, 35, 37)  # sentence lengths of the training passes, one pair each; the first pair not timed
GPU_TOKENS = 4096  # a GPU's training pass where the run's batch is not known yet: docs/benchmarks.md's GPU batch
CPU_TOKENS = 2048  # a CPU's: half the presets' batch, since the passes take seconds each there


def bf16_instructions(flags: frozenset[str] | None = None, max_isa: str | None = None) -> str | None:
    """ "AMX" or "AVX512-BF16": this CPU's bf16 instructions that oneDNN may use (AMX first: the faster); None
    where bf16 is emulated. `flags`: /proc/cpuinfo's (default: read them, else ask PyTorch); `max_isa`: a cap
    as ONEDNN_MAX_CPU_ISA names it (default: that variable)."""
    if flags is None:
        flags = cpu_flags() or torch_cpu_flags()
    cap = (os.environ.get(ISA_ENV, "") if max_isa is None else max_isa).strip().upper()
    capped = cap not in ("", "ALL", "DEFAULT")
    if "amx_bf16" in flags and (not capped or cap in AMX_ISAS):
        return "AMX"
    if flags & {"avx512_bf16", "amx_bf16"} and (not capped or cap in BF16_ISAS):
        return "AVX512-BF16"  # AMX implies AVX512-BF16: a cap between the two leaves this
    return None


def torch_cpu_flags() -> frozenset[str]:
    """The bf16 flags PyTorch's CPU checks find (where no /proc/cpuinfo says), in Linux's names."""
    checks = {"avx512_bf16": "_is_avx512_bf16_supported", "amx_bf16": "_is_amx_tile_supported"}
    found = set()
    for flag, check in checks.items():
        try:
            if getattr(torch.cpu, check)():
                found.add(flag)
        except (AttributeError, RuntimeError):  # private checks: a build without one has not that answer
            pass
    return frozenset(found)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a clock read after it has timed the work (a no-op on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@functools.cache
def bf16_matmul_speedup(d_model: int = 512, device: torch.device = torch.device("cpu"), attempt: int = 0) -> float:
    """fp32 time / bf16 time of a feed-forward-sized product (2048 x d_model x 4 d_model): the median of 3 pairs
    after one untimed (see the module docstring). On a CPU fp32 counts its faster backend (PyTorch's default or
    oneDNN, mtkit/runtime/matmul.py), the one an fp32 run would use: bf16 must beat that, not MKL's generic code.
    `attempt` numbers a repeated measurement (each is cached apart)."""
    del attempt
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2048, d_model, generator=generator).to(device)
    w = torch.randn(4 * d_model, d_model, generator=generator).to(device)
    fp32: list[Callable[..., Tensor]] = [F.linear]
    if device.type == "cpu" and onednn_works():
        fp32.append(onednn_linear)
    x16, w16 = x.bfloat16(), w.bfloat16()

    def seconds(kernel: Callable[..., Tensor], a: Tensor, b: Tensor) -> float:
        synchronize(device)
        start = time.perf_counter()
        kernel(a, b, None)
        synchronize(device)
        return time.perf_counter() - start

    ratios = []
    with torch.no_grad():
        for i in range(4):
            pair = {}
            for name in ("fp32", "bf16") if i % 2 else ("bf16", "fp32"):
                if name == "bf16":
                    pair[name] = seconds(F.linear, x16, w16)
                else:
                    pair[name] = min(seconds(kernel, x, w) for kernel in fp32)
            if i:
                ratios.append(pair["fp32"] / pair["bf16"])
    return statistics.median(ratios)


def smoothed_cross_entropy(logits: Tensor, target: Tensor) -> Tensor:
    """The stand-in training loss that `bf16_update_speedup` times: label-smoothed cross-entropy in fp32, with
    training's default epsilon (the ratio of fp32 to bf16 time does not depend on it)."""
    smoothing = TrainConfig().label_smoothing
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), label_smoothing=smoothing, reduction="sum")


@functools.cache
def bf16_update_speedup(
    cfg: ModelConfig,
    loss: Loss = smoothed_cross_entropy,
    matmul: str = "default",
    tokens: int = CPU_TOKENS,
    device: torch.device = torch.device("cpu"),
    attempt: int = 0,
) -> float:
    """fp32 time / bf16 time of a training pass (forward, loss, backward) of this model on a synthetic batch of
    `tokens` a side: the median of the pairs at LENGTHS but the first (see the module docstring).

    The matrix products alone overstate bf16's gain once fp32's run through oneDNN (for `small` they measured bf16
    faster where whole training passes measured it slower: docs/benchmarks.md, "Figures behind the code's choices",
    mtkit/runtime/precision.py). Each pair has a new sentence length, as token-bucketed
    batches do (oneDNN compiles kernels per shape, and bf16's cost more); fp32 through `matmul`, the backend an
    fp32 run would use. Says first, in the log, about how long it takes. Torch's RNG is left as it was:
    training's seed decides the weights, not this measurement. `attempt` numbers a repeated measurement.
    """
    from mtkit.model.transformer import Transformer

    del attempt
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(0)
        model = apply(Transformer(cfg).to(device).train(), Runtime(matmul=matmul))
        announce(model, cfg, tokens, device)

        def seconds(bf16: bool, length: int) -> float:
            src = torch.randint(4, cfg.vocab_size, (max(1, tokens // length), length), device=device)
            tgt = torch.randint(4, cfg.target_vocab_size, src.shape, device=device)
            synchronize(device)
            start = time.perf_counter()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                logits = model(src, tgt)
            loss(logits, tgt).backward()  # type: ignore[no-untyped-call]
            synchronize(device)
            model.zero_grad(set_to_none=True)
            return time.perf_counter() - start

        ratios = []
        for i, length in enumerate(LENGTHS):
            pair = {bf16: seconds(bf16, length) for bf16 in ((False, True) if i % 2 else (True, False))}
            if i:
                ratios.append(pair[False] / pair[True])
    return statistics.median(ratios)


def announce(model: torch.nn.Module, cfg: ModelConfig, tokens: int, device: torch.device) -> None:
    """Log, before the passes run, that they do and about how long they take: an fp32 product of the model's
    width gives this device's speed, and a pass costs ~6 x its weights x its tokens in products (forward 2x,
    backward 4x), times 1.5 for what is not a product (softmax, layer norm, the loss): an estimate, said as one."""
    x = torch.randn(2048, cfg.d_model, device=device)
    w = torch.randn(4 * cfg.d_model, cfg.d_model, device=device)
    best = float("inf")
    with torch.no_grad():
        for _ in range(3):  # the first pays for the kernel's creation; the best of all is the device's speed
            synchronize(device)
            start = time.perf_counter()
            F.linear(x, w)
            synchronize(device)
            best = min(best, time.perf_counter() - start)
    rate = 2 * x.numel() * w.shape[0] / max(best, 1e-9)
    weights = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    seconds = 2 * len(LENGTHS) * 1.5 * 6 * weights * tokens / rate
    where = "this CPU" if device.type == "cpu" else f"this GPU ({torch.cuda.get_device_name(device)})"
    logger.info("measuring bf16 against fp32 on %s (training passes of this model), about %.0f s", where, seconds)
