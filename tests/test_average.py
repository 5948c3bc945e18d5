"""Checkpoint averaging: the exact mean, ties kept, the newest N by step, and clear refusals."""

from __future__ import annotations

import hashlib

import pytest
import torch

from mtkit import average as averaging
from mtkit import checkpoint
from mtkit.errors import MtkitError
from tests.support.models import OPAQUE_VOCAB, save_checkpoints


def test_the_average_of_two_checkpoints_is_their_exact_mean(tmp_path):
    a, b = save_checkpoints(tmp_path, [100, 200])
    wa, wb = checkpoint.load(a)["model"], checkpoint.load(b)["model"]
    averaged = averaging.average([a, b])
    assert averaged["kind"] == "model" and "optimizer" not in averaged
    assert averaged["step"] == 200 and averaged["vocab"] == OPAQUE_VOCAB
    assert averaged["averaged_from"] == [
        {"file": str(p), "step": step, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p, step in ((a, 100), (b, 200))
    ]
    assert set(averaged["model"]) == set(wa)
    for key, value in averaged["model"].items():
        assert value.dtype == wa[key].dtype
        assert torch.equal(value, (wa[key] + wb[key]) / 2), key


def test_averaging_one_file_returns_it_unchanged_and_keeps_the_embedding_tie(tmp_path):
    [only] = save_checkpoints(tmp_path, [300])
    averaged = averaging.average([only])
    original = checkpoint.load(only)["model"]
    assert all(torch.equal(averaged["model"][k], original[k]) for k in original)
    checkpoint.atomic_save(averaged, tmp_path / "averaged.pt")
    loaded = checkpoint.load(tmp_path / "averaged.pt")
    weights = loaded["model"]
    assert weights["src_embed.table.weight"].data_ptr() == weights["tgt_embed.table.weight"].data_ptr()
    model = checkpoint.build_from(loaded)
    assert model.src_embed.table is model.tgt_embed.table
    assert torch.equal(model.src_embed.table.weight, original["src_embed.table.weight"])


def test_one_checkpoint_becomes_a_model_file_without_the_training_state(tmp_path):
    """`mtkit average CKPT -o model.pt` and the recipe's model.pt: the same weights and everything info, export and
    decoding read, without what only resuming needs (Adam's moments: two thirds of a real checkpoint)."""
    [only] = save_checkpoints(tmp_path, [300])
    ckpt = checkpoint.load(only)
    ckpt.update(scaler=None, rng=[{"torch": torch.zeros(8, dtype=torch.uint8)}], train_config={"max_tokens": 512})
    checkpoint.atomic_save(ckpt, only)
    model = averaging.model_file(only)
    assert model["kind"] == "model" and not {"optimizer", "scaler", "rng"} & set(model)
    assert model["step"] == 300 and model["train_config"] == {"max_tokens": 512} and model["vocab"] == OPAQUE_VOCAB
    sha256 = hashlib.sha256(only.read_bytes()).hexdigest()
    assert model["taken_from"] == {"file": str(only), "step": 300, "sha256": sha256}
    assert "averaged_from" not in model and averaging.average([only])["taken_from"] == model["taken_from"]
    assert all(torch.equal(model["model"][k], v) for k, v in ckpt["model"].items())


def test_run_checkpoints_are_the_newest_by_step_without_last_or_best(tmp_path):
    save_checkpoints(tmp_path, [900, 1000, 80, 200])
    (tmp_path / "checkpoint_x.pt").write_bytes(b"")
    assert [p.name for p in averaging.run_checkpoints(tmp_path, 3)] == [
        "checkpoint_200.pt",
        "checkpoint_900.pt",
        "checkpoint_1000.pt",
    ]
    assert len(averaging.run_checkpoints(tmp_path, 20)) == 4
    (tmp_path / "empty").mkdir()
    with pytest.raises(MtkitError, match="no checkpoint_<step>.pt"):
        averaging.run_checkpoints(tmp_path / "empty", 1)
    with pytest.raises(MtkitError, match="does not exist"):
        averaging.run_checkpoints(tmp_path / "missing", 1)


def test_different_configs_are_refused_naming_the_fields(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    [a] = save_checkpoints(tmp_path / "a", [1])
    [b] = save_checkpoints(tmp_path / "b", [2], d_ff=96, dropout=0.2)
    with pytest.raises(MtkitError, match=r"configs differ \(d_ff: 128 != 96; dropout: 0.1 != 0.2\)"):
        averaging.average([a, b])


@pytest.mark.slow
def test_average_cli_on_a_run_and_on_files(cli, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    paths = save_checkpoints(run, [100, 200, 300])
    done = cli("average", run, "--last", "2")
    assert done.returncode == 0, done.stderr
    assert "checkpoint_200.pt" in done.stderr and "checkpoint_300.pt" in done.stderr
    assert "checkpoint_100.pt" not in done.stderr and done.stdout == ""
    expected = averaging.average(paths[1:])["model"]
    written = checkpoint.load(run / "averaged.pt")
    assert all(torch.equal(written["model"][k], expected[k]) for k in expected)
    done = cli("average", *paths[:2])
    assert done.returncode == 1 and "needs --output FILE" in done.stderr and "Traceback" not in done.stderr
    done = cli("average", *paths[:2], "-o", tmp_path / "two.pt")
    assert done.returncode == 0 and checkpoint.load(tmp_path / "two.pt")["step"] == 200
    done = cli("average", run / "checkpoint_last.pt", "-o", tmp_path / "model.pt")
    assert done.returncode == 0 and "its weights without the training state" in done.stderr
    assert checkpoint.load(tmp_path / "model.pt")["taken_from"]["step"] == 300
    done = cli("info", tmp_path / "model.pt")
    assert done.returncode == 0 and "taken from" in done.stdout and "checkpoint_last.pt (step 300" in done.stdout
