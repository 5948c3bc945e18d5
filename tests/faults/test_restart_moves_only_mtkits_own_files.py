"""`train --restart` moves the old run's own files to RUN/previous-<time>/ and nothing else of RUN.

With `--out .` in a source tree, the tree (its code, its own config.json, a tb/ of its own) stays
exactly where and as it was.
"""

from __future__ import annotations

import json

from mtkit.train import rundir
from tests.support.cli import run_cli
from tests.support.training import FAST

TREE = {
    "setup.py": "from setuptools import setup\n",
    "pkg/__init__.py": "VERSION = 1\n",
    "README.md": "my project\n",
    "tb/notes.txt": "my own tb directory\n",
    "notes.jsonl": '{"mine": true}\n',
}


def _tree(root) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.relative_to(root).parts[0].startswith(rundir.PREVIOUS_PREFIX)
    }


def test_restart_with_out_dot_leaves_the_source_tree_alone(toy_data, tmp_path) -> None:
    """fault: train --out . --restart in a source tree; expected: only mtkit's files move, the tree is untouched."""
    tree = tmp_path / "project"
    for rel, text in TREE.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    first = run_cli("train", toy_data, "--out", ".", *FAST, "--max-steps", "2", cwd=tree)
    assert first.returncode == 0, first.stderr
    mine = {rel: text.encode() for rel, text in TREE.items()}
    written = {p.name for p in rundir.own_files(tree)}
    assert {"config.json", "metrics.jsonl", "run.json", "checkpoint_last.pt"} <= written
    again = run_cli("train", toy_data, "--out", ".", *FAST, "--max-steps", "1", "--restart", cwd=tree)
    assert again.returncode == 0, again.stderr
    [previous] = tree.glob(f"{rundir.PREVIOUS_PREFIX}*")
    assert {p.name for p in previous.iterdir()} == written  # the old run's files, and only those
    after = _tree(tree)
    assert {rel: after[rel] for rel in mine} == mine  # the source tree: same files, same bytes
    new_run = {p.name for p in rundir.own_files(tree)}
    assert set(after) - set(mine) - {rundir.LOCK_NAME} == new_run  # besides it: the new run's files only


def test_a_users_config_json_and_tb_directory_are_not_taken_for_a_runs(tmp_path) -> None:
    """fault: --restart where config.json, run.json and tb/ are the user's own; expected: none of them moves."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"name": "my web app"}))
    (run / "run.json").write_text(json.dumps({"format": "someone-else"}))
    (run / "tb").mkdir()
    (run / "tb" / "board.py").write_text("print('mine')\n")
    (run / "metrics.jsonl").write_text('{"event": "train", "time": 1}\n')
    (run / "checkpoint_2.pt").write_bytes(b"a checkpoint")
    moved = rundir.move_aside(run)
    assert moved is not None and sorted(p.name for p in moved.iterdir()) == ["checkpoint_2.pt", "metrics.jsonl"]
    assert sorted(p.name for p in run.iterdir() if p != moved) == ["config.json", "run.json", "tb"]
