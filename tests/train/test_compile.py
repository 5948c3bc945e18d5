"""--compile: the rule auto follows, the compiled loss, and a compiled run against an eager one (fp32, CPU)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from mtkit import checkpoint
from mtkit.config import PRESETS, ModelConfig, TrainConfig
from mtkit.errors import MtkitError
from mtkit.model import Transformer
from mtkit.model.linear import Linear
from mtkit.train import compile as compile_step
from mtkit.train.loss import label_smoothed_sums, plain_sums

CPU = torch.device("cpu")


def test_auto_takes_only_what_was_measured_eager_on_cuda_and_under_ddp_with_its_reason(monkeypatch) -> None:
    monkeypatch.delenv(compile_step.AUTO_ENV, raising=False)
    monkeypatch.delenv(compile_step.MODE_ENV, raising=False)
    choice = compile_step.decide("auto", CPU)
    assert not choice.on and "MKL" in choice.why
    cuda = compile_step.decide("auto", torch.device("cuda"))
    assert not cuda.on and "not yet measured on a GPU" in cuda.why  # until bench/gpu_run.sh shows it faster
    on = compile_step.decide("on", torch.device("cuda"))
    assert on.on and on.mode == "reduce-overhead" and on.asked == "on"  # --compile on stays available
    assert compile_step.decide("off", torch.device("cuda"))[:3] == (False, None, "asked for")
    monkeypatch.setenv(compile_step.AUTO_ENV, "on")
    assert compile_step.decide("auto", CPU).on
    ddp = compile_step.decide("auto", torch.device("cuda"), world_size=2)  # even where auto is pinned on
    assert not ddp.on and "not measured under DDP (2 ranks)" in ddp.why
    assert compile_step.decide("on", torch.device("cuda"), world_size=2).on


def test_on_without_a_cxx_compiler_is_one_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.raises(MtkitError, match="C\\+\\+ compiler"):
        compile_step.decide("on", CPU)
    assert compile_step.decide("on", torch.device("cuda")).on  # a GPU needs none (inductor writes Triton)


def test_length_buckets_auto_follows_the_compile_choice() -> None:
    cfg = TrainConfig()
    assert compile_step.resolve_buckets(cfg, compile_step.CompileChoice(True, None, "")).length_buckets == "ladder"
    assert compile_step.resolve_buckets(cfg, compile_step.CompileChoice(False, None, "")).length_buckets == "none"
    x8 = dataclasses.replace(cfg, length_buckets="x8")
    assert compile_step.resolve_buckets(x8, compile_step.CompileChoice(True, None, "")).length_buckets == "x8"


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_compiled_loss_formula_equals_the_fused_eager_loss(smoothing: float) -> None:
    """Values and gradients, padding included (compiled or not, plain_sums is the same arithmetic)."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 7, 50, generator=generator)
    target = torch.randint(4, 50, (3, 7), generator=generator)
    target[0, 4:] = 0
    target[2, 1:] = 0
    a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    loss_a, nll_a = label_smoothed_sums(a, target, smoothing)
    loss_b, nll_b = plain_sums(b, target, smoothing)
    loss_a.backward()
    loss_b.backward()
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(nll_b, nll_a, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(b.grad, a.grad, rtol=1e-6, atol=1e-6)


def test_a_training_step_traces_as_one_graph() -> None:
    """What torch.compile sees of a CPU training step: the model (dropout on, padded sources, products set to
    oneDNN as mtkit.runtime may set them) and the eager loss are each one graph, without a break: the CPU
    kernels take plain ops while traced (torch.compiler.is_compiling), and eager keeps its own."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=60, d_model=32, d_ff=64, heads=4, encoder_layers=1, decoder_layers=1, dropout=0.1)
    model = Transformer(cfg).train()
    for layer in model.modules():
        if isinstance(layer, Linear):
            layer.onednn = True
    src, tgt = torch.randint(4, 60, (2, 5, 9)).unbind(0)
    src[0, 6:] = 0  # padding: eager asks whether there is any, traced it always masks
    traced = torch._dynamo.explain(model)(src, tgt)
    assert (traced.graph_count, traced.graph_break_count) == (1, 0), traced.break_reasons
    logits = torch.randn(5, 9, 60, requires_grad=True)
    loss = torch._dynamo.explain(label_smoothed_sums)(logits, tgt, 0.1)
    assert (loss.graph_count, loss.graph_break_count) == (1, 0), loss.break_reasons


def run(data, out, compile: str, steps: int = 20):
    """The tiny preset at 512 tokens a batch, dropout 0, ladder buckets, eager or compiled; its train records."""
    from mtkit.train.trainer import train

    vocab = json.loads((data / "bpe.json").read_text())["vocab_size"]
    # 1+1 layers: a compilation's cost grows with the graph (layers), not the sizes; one layer of each kind is
    # every op a deeper model has.
    model_cfg = dataclasses.replace(
        PRESETS["tiny"].model, vocab_size=vocab, dropout=0.0, encoder_layers=1, decoder_layers=1
    )
    cfg = dataclasses.replace(
        PRESETS["tiny"].train,
        max_tokens=512,
        max_steps=steps,
        log_every=1,
        valid_every=10,
        save_every_steps=10,
        compile=compile,
        length_buckets="ladder",
        seed=3,
    )
    result = train(data, out, model_cfg, cfg, device="cpu", threads=1)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return result, records


@pytest.mark.slow
def test_twenty_compiled_updates_match_eager_and_checkpoints_load_uncompiled(toy_data, tmp_path, monkeypatch) -> None:
    """fp32, same products (PyTorch's default: what a compiled CPU step uses), same batches: losses within
    rtol 1e-4 (fused kernels sum in another order); one compilation of the model and one of the loss for every
    batch shape the first log line announces."""
    monkeypatch.setenv("MTKIT_CPU_MATMUL", "default")
    _, eager = run(toy_data, tmp_path / "eager", "off")
    before, breaks = compile_step.compilations(), sum(counters["graph_break"].values())
    result, compiled = run(toy_data, tmp_path / "compiled", "on")
    start = next(r for r in compiled if r["event"] == "start")
    assert start["compile"] == "on" and start["compile_s"] > 0 and start["length_buckets"] == "ladder"
    # Dynamic sizes: one graph for the model, one for the loss, whatever the number of batch shapes (here 7), and
    # no graph break (the model traces clean: test_a_training_step_traces_as_one_graph).
    assert start["shapes"] > 1 and compile_step.compilations() - before == 2
    assert sum(counters["graph_break"].values()) == breaks
    losses = [[r["loss"] for r in records if r["event"] == "train"] for records in (eager, compiled)]
    assert len(losses[0]) == 20
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)
    saved = checkpoint.load(tmp_path / "compiled" / "checkpoint_last.pt")
    assert not any("_orig_mod" in key for key in saved["model"])
    fresh = Transformer(ModelConfig(**saved["model_config"]))
    fresh.load_state_dict(saved["model"])  # strict: every key of an uncompiled model, nothing else
    for name, value in result.model.state_dict().items():
        torch.testing.assert_close(fresh.state_dict()[name], value)
