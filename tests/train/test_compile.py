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
    assert not cuda.on and "took over 2 minutes to compile" in cuda.why  # bench/gpu_run.sh on an H200
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


def broken_compiler(fail_at_call: int):
    """torch.compile's stand-in: the function itself, uncompiled, until its `fail_at_call`-th call (the model's
    and the loss's calls counted together; 1 is the warm-up, which compiles) raises as inductor might."""
    calls = {"n": 0}

    def compile(fn, **kwargs):
        def compiled(*args):
            calls["n"] += 1
            if calls["n"] == fail_at_call:
                raise torch._dynamo.exc.BackendCompilerFailed(fn, RuntimeError("a test's compiler\nfailed"), None)
            return fn(*args)

        return compiled

    return compile


def records_of(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_compilation_that_fails_under_auto_warns_once_and_trains_eagerly_as_if_off(
    toy_data, tmp_path, monkeypatch, caplog
) -> None:
    """The compiler raises while compiling: one warning naming the cause, then the run an eager run is,
    bitwise (the warm-up draws nothing from the run's RNG)."""
    monkeypatch.setenv("MTKIT_CPU_MATMUL", "default")  # a compiling run's products: the eager run must match them
    monkeypatch.setenv(compile_step.AUTO_ENV, "on")  # auto resolves to on (on a GPU, once measured)
    monkeypatch.setattr(torch, "compile", broken_compiler(1))
    with caplog.at_level("WARNING", logger="mtkit.train.compile"):
        fell_back, records = run(toy_data, tmp_path / "fell-back", "auto", steps=6)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (
        len(warnings) == 1
        and "torch.compile failed while compiling (BackendCompilerFailed: RuntimeError: a test's compiler failed)"
        in warnings[0]
    )
    start = next(r for r in records if r["event"] == "start")
    assert start["compile"] == "off" and start["compile_why"].startswith("fell back to eager: torch.compile failed")
    monkeypatch.delenv(compile_step.AUTO_ENV)
    eager, _ = run(toy_data, tmp_path / "eager", "off", steps=6)
    assert fell_back.step == eager.step == 6
    for name, value in eager.model.state_dict().items():
        assert torch.equal(fell_back.model.state_dict()[name], value), name


def test_a_compiled_step_that_fails_later_under_auto_redoes_its_update_eagerly_and_loses_nothing(
    toy_data, tmp_path, monkeypatch, caplog
) -> None:
    """The compiled step raises in the third update (warm-up: calls 1-2, one call each of model and loss per
    update): one warning naming the step; every update is logged once, and the run reaches its last step."""
    monkeypatch.setenv("MTKIT_CPU_MATMUL", "default")
    monkeypatch.setenv(compile_step.AUTO_ENV, "on")
    monkeypatch.setattr(torch, "compile", broken_compiler(7))
    with caplog.at_level("WARNING", logger="mtkit.train.compile"):
        result, records = run(toy_data, tmp_path / "run", "auto", steps=6)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "torch.compile failed at step 3 (BackendCompilerFailed: RuntimeError:" in warnings[0]
    assert "going on eagerly from the same update" in warnings[0]
    assert [r["step"] for r in records if r["event"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert result.step == 6 and all(np.isfinite(r["loss"]) for r in records if r["event"] == "train")
    monkeypatch.delenv(compile_step.AUTO_ENV)
    _, eager = run(toy_data, tmp_path / "eager", "off", steps=6)
    losses = [[r["loss"] for r in rs if r["event"] == "train"] for rs in (eager, records)]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)  # plain_sums before the failure: summed otherwise


def test_only_the_compilers_errors_fall_back() -> None:
    """TorchDynamo's and inductor's errors (by class, or by the frames they passed through) fall back; running
    out of memory, mtkit's own sentences and an error of mtkit's code are what they are."""
    compiler = torch._dynamo.exc.BackendCompilerFailed(print, RuntimeError("no"), None)
    assert compile_step.is_compile_failure(compiler)
    assert not compile_step.is_compile_failure(torch.OutOfMemoryError("CUDA out of memory"))
    assert not compile_step.is_compile_failure(MtkitError("one sentence."))
    assert not compile_step.is_compile_failure(IndexError("a bug of mtkit's own"))
    assert not compile_step.is_compile_failure(KeyboardInterrupt())


@pytest.mark.parametrize("fail_at_call", [1, 7])
def test_a_compilation_that_fails_under_on_stops_with_one_sentence_naming_the_cause_and_compile_off(
    fail_at_call, toy_data, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(compile_step, "cxx_compiler", lambda: "g++")
    monkeypatch.setattr(torch, "compile", broken_compiler(fail_at_call))
    where = "while compiling" if fail_at_call == 1 else "at step 3"
    with pytest.raises(MtkitError) as stopped:
        run(toy_data, tmp_path / "run", "on", steps=6)
    said = str(stopped.value)
    assert said.startswith(f"torch.compile failed {where} (BackendCompilerFailed: RuntimeError: a test's compiler")
    assert said.endswith("rerun with --compile off.") and "\n" not in said
