"""Without the `ct2` extra, `mtkit export` says in one sentence how to get it (this runs with or without it)."""

from __future__ import annotations

import os

from tests.support.cli import ROOT, run_cli


def test_missing_ctranslate2_is_one_sentence(cli_model, tmp_path):
    hidden = tmp_path / "site"
    (hidden / "ctranslate2").mkdir(parents=True)
    (hidden / "ctranslate2" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(hidden), str(ROOT)])}
    done = run_cli("export", cli_model, "-o", tmp_path / "out", env=env, process=True)  # a fresh import
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "pip install 'mtkit[ct2]'" in done.stderr
    assert not (tmp_path / "out").exists()


def test_export_is_listed_with_its_choices():
    done = run_cli("export", "--help")
    assert done.returncode == 0
    assert "mtkit export" in done.stdout and "Example" in done.stdout and "--quantization" in done.stdout
    assert "mtkit[ct2]" in done.stdout  # not eaten as rich markup
