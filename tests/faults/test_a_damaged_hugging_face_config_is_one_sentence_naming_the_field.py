"""A damaged Hugging Face config.json (a field missing, a size that disagrees with the weights): one sentence.

`vocab_size` missing was a TypeError traceback, a `d_model` unlike the weights' an IndexError.
Now the sentence names the field and the file (mtkit/marian/weights.py).
"""

from __future__ import annotations

import json

import pytest

from tests.support.cli import error_line, run_cli

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def exported(cli_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "model"
    done = run_cli("export", cli_model, "--format", "huggingface", "-o", out)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda c: c.pop("vocab_size"), "vocab_size"),
        (lambda c: c.update(d_model=c["d_model"] * 2), "d_model"),
        (lambda c: c.update(encoder_ffn_dim=7, decoder_ffn_dim=7), "encoder_ffn_dim"),
        (lambda c: c.update(encoder_layers="six"), "encoder_layers"),
    ],
    ids=["vocab_size missing", "d_model doubled", "ffn dim wrong", "layers a string"],
)
def test_a_damaged_field_is_named_with_its_file(exported, tmp_path, change, field):
    """fault: a damaged Hugging Face config.json (missing `vocab_size`, a `d_model` unlike the weights'); expected:
    one sentence naming the field and the file."""
    damaged = tmp_path / "model"
    damaged.mkdir()
    for f in exported.iterdir():
        (damaged / f.name).write_bytes(f.read_bytes())
    config = json.loads((damaged / "config.json").read_text())
    change(config)
    (damaged / "config.json").write_text(json.dumps(config))
    line = error_line(run_cli("translate", "-m", damaged, "--device", "cpu", input="a man\n"))
    assert field in line and str(damaged / "config.json") in line, line
