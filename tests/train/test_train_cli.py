"""`mtkit train` as users meet it: what a run directory holds, what it logs, and one-sentence errors."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil

import pytest
import torch

from mtkit import checkpoint
from mtkit.config import PRESETS, model_config
from mtkit.errors import MtkitError
from mtkit.train import trainer
from mtkit.train.schedule import inverse_sqrt_lr
from mtkit.train.validation import Validation
from tests.support import metrics
from tests.support.cli import run_cli

FAST = ("--preset", "tiny", "--device", "cpu", "--threads", "1")


@pytest.mark.slow
def test_a_run_directory_holds_config_metrics_and_complete_checkpoints(toy_data, tmp_path) -> None:
    run = tmp_path / "run"
    done = run_cli(
        "train",
        toy_data,
        "--out",
        run,
        *FAST,
        "--max-steps",
        "12",
        "--save-every-steps",
        "3",
        "--keep-last",
        "2",
        "--valid-every",
        "6",
        "--log-every",
        "3",
        "--set",
        "d_ff=96",
        "--dropout",
        "0.2",
    )
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    for words in (
        "params",
        "device cpu",
        "precision fp32",
        "precision_why MTKIT_AUTO_PRECISION=fp32",
        "world_size 1",
        "effective_batch",
        "cpu_heap",
    ):
        assert words in first
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["d_ff"] == 96 and config["model"]["dropout"] == 0.2
    assert config["train"]["max_steps"] == 12 and config["world_size"] == 1
    assert sorted(p.name for p in run.glob("checkpoint_*.pt")) == [
        "checkpoint_12.pt",
        "checkpoint_9.pt",
        "checkpoint_best.pt",
        "checkpoint_last.pt",
    ]

    records = metrics.records(run)
    events = [r["event"] for r in records]
    assert events[:2] == ["start", "data"] and events[-1] == "done"
    steps = [r["step"] for r in records if r["event"] == "train"]
    assert steps == [3, 6, 9, 12]
    train_line = next(r for r in records if r["event"] == "train")
    assert {"loss", "nll", "ppl", "lr", "tokens_per_s", "pad_eff", "epoch", "s_per_update", "eta_h"} <= set(train_line)
    assert [r["step"] for r in records if r["event"] == "valid"] == [6, 12]

    ckpt = checkpoint.load(run / "checkpoint_last.pt")
    assert ckpt["kind"] == "checkpoint" and ckpt["step"] == 12
    assert ckpt["vocab"] == (toy_data / "spm.model").read_bytes()
    assert ckpt["train_config"] == config["train"] | {"adam_betas": tuple(config["train"]["adam_betas"])}
    assert set(ckpt["rng"][0]) == {"python", "numpy", "torch", "cuda"}
    assert set(ckpt["data"]) == {"epoch", "batch", "world_size", "max_tokens", "seed"}
    model = checkpoint.build_from(ckpt)  # the saved config alone rebuilds the model
    assert model.cfg.d_ff == 96
    best = checkpoint.load(run / "checkpoint_best.pt")
    assert best["step"] in (6, 12)


@pytest.mark.slow
def test_valid_bleu_scores_greedy_dev_translations_and_picks_the_best_by_them(toy_data, tmp_path) -> None:
    run = tmp_path / "run"
    done = run_cli(
        "train",
        toy_data,
        "--out",
        run,
        *FAST,
        "--max-steps",
        "8",
        "--valid-every",
        "4",
        "--valid-bleu",
        "10",
        "--save-every-steps",
        "4",
    )
    assert done.returncode == 0, done.stderr
    records = metrics.records(run)
    valids = [r for r in records if r["event"] == "valid"]
    assert [r["step"] for r in valids] == [4, 8]
    assert all(0.0 <= r["bleu"] <= 100.0 for r in valids)
    best = max(valids, key=lambda r: (r["bleu"], -r["step"]))  # the first of equal scores stays best
    assert checkpoint.load(run / "checkpoint_best.pt")["step"] == best["step"]

    no_raw = shutil.copytree(toy_data, tmp_path / "no_raw")  # toy_data is shared by the session
    (no_raw / "raw" / "valid.de").unlink()
    failed = run_cli("train", no_raw, "--out", tmp_path / "other", *FAST, "--max-steps", "2", "--valid-bleu", "5")
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "--valid-bleu needs the raw dev text" in failed.stderr


def test_a_wall_clock_budget_stops_the_run_and_a_rerun_has_nothing_left_to_do(toy_data, tmp_path) -> None:
    run = tmp_path / "run"
    done = run_cli("train", toy_data, "--out", run, *FAST, "--max-steps", "1000", "--max-minutes", "0.002")
    assert done.returncode == 0, done.stderr
    records = metrics.records(run)
    assert records[-1]["event"] == "done" and records[-1]["stopped"] == "max_minutes"
    step = records[-1]["step"]
    assert 1 <= step < 1000 and checkpoint.load(run / "checkpoint_last.pt")["step"] == step
    again = run_cli("train", toy_data, "--out", run, *FAST, "--max-steps", "1000", "--max-minutes", "0.002")
    assert again.returncode == 0 and checkpoint.load(run / "checkpoint_last.pt")["step"] == step


def test_lr_cooldown_takes_the_logged_rate_down_to_zero_by_the_budgets_end(toy_data, tmp_path) -> None:
    run = tmp_path / "run"
    args = ("--max-steps", "12", "--log-every", "1", "--valid-every", "100", "--lr-cooldown", "0.5")
    done = run_cli("train", toy_data, "--out", run, *FAST, *args)
    assert done.returncode == 0, done.stderr
    records = metrics.records(run)
    logged = {r["step"]: r["lr"] for r in records if r["event"] == "train"}
    tiny = PRESETS["tiny"]
    assert sorted(logged) == list(range(1, 13))
    for step, lr in logged.items():  # update s starts (s - 1) / 12 into the budget; the last 6 cool down
        paper = inverse_sqrt_lr(step, tiny.model.d_model, tiny.train.warmup, tiny.train.lr_scale)
        assert lr == pytest.approx(paper * min(1.0, (13 - step) / 6), rel=1e-3), step


@pytest.mark.parametrize(
    "args, message",
    [
        (("--preset", "huge"), "'--preset': 'huge' is not one of 'tiny', 'small', 'base', 'big'"),
        (("--set", "vocab_size=500"), "vocab_size 500 does not match the data's vocabulary"),
        (("--set", "colour=blue"), "--set 'colour=blue': expected FIELD=VALUE with FIELD one of"),
        (("--set", "heads=3"), "ModelConfig.d_model must be divisible by heads=3"),
        (("--precision", "fp8"), "'--precision': 'fp8' is not one of 'auto', 'fp32', 'bf16', 'fp16'"),
        (("--precision", "fp16"), "--precision fp16 needs a CUDA device"),
        (("--max-tokens", "0"), "--max-tokens must be a positive integer or auto, got 0."),
        (("--lr-cooldown", "1.5"), "--lr-cooldown must be a fraction in [0, 1], got 1.5."),
        (("--device", "tpu"), "unknown --device 'tpu'; use auto, cpu, cuda, cuda:N or mps"),
    ],
)
def test_bad_input_is_one_sentence_without_traceback(toy_data, tmp_path, args, message) -> None:
    result = run_cli("train", toy_data, "--out", tmp_path / "run", "--preset", "tiny", "--max-steps", "1", *args)
    assert result.returncode == (2 if "is not one of" in message else 1)  # a bad choice is a usage error
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_a_directory_without_binarized_data_says_to_run_bpe(tmp_path) -> None:
    (tmp_path / "raw").mkdir()
    result = run_cli("train", tmp_path, "--out", tmp_path / "run", "--preset", "tiny")
    assert result.returncode == 1 and "run `mtkit bpe" in result.stderr and "Traceback" not in result.stderr
    missing = run_cli("train", tmp_path / "nowhere", "--out", tmp_path / "run", "--preset", "tiny")
    assert missing.returncode == 1 and "nowhere does not exist" in missing.stderr


def test_base_and_big_reach_about_25k_tokens_per_update_for_any_world_size() -> None:
    for name in ("base", "big"):
        cfg = PRESETS[name].train
        for world in (1, 2, 4, 8, 16):
            resolved = cfg.for_world(world)
            capacity = resolved.update_freq * resolved.max_tokens * world
            assert capacity >= 25_000 and (resolved.update_freq == 1 or capacity - cfg.max_tokens * world < 25_000)
    assert PRESETS["base"].train.for_world(1).update_freq == 7
    explicit = dataclasses.replace(PRESETS["base"].train, update_freq=3, update_tokens=0)
    assert explicit.for_world(8).update_freq == 3  # an explicit --update-freq wins
    assert PRESETS["tiny"].train.for_world(4).update_freq == 1


def in_process_run(toy_data, run, **changes) -> trainer.TrainResult:
    cfg = dataclasses.replace(
        PRESETS["tiny"].train, **{"max_tokens": 512, "valid_every": 100, "log_every": 1, **changes}
    )
    data_vocab = json.loads((toy_data / "bpe.json").read_text())["vocab_size"]
    return trainer.train(toy_data, run, model_config("tiny", data_vocab), cfg, device="cpu")


def test_a_nonfinite_loss_skips_the_update_and_many_in_a_row_stop_the_run(
    toy_data, tmp_path, monkeypatch, caplog
) -> None:
    from mtkit.train import forward

    real, calls = forward.label_smoothed_sums, {"n": 0}

    def nan_on_call_3(logits, target, smoothing):
        if not torch.is_grad_enabled():  # validation shares batch_loss; count training batches only
            return real(logits, target, smoothing)
        calls["n"] += 1
        loss, nll = real(logits, target, smoothing)
        return (loss * float("nan"), nll) if calls["n"] == 3 else (loss, nll)

    monkeypatch.setattr(forward, "label_smoothed_sums", nan_on_call_3)
    with caplog.at_level(logging.WARNING):
        result = in_process_run(toy_data, tmp_path / "one", max_steps=4, save_every_steps=0)
    assert result.step == 4 and calls["n"] == 5  # 5 updates of one batch, one of them skipped
    assert "nonfinite | step 3 | in_a_row 1 | action update skipped" in caplog.text
    records = metrics.records(tmp_path / "one")
    assert [r["step"] for r in records if r["event"] == "nonfinite"] == [3]
    assert all(torch.isfinite(p).all() for p in result.model.parameters())

    monkeypatch.setattr(forward, "label_smoothed_sums", lambda *a: tuple(x * float("nan") for x in real(*a)))
    with pytest.raises(MtkitError, match=r"NaN or infinite for 3 updates in a row.*lower --lr-scale"):
        in_process_run(toy_data, tmp_path / "many", max_steps=10, max_nonfinite=3)


def test_the_finished_settings_hold_decisions_not_auto(toy_data, tmp_path, caplog) -> None:
    """A run asked for "auto" precision, compile and batch records what it decided, in config.json and in its
    checkpoints (the user's words stay in the first log line's reasons); a resume asked for "auto" again is no
    change of settings."""
    in_process_run(toy_data, tmp_path / "run", max_steps=2, precision="auto", compile="auto", save_every_steps=0)
    config = json.loads((tmp_path / "run" / "config.json").read_text())["train"]
    saved = checkpoint.load(tmp_path / "run" / "checkpoint_last.pt")["train_config"]
    for recorded in (config, saved):
        assert (recorded["precision"], recorded["compile"]) == ("fp32", "off")  # the tests pin auto to fp32
        assert "auto" not in {v for v in recorded.values() if isinstance(v, str)}
    with caplog.at_level(logging.WARNING):
        resumed = in_process_run(toy_data, tmp_path / "run", max_steps=3, precision="auto", compile="auto")
    changed = [r.getMessage() for r in caplog.records if "changed training settings" in r.getMessage()]
    assert resumed.step == 3 and changed and not any("precision" in m or "compile" in m for m in changed), changed


def test_bf16_autocast_trains_on_cpus_with_bf16_instructions(toy_data, tmp_path, monkeypatch) -> None:
    from mtkit.runtime import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)  # exercise the path on any CPU
    result = in_process_run(toy_data, tmp_path / "bf16", max_steps=2, precision="bf16", save_every_steps=0)
    assert result.step == 2 and all(p.dtype == torch.float32 for p in result.model.parameters())
    assert checkpoint.load(tmp_path / "bf16" / "checkpoint_last.pt")["train_config"]["precision"] == "bf16"
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    with pytest.raises(MtkitError, match="bf16 is 3-20x slower than fp32 on this CPU"):
        in_process_run(toy_data, tmp_path / "slow", max_steps=2, precision="bf16")


def test_patience_stops_early(toy_data, tmp_path, monkeypatch) -> None:
    scores = iter([5.0, 4.0, 4.5, 4.0, 4.2, 3.0])  # new bests at validations 1 and 2, then none

    def fake_validate(*args, **kwargs) -> Validation:
        nll = next(scores)
        return Validation({"loss": nll, "nll": nll, "ppl": 2.0**nll, "tokens": 1})

    monkeypatch.setattr(trainer, "validate", fake_validate)
    result = in_process_run(toy_data, tmp_path / "patient", max_steps=50, valid_every=2, patience=3, save_every_steps=0)
    assert (result.stopped, result.step, result.best) == ("patience", 10, 4.0)
    best = checkpoint.load(tmp_path / "patient" / "checkpoint_best.pt")
    assert best["step"] == 4 and best["progress"]["best"] == 4.0


def test_out_of_memory_names_the_max_tokens_to_lower(toy_data, tmp_path, monkeypatch) -> None:
    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer, "accumulate", oom)
    with pytest.raises(MtkitError, match=r"out of memory .* lower --max-tokens \(now 512, e.g. 256\)"):
        in_process_run(toy_data, tmp_path / "oom", max_steps=2)
