"""--max-tokens auto (mtkit/train/probe.py): the search against a fake "does it fit", the margin, the update rule,
the CPU's answer, a resumed run's kept value, and the real forward-backward trial on a tiny CPU model."""

from __future__ import annotations

import dataclasses
import gc
import types

import numpy as np
import pytest
import torch

from mtkit.config import PRESETS, ConfigError, ModelConfig, TrainConfig
from mtkit.errors import MtkitError
from mtkit.model import Transformer
from mtkit.runtime import Runtime
from mtkit.train import probe, trainer
from mtkit.train.distributed import World
from mtkit.train.precision import Precision
from mtkit.train.resume import kept_max_tokens
from tests.support.metrics import records_so_far
from tests.support.training import in_process_run

GPU = World(0, 1, 0, torch.device("cuda"))  # resolve() with a fake `fits` never touches the device
CPU = World(0, 1, 0, torch.device("cpu"))


def split(longest: int) -> types.SimpleNamespace:
    """What the probe reads of a training split: its sentence lengths (without BOS/EOS)."""
    return types.SimpleNamespace(src_sizes=np.array([5, longest - 1, 9]), tgt_sizes=np.array([7, 3, longest - 3]))


@pytest.mark.parametrize("limit", [1, 63, 64, 1000, 24_999, 25_000, 40_000, 10**6])
def test_the_search_finds_the_largest_fit_to_within_its_resolution_and_never_tries_above_high(limit: int) -> None:
    tried: list[int] = []

    def fits(n: int) -> bool:
        tried.append(n)
        return n <= limit

    low, high = 64, 30_000
    found = probe.largest_fit(fits, low, high, lambda good: max(low, good // 32))
    assert max(tried) == high and min(tried) >= low
    if limit < low:
        assert found is None
        return
    assert found is not None and found <= min(limit, high)
    assert min(limit, high) - found <= max(low, found // 32)
    assert len(tried) <= 2 + 2 * 12  # halvings and bisections, each a logarithm of high / low


def test_the_update_rule_splits_the_share_evenly_over_the_fewest_steps_that_fit() -> None:
    for share in (25_000, 3125, 8334, 1563):
        for fit in (100, 4096, 12_000, 12_500, 24_999, 25_000, 90_000):
            tokens = probe.per_step(fit, share)
            steps = -(-share // tokens)
            assert tokens <= max(fit, 1) or steps == 1
            assert steps == -(-share // fit)  # as few steps as the fit allows
            assert steps * tokens - share < steps  # evenly: the rounding only
    assert probe.per_step(27_000, 25_000) == 25_000 and probe.per_step(22_500, 25_000) == 12_500


@pytest.mark.parametrize("preset", ["base", "big"])
@pytest.mark.parametrize("limit", [8_000, 20_000, 30_000, 10**6])
@pytest.mark.parametrize("world", [1, 3, 8])
def test_auto_on_a_gpu_keeps_the_presets_update_with_the_margin(preset, limit, world, monkeypatch) -> None:
    monkeypatch.setattr(probe.dist, "all_gather_objects", lambda found, w: [found] * w.size)  # ranks that agree
    cfg = dataclasses.replace(PRESETS[preset].train, max_tokens="auto", length_buckets="ladder")
    calls: list[tuple[int, int]] = []

    def fits(rows: int, length: int) -> bool:
        calls.append((rows, length))
        return rows * length <= limit

    found, fields = probe.resolve(cfg, None, None, split(100), dataclasses.replace(GPU, size=world), 1024, fits)
    assert {length for _, length in calls} == {112}  # the longest pair (100 with BOS/EOS) padded to its bucket
    resolved = found.for_world(world)  # as settings.settle then derives update_freq, once
    tokens, update_freq = resolved.max_tokens, resolved.update_freq
    assert isinstance(tokens, int) and resolved.update_tokens == 0
    assert tokens <= probe.MARGIN * limit  # the margin: at most 90% of what fitted
    assert 25_000 <= update_freq * tokens * world < 25_000 + update_freq * world  # the paper's update, as before
    if limit * probe.MARGIN >= -(-25_000 // world):
        assert update_freq == 1  # the whole update in one step where it fits
    assert "auto:" in fields["max_tokens_why"] and "a share of an update of ~25,000" in fields["max_tokens_why"]


def test_auto_without_an_update_target_is_the_margin_of_the_largest_fit() -> None:
    # update_tokens 0: update_freq is given; length_buckets as the trainer has resolved it (compile.resolve_buckets)
    cfg = dataclasses.replace(PRESETS["tiny"].train, max_tokens="auto", length_buckets="none")
    resolved, _ = probe.resolve(cfg, None, None, split(40), GPU, 256, lambda rows, n: rows * n <= 50_000)
    assert 0.9 * (50_000 - 50_000 // probe.STEPS) <= resolved.max_tokens <= 0.9 * 50_000
    assert resolved.update_freq == cfg.update_freq
    capped, _ = probe.resolve(cfg, None, None, split(40), GPU, 256, lambda rows, n: True)
    assert capped.max_tokens <= probe.CEILING


def test_a_gpu_that_cannot_hold_one_row_is_one_sentence() -> None:
    cfg = dataclasses.replace(PRESETS["big"].train, max_tokens="auto", length_buckets="none")
    with pytest.raises(MtkitError, match=r"one batch of 200 tokens .* does not fit"):
        probe.resolve(cfg, None, None, split(200), GPU, 1024, lambda rows, n: False)


def test_on_a_cpu_auto_is_the_presets_value_and_says_so() -> None:
    def never(rows: int, length: int) -> bool:
        raise AssertionError("a CPU is not probed")

    cfg = dataclasses.replace(PRESETS["small"].train, max_tokens="auto", max_tokens_fallback=2048)
    resolved, fields = probe.resolve(cfg, None, None, split(50), CPU, 512, never)
    assert resolved.max_tokens == 2048 and "the preset's 2,048 on cpu" in fields["max_tokens_why"]
    base = probe.resolve(dataclasses.replace(PRESETS["base"].train, max_tokens="auto"), None, None, split(9), CPU, 9)
    base_cfg = base.cfg.for_world(1)
    assert (base_cfg.max_tokens, base_cfg.update_freq) == (4096, 7)  # the preset's 4,096 x 7, as without auto
    given = probe.resolve(PRESETS["base"].train, None, None, split(9), GPU, 9, never)
    assert given.fields == {} and given.cfg == PRESETS["base"].train  # a number is never probed


def test_a_resumed_run_keeps_the_value_it_resolved() -> None:
    ckpt = {"data": {"epoch": 2, "batch": 5, "world_size": 1, "max_tokens": 12_500, "seed": 1}}
    auto = dataclasses.replace(PRESETS["base"].train, max_tokens="auto")
    kept = kept_max_tokens(auto, ckpt).for_world(1)
    assert (kept.max_tokens, kept.update_freq) == (12_500, 2)
    explicit = dataclasses.replace(auto, max_tokens=4096)
    assert kept_max_tokens(explicit, ckpt) is explicit  # a number given on resume wins (the batches then change)


def test_max_tokens_takes_a_positive_integer_or_auto() -> None:
    assert TrainConfig(max_tokens="auto").max_tokens == "auto"
    assert TrainConfig(max_tokens="2048").max_tokens == 2048  # the command line's and YAML's strings
    assert TrainConfig(max_tokens="auto").for_world(4) == TrainConfig(max_tokens="auto")  # resolved later
    for bad in ("lots", "0", 0, -5, True, 2.5):
        with pytest.raises(ConfigError, match="max_tokens must be a positive integer or auto"):
            TrainConfig(max_tokens=bad)


def test_the_trial_runs_forward_and_backward_and_leaves_no_trace() -> None:
    """The real `batch_fits` on the CPU: it fits, leaves no gradient and no RNG draw; out of memory is False."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=40, d_model=16, d_ff=32, heads=2, encoder_layers=1, decoder_layers=1))
    precision = Precision(Runtime(precision="fp32", why=""), torch.device("cpu"))
    state = torch.get_rng_state()
    assert probe.batch_fits(model, precision, 3, 11, torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), state)
    assert all(p.grad is None for p in model.parameters())

    def out_of_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory (a test)")

    model.forward = out_of_memory  # type: ignore[method-assign]
    assert not probe.batch_fits(model, precision, 3, 11, torch.device("cpu"))


def test_train_with_auto_on_the_cpu_and_a_resume_that_keeps_the_runs_value(cli, toy_data, tmp_path) -> None:
    """Through the command line: the first log line says what auto became; a resume with auto keeps the value
    the run has (here a number given at its start), with no changed setting and no moved batch position."""
    fast = ("--preset", "tiny", "--device", "cpu", "--threads", "1", "--valid-every", "100", "--log-every", "1")
    run = tmp_path / "run"
    done = cli("train", toy_data, "--out", run, *fast, "--max-tokens", "auto", "--max-steps", "1")
    assert done.returncode == 0, done.stderr
    first = " ".join(done.stderr.splitlines()[0].split())
    assert "max_tokens 1024" in first and "max_tokens_why auto: the preset's 1,024 on cpu" in first
    other = tmp_path / "other"
    assert cli("train", toy_data, "--out", other, *fast, "--max-tokens", "400", "--max-steps", "2").returncode == 0
    again = cli("train", toy_data, "--out", other, *fast, "--max-tokens", "auto", "--max-steps", "4")
    assert again.returncode == 0, again.stderr
    assert "keeping the 400 tokens a batch" in again.stderr
    changed = next(line for line in again.stderr.splitlines() if "changed training settings" in line)
    assert changed.endswith("changed training settings: max_steps: 2 != 4")  # nothing about tokens or "auto"
    assert "batches differ" not in again.stderr
    assert torch.load(other / "checkpoint_last.pt", weights_only=True)["data"]["max_tokens"] == 400


def live_tensor_bytes() -> int:
    """Bytes of every distinct tensor storage that Python objects hold now (parameters, moments, buffers...)."""
    gc.collect()
    storages: dict[int, int] = {}
    for obj in gc.get_objects():
        # plain strided tensors and parameters only: a torch.compile test's fake tensors and frozen oneDNN weights
        # (opaque, mkldnn layout), still alive in the process, have no storage to ask
        if (
            type(obj) in (torch.Tensor, torch.nn.Parameter)
            and obj.device.type == "cpu"
            and not obj.is_meta
            and obj.layout == torch.strided
            and not obj.is_mkldnn
        ):
            storage = obj.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def test_auto_trains_with_exactly_the_budget_it_announced_and_the_probe_leaves_no_memory_behind(
    toy_data, tmp_path, monkeypatch
) -> None:
    """The probe run for real on the CPU (its trials are the real forward and backward; only "out of memory"
    is simulated, above 700 tokens): the run then trains bitwise as a run given the announced number, and
    when its loop starts it holds no more tensor memory than that run (no gradient, no held optimizer memory)."""
    monkeypatch.setattr(probe, "PROBED", ("cuda", "cpu"))
    real_fits, tried = probe.batch_fits, []

    def fits(model, precision, rows, length, device) -> bool:
        tried.append(rows * length)
        return rows * length <= 700 and real_fits(model, precision, rows, length, device)

    monkeypatch.setattr(probe, "batch_fits", fits)
    at_loop: dict[str, tuple[int, bool]] = {}
    real_loop = trainer.Trainer._loop

    def measured_loop(self) -> str:
        at_loop[self.run_dir.name] = live_tensor_bytes(), all(p.grad is None for p in self.model.parameters())
        return real_loop(self)

    monkeypatch.setattr(trainer.Trainer, "_loop", measured_loop)
    before = {"auto": live_tensor_bytes()}
    auto = in_process_run(toy_data, tmp_path / "auto", max_tokens="auto", max_steps=4, precision="fp32")
    start = next(r for r in records_so_far(tmp_path / "auto") if r["event"] == "start")
    announced = start["max_tokens"]
    assert tried and max(tried) > 700 and "auto: " in start["max_tokens_why"] and "this CPU" in start["max_tokens_why"]
    assert 0.9 * (700 - 700 // probe.STEPS) <= announced <= 0.9 * 700
    before["given"] = live_tensor_bytes()
    given = in_process_run(toy_data, tmp_path / "given", max_tokens=announced, max_steps=4, precision="fp32")
    for run in ("auto", "given"):
        assert torch.load(tmp_path / run / "checkpoint_last.pt", weights_only=True)["data"]["max_tokens"] == announced
    for name, value in given.model.state_dict().items():
        assert torch.equal(auto.model.state_dict()[name], value), name
    held = {run: at_loop[run][0] - before[run] for run in before}  # what each run holds as its loop starts
    assert at_loop["auto"][1] and held["auto"] <= held["given"]
