"""Mixed precision in training: bf16 autocast, or fp16 with a dynamic loss scaler that skips overflowing steps.

Not in the paper (it trained in fp32 on P100s); the choices follow PyTorch's AMP recipes:
weights and optimizer state stay fp32, matrix products run in the low-precision type, and
the loss (mtkit.train.loss) is always computed in fp32. Which precision a run uses is decided
by mtkit.runtime (`decide_training`, the rule shared with translation); this applies it.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractContextManager

import torch

from mtkit.precision import torch_dtype
from mtkit.runtime import Runtime

logger = logging.getLogger(__name__)


class Precision:
    """The autocast context and (fp16 only) the GradScaler for one device, as the run's `runtime` says."""

    def __init__(self, runtime: Runtime, device: torch.device):
        self.name = runtime.precision
        self.device = device
        # GradScaler's skip-on-overflow is exactly "skip overflowing steps rather than crash".
        self.scaler = torch.amp.GradScaler(device.type) if self.name == "fp16" else None

    def autocast(self) -> AbstractContextManager:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch_dtype(self.name))

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
