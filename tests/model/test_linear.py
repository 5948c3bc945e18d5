"""The model's linear layers: nn.Linear's parameters and state dict, and a tied output layer that is a Linear too."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import mtkit
from mtkit.model.linear import Linear, TiedOutput, linear_relu


def tiny(**overrides) -> mtkit.Transformer:
    torch.manual_seed(0)
    return mtkit.build_model("tiny", 40, **overrides)


def test_the_state_dict_is_the_same_as_with_torchs_linear_layers():
    model = tiny()
    assert all(type(m) is not torch.nn.Linear for m in model.modules())
    assert isinstance(model.decoder[0].ffn.w_1, torch.nn.Linear)  # a subclass: same parameters, same keys
    assert "decoder.0.ffn.w_1.weight" in model.state_dict()


def test_a_fresh_layer_computes_as_torchs_and_chooses_no_kernel():
    layer = Linear(16, 12)
    assert not layer.onednn and layer.packed is None  # until mtkit.runtime.apply says otherwise
    x = torch.randn(4, 16)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))


def test_the_tied_output_layer_shares_the_embedding_matrix_and_adds_no_parameter():
    model = tiny()
    out = model.output_proj
    assert isinstance(out, TiedOutput) and isinstance(out, Linear)  # packing and int8 treat it as any layer
    assert out.weight is model.tgt_embed.table.weight and out.bias is None
    assert not any(name.startswith("output_proj") for name, _ in model.named_parameters())  # counted once
    assert not any(name.startswith("output_proj") for name in model.state_dict())
    x = torch.randn(2, 3, model.cfg.d_model)
    assert torch.equal(model.project(x), F.linear(x, model.tgt_embed.table.weight))
    with torch.no_grad():
        model.tgt_embed.table.weight.mul_(2.0)  # one matrix: the output layer sees the change
    assert torch.equal(model.project(x), F.linear(x, model.tgt_embed.table.weight))


def test_a_tied_output_stays_tied_through_to_and_training():
    model = tiny().to(torch.float64)
    assert model.output_proj.weight is model.tgt_embed.table.weight and model.output_proj.weight.dtype == torch.float64
    untied = tiny(share_embeddings="none")
    assert type(untied.output_proj) is Linear and "output_proj.weight" in untied.state_dict()


def test_a_layer_without_a_fused_relu_gets_a_separate_one():
    layer = torch.nn.Linear(16, 12)  # as the int8 layers are: no `relu` argument
    x = torch.randn(4, 16)
    assert torch.equal(linear_relu(layer, x), F.relu(layer(x)))
