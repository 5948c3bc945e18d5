"""The model's linear maps, x W^T + b (projections, feed-forward, output layer), as modules that carry their kernel.

Each `Linear` holds what mtkit.runtime decided for it (`runtime.apply`), the way nanoGPT's attention holds
`self.flash`: `onednn` (fp32 CPU products through oneDNN instead of PyTorch's default) and `packed` (its
weight in oneDNN's layout, for inference). Built fresh, a layer computes exactly as nn.Linear does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.kernels.linear import PackedWeight, linear


@dataclass(frozen=True)
class Rows:
    """A linear layer restricted to some of its output rows: states (N, in) -> those rows' logits (N, len(rows)).
    Its `weight` and `bias` are plain tensors, which a compiled decoder step takes as inputs (mtkit/model/static.py)."""

    weight: Tensor  # (rows, in), contiguous
    bias: Tensor | None  # (rows,)

    def __call__(self, states: Tensor) -> Tensor:
        return F.linear(states.to(self.weight.dtype), self.weight, self.bias)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) whose product goes through `mtkit.kernels.linear.linear`.

    `onednn` and `packed` are set by mtkit.runtime.apply (never saved).
    """

    onednn: bool = False
    packed: PackedWeight | None = None
    fuses_relu = True  # `forward(x, relu=True)` is max(0, x W^T + b) in one product (`linear_relu`)

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        return linear(x, self.weight, self.bias, self.onednn, self.packed, relu)

    def rows(self, ids: Tensor, logits_bias: Tensor | None = None) -> Callable[[Tensor], Tensor]:
        """This layer restricted to its output rows `ids` (a lexical shortlist, as Sockeye's output layer takes
        `vocab_slice_ids`): states (N, in) -> those rows' logits (N, len(ids)); `logits_bias` (out,), when given,
        is added to every row (Marian's final_logits_bias), folded into the restricted bias."""
        bias = None if self.bias is None else self.bias.index_select(0, ids)
        if logits_bias is not None:
            extra = logits_bias.index_select(0, ids)
            bias = extra.to(self.weight.dtype) if bias is None else bias + extra.to(bias.dtype)
        return Rows(self.weight.index_select(0, ids).contiguous(), bias)


class TiedOutput(Linear):
    """Section 3.4: the pre-softmax linear transformation, sharing its matrix with the (target) embedding.

    A Linear whose `weight` is the embedding table's own Parameter (the same tensor, so training,
    `model.to`, kernels, packing and int8 treat it as any other layer). The matrix is saved once,
    under the embedding's name: this layer writes nothing to a state dict and reads nothing from one,
    so the keys are those of a model whose output layer is a bare `F.linear` on the table.
    """

    def __init__(self, table: nn.Embedding):
        nn.Module.__init__(self)  # not nn.Linear's: no matrix of its own to allocate or initialise
        self.in_features, self.out_features = table.embedding_dim, table.num_embeddings
        self.weight = table.weight
        self.register_parameter("bias", None)

    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        """Nothing: the matrix is saved as the embedding's."""

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Nothing to read (the embedding reads the matrix); a weight saved under this layer's name is unexpected."""
        unexpected_keys.extend(key for key in state_dict if key.startswith(prefix))


def linear_relu(layer: nn.Module, x: Tensor) -> Tensor:
    """max(0, layer(x)), Eq. (2)'s inner half: fused into the product where the layer can (a Linear, whose
    `linear` fuses it, and mtkit.runtime.int8's layers), a separate F.relu for other layers."""
    out: Tensor = layer(x, relu=True) if getattr(layer, "fuses_relu", False) else F.relu(layer(x))
    return out
