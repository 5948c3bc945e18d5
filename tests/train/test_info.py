"""`mtkit info FILE|RUN`: what a model, checkpoint or run is; a damaged or foreign file is one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mtkit import checkpoint, info
from mtkit.errors import MtkitError
from tests.support import metrics
from tests.support.cli import run_cli


@pytest.mark.slow
def test_a_checkpoint_is_described_from_what_it_holds(trained_run: Path) -> None:
    path = trained_run / "checkpoint_last.pt"
    ckpt = checkpoint.load(path)
    described = info.describe(path)
    model = checkpoint.build_from(ckpt)
    assert described["kind"] == "checkpoint" and described["step"] == ckpt["step"] == 6
    assert described["parameters"] == sum(p.numel() for p in model.parameters())  # tied weights counted once
    assert described["model_config"] == ckpt["model_config"] and "2+2 layers, d_model 64" in described["architecture"]
    assert described["vocabulary"]["pieces"] == ckpt["model_config"]["vocab_size"]
    assert described["epoch"] == ckpt["data"]["epoch"] + 1
    assert described["training_hours"] == pytest.approx(ckpt["progress"]["elapsed"] / 3600, abs=1e-4)
    assert described["best_valid"] == {"bleu": -ckpt["progress"]["best"]}
    assert described["provenance"] == json.loads((trained_run / "run.json").read_text())


@pytest.mark.slow
def test_a_run_lists_its_checkpoints_with_steps_and_sizes(trained_run: Path) -> None:
    described = info.describe(trained_run)
    rows = {row["file"]: row for row in described["checkpoints"]}
    assert set(rows) == {"checkpoint_3.pt", "checkpoint_6.pt", "checkpoint_last.pt", "checkpoint_best.pt"}
    assert rows["checkpoint_3.pt"]["step"] == 3 and rows["checkpoint_last.pt"]["step"] == 6
    assert rows["checkpoint_best.pt"]["step"] == checkpoint.load(trained_run / "checkpoint_best.pt")["step"]
    assert all(row["bytes"] == (trained_run / name).stat().st_size for name, row in rows.items())
    records = metrics.records(trained_run)
    valid = [r for r in records if r["event"] == "valid"]
    best = max(valid, key=lambda r: r["bleu"])
    assert described["metrics"]["best_valid_bleu"] == {"value": best["bleu"], "step": best["step"]}
    assert described["metrics"]["last_step"] == 6 and described["metrics"]["stopped"] == "max_steps"
    assert described["newest"]["step"] == 6 and described["config"]["train"]["max_steps"] == 6


@pytest.mark.slow
def test_the_cli_prints_text_or_json(trained_run: Path, tmp_path: Path) -> None:
    text = run_cli("info", trained_run)
    assert text.returncode == 0, text.stderr
    for words in ("checkpoint_3.pt", "step        3", "parameters", "best valid bleu", "sha256", "git"):
        assert words in text.stdout, words
    as_json = run_cli("info", trained_run / "checkpoint_6.pt", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["step"] == 6


@pytest.mark.parametrize(
    "content, words",
    [
        (b"PK\x03\x04 not really a zip", "is not a readable mtkit model or checkpoint"),
        (None, "is not an mtkit model or checkpoint"),
        (b"", "is not a readable mtkit model or checkpoint"),
    ],
)
def test_a_damaged_or_foreign_file_is_one_sentence(tmp_path: Path, content, words) -> None:
    path = tmp_path / "model.pt"
    if content is None:
        torch.save({"state_dict": {"w": torch.zeros(2)}}, path)  # another toolkit's checkpoint
    else:
        path.write_bytes(content)
    with pytest.raises(MtkitError, match=words):
        info.describe(path)
    done = run_cli("info", path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_directory_that_is_no_run_and_a_damaged_mtkit_file_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(MtkitError, match="neither a run directory"):
        info.describe(tmp_path)
    path = tmp_path / "broken.pt"
    torch.save({"format": "mtkit", "version": 1, "kind": "model", "model_config": {"d_model": 64}}, path)
    with pytest.raises(MtkitError, match="an mtkit file, but a damaged one"):
        info.describe(path)
