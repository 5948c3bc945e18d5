"""An OPUS-MT config.json with `max_position_embeddings` 2**40: one sentence naming the field, no allocation."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli import run_cli

pytest.importorskip("transformers")


def test_a_huge_max_position_embeddings_is_one_sentence(opus_dir, tmp_path):
    """fault: an OPUS-MT config.json with max_position_embeddings 2**40; expected: one sentence naming the field
    and the file, nothing allocated."""
    model = tmp_path / "model"
    shutil.copytree(opus_dir, model)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config["max_position_embeddings"] = 2**40
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    done = run_cli("translate", "-m", model, "--device", "cpu", input="a dog\n")
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"{model / 'config.json'}: the field max_position_embeddings is {2**40}" in done.stderr
    assert "Traceback" not in done.stderr
