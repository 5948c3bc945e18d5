"""`mtkit train --init MODEL --out RUN` where RUN already holds a run: one sentence and nothing touched, never a
silent resume that ignores MODEL's weights (--restart moves the run aside first, then fine-tunes)."""

from __future__ import annotations

import json
import shutil

from tests.support.cli import error_line
from tests.support.training import FAST, in_process_run, snapshot


def test_init_into_a_run_directory_that_holds_a_run_is_one_sentence(toy_data, tmp_path, cli) -> None:
    run = tmp_path / "run"
    in_process_run(toy_data, run, max_steps=2)
    model = tmp_path / "model.pt"
    shutil.copy(run / "checkpoint_last.pt", model)  # a model whose vocabulary is the data's
    before = snapshot(run)
    done = cli("train", toy_data, "--out", run, "--init", model, *FAST, "--max-steps", "4")
    assert done.returncode == 1
    assert error_line(done).endswith(f"{run} holds a run: resume it without --init, or use another --out.")
    assert "Traceback" not in done.stderr and snapshot(run) == before
    restarted = cli("train", toy_data, "--out", run, "--init", model, *FAST, "--max-steps", "2", "--restart")
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads((run / "run.json").read_text())["init"]["model"] == str(model)
