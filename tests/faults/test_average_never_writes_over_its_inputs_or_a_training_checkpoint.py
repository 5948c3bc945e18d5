"""`mtkit average` refuses an output that is one of its inputs or a run's checkpoint_*.pt, before writing anything.

A model-only file written there would replace training state that resume and later averages read.
Paths are compared as files: `./B`, a symbolic link to B and a hard link to B are all B.
"""

from __future__ import annotations

import os

import pytest

from tests.support.models import save_checkpoints


def _bytes(run) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file()}


@pytest.mark.parametrize("spelling", ["same", "dot", "symlink", "hardlink"])
def test_an_output_that_is_an_input_is_refused_and_nothing_is_written(cli, tmp_path, spelling) -> None:
    """fault: average A B -o B (as ./B, a link to B, a hard link to B); expected: exit 1, one sentence, B unchanged."""
    run = tmp_path / "run"
    run.mkdir()
    a, b = save_checkpoints(run, [100, 200])
    target = {"same": str(b), "dot": os.path.join(run, ".", b.name)}.get(spelling)
    if spelling == "symlink":
        (tmp_path / "link.pt").symlink_to(b)
        target = str(tmp_path / "link.pt")
    elif spelling == "hardlink":
        os.link(b, tmp_path / "hard.pt")
        target = str(tmp_path / "hard.pt")
    before = _bytes(run)
    result = cli("average", a, b, "-o", target)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "one of the checkpoints to average" in result.stderr and "averaging" not in result.stderr
    assert _bytes(run) == before


@pytest.mark.parametrize("name", ["checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_300.pt"])
def test_an_output_named_like_a_training_checkpoint_is_refused(cli, tmp_path, name) -> None:
    """fault: average RUN -o RUN/checkpoint_*.pt; expected: exit 1, one sentence, the run unchanged."""
    run = tmp_path / "run"
    run.mkdir()
    save_checkpoints(run, [100, 200])
    before = _bytes(run)
    result = cli("average", run, "--last", "2", "-o", run / name)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "named like a training checkpoint" in " ".join(result.stderr.split())
    assert _bytes(run) == before


def test_a_fresh_output_name_is_written(cli, tmp_path) -> None:
    """fault: none (the control); expected: average A B -o C writes C and leaves A and B as they were."""
    run = tmp_path / "run"
    run.mkdir()
    a, b = save_checkpoints(run, [100, 200])
    before = _bytes(run)
    result = cli("average", a, b, "-o", tmp_path / "averaged.pt")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "averaged.pt").is_file() and _bytes(run) == before
