"""What a run leaves to see and repeat it: TensorBoard events, RUN/run.json, provenance in every checkpoint."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest

from mtkit import average as averaging
from mtkit import checkpoint
from mtkit.errors import MtkitError
from tests.support.metrics import records
from tests.support.training import ARCHIVE_SHA, sha256, train_recorded


@pytest.mark.slow
def test_tensorboard_holds_every_metrics_value_with_its_step_and_wall_time(trained_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(trained_run / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    expected = {}
    for record in records(trained_run):
        for key, value in record.items():
            if key not in ("event", "time", "step") and isinstance(value, (int, float)) and math.isfinite(value):
                expected.setdefault(f"{record['event']}/{key}", []).append(
                    (record.get("step", 0), record["time"], float(value))
                )
    assert {"train/loss", "train/lr", "train/tokens_per_s", "valid/loss", "valid/bleu", "start/params"} <= set(expected)
    assert set(events.Tags()["scalars"]) == set(expected)
    for tag, points in expected.items():
        seen = [(e.step, e.wall_time, e.value) for e in events.Scalars(tag)]
        assert [(s, t) for s, t, _ in seen] == [(s, pytest.approx(t)) for s, t, _ in points], tag
        assert [v for _, _, v in seen] == pytest.approx([v for _, _, v in points], rel=1e-6), tag


def test_a_missing_tensorboard_extra_is_one_sentence(tmp_path: Path, monkeypatch) -> None:
    from mtkit.train.tensorboard import TensorBoardLog

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # `import` of it now fails
    with pytest.raises(MtkitError, match=r"pip install 'mtkit\[tensorboard\]'"):
        TensorBoardLog(tmp_path)
    assert not (tmp_path / "tb").exists()


@pytest.mark.slow
def test_run_json_holds_the_sha256_chain_and_every_checkpoint_carries_it(trained_run: Path) -> None:
    record = json.loads((trained_run / "run.json").read_text())
    data = Path(record["data"]["dir"])
    assert record["format"] == "mtkit-run" and record["start_step"] == 0 and record["earlier"] == []
    assert record["command"].startswith(sys.argv[0])  # the test's process: pytest's command line
    assert {"mtkit", "torch", "sentencepiece", "sacrebleu", "python"} <= set(record["versions"])
    assert (record["device"].startswith("cpu"), record["threads"], record["precision"], record["world_size"]) == (
        True,
        1,
        "fp32",
        1,
    )
    assert record["decisions"]["precision"][0] == "fp32" and record["decisions"]["fp32_matmul"][1]  # with its reason
    assert record["data"]["archives"]["sources"][0]["sha256"] == ARCHIVE_SHA
    assert record["data"]["bpe"]["raw_text_sha256"]["raw/train.en"] == sha256(data / "raw" / "train.en")
    files = record["data"]["files"]
    assert set(files) == {
        "spm.model",
        *(f"bin/{s}.{lang}.{ext}" for s in ("train", "valid") for lang in ("en", "de") for ext in ("bin", "idx")),
    }
    for rel, info in files.items():
        assert info["sha256"] == sha256(data / rel), rel
    assert files["spm.model"]["sha256"] == record["data"]["bpe"]["spm_model_sha256"]
    git = record["git"]
    if (Path(checkpoint.__file__).parents[1] / ".git").exists():
        assert len(git["commit"]) == 40
    for path in trained_run.glob("checkpoint_*.pt"):
        assert checkpoint.load(path)["provenance"] == record, path.name


@pytest.mark.slow
def test_a_resume_adds_a_session_and_average_carries_the_newest_provenance(trained_run: Path, tmp_path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    first = json.loads((run / "run.json").read_text())
    train_recorded(Path(first["data"]["dir"]), run, 9, tensorboard=False)
    record = json.loads((run / "run.json").read_text())
    assert record["start_step"] == 6 and record["earlier"] == [{k: v for k, v in first.items() if k != "earlier"}]
    assert record["data"]["files"] == first["data"]["files"]  # unchanged files: hashes reused, equal

    paths = averaging.run_checkpoints(run, 3)
    averaged = averaging.average(paths)
    assert averaged["provenance"] == record
    assert averaged["averaged_from"] == [
        {"file": str(p), "step": int(p.stem.split("_")[1]), "sha256": sha256(p)} for p in paths
    ]
