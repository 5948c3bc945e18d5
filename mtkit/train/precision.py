"""Mixed precision: bf16 autocast, or fp16 with a dynamic loss scaler that skips overflowing steps.

Not in the paper (it trained in fp32 on P100s); the choices follow PyTorch's AMP recipes:
weights and optimizer state stay fp32, matrix products run in the low-precision type, and
the loss (mtkit.train.loss) is always computed in fp32.
"""

from __future__ import annotations

import contextlib
import logging
from typing import ContextManager

import torch

from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def cpu_has_native_bf16() -> bool:
    """oneDNN's own test for bf16 instructions (AVX512-BF16 or AMX): the only CPUs where bf16 autocast helps."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class Precision:
    """The autocast context and (fp16 only) the GradScaler for one device."""

    def __init__(self, name: str, device: torch.device):
        self.name, self.device = name, device
        if name == "fp16" and device.type == "cpu":
            raise MtkitError("--precision fp16 needs a CUDA device (CPU kernels are not faster in fp16); "
                             "use --precision bf16 or fp32 on CPU.")
        if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise MtkitError(f"{torch.cuda.get_device_name(device)} has no bf16 support; use --precision fp16 or fp32.")
        if name == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
            # Measured on an AVX2-only EPYC: `small` took 44 s per update in bf16 against 2 s in fp32.
            raise MtkitError("--precision bf16 is about 20x slower than fp32 on this CPU (it has no AVX512-BF16 or "
                             "AMX instructions); use --precision fp32.")
        # GradScaler's skip-on-overflow is exactly "skip overflowing steps rather than crash".
        self.scaler = torch.amp.GradScaler(device.type) if name == "fp16" else None

    def autocast(self) -> ContextManager:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=DTYPES[self.name])

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Before clipping: gradients must be in true units to compare with --clip-norm."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """Apply the update; False when fp16 gradients overflowed and the scaler skipped it."""
        if self.scaler is None:
            optimizer.step()
            return True
        before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        skipped = self.scaler.get_scale() < before  # the scale only drops on overflow
        if skipped:
            logger.warning("fp16 gradients overflowed; update skipped, loss scale now %g", self.scaler.get_scale())
        return not skipped

    def skip(self) -> None:
        """An update not taken after `unscale` (non-finite loss): fp16's scaler closes it and lowers its scale."""
        if self.scaler is not None:
            self.scaler.update()

    def state_dict(self) -> dict | None:
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state: dict | None) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
