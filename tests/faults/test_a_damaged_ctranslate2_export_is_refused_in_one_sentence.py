"""A CTranslate2 int8 export damaged on disk (a NaN written over a scale, a 4 KiB block of model.bin zeroed, a
vocabulary map copied from another export): CTranslate2 reads model.bin without a checksum and translated it into
empty or changed output with exit 0. The export records each file's sha256 and `translate` checks them first."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from tests.support.cli import error_line, run_cli

pytest.importorskip("ctranslate2")


@pytest.fixture(scope="module")
def export(trained_model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ct2-damage") / "int8"
    done = run_cli("export", trained_model, "--format", "ctranslate2", "--quantization", "int8", "-o", out)
    assert done.returncode == 0, done.stderr
    return out


def translate(model: Path, lines: list[str]):
    return run_cli("translate", "-m", model, "--device", "cpu", input="".join(f"{line}\n" for line in lines))


def nan_over_a_float(data: bytearray) -> None:
    """A NaN in place of the last float32 of the file (the tail of model.bin holds the last layers' values)."""
    data[-8:-4] = struct.pack("<f", float("nan"))


def a_zeroed_block(data: bytearray) -> None:
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 4096] = bytes(4096)


@pytest.mark.parametrize("damage", [nan_over_a_float, a_zeroed_block], ids=["nan-scale", "zeroed-block"])
def test_a_damaged_model_bin_is_refused_before_it_translates(export, toy_sentences, tmp_path, damage):
    """fault: model.bin changed on disk; expected: one sentence naming it, exit 1, nothing written on stdout."""
    damaged = tmp_path / "damaged"
    shutil.copytree(export, damaged)
    data = bytearray((damaged / "model.bin").read_bytes())
    damage(data)
    (damaged / "model.bin").write_bytes(bytes(data))
    done = translate(damaged, toy_sentences[:5])
    line = error_line(done)
    assert str(damaged / "model.bin") in line and "sha256 differs" in line, line
    assert done.stdout == ""
    assert translate(export, toy_sentences[:5]).returncode == 0  # the export as written runs


def test_an_export_from_before_the_checksums_still_runs(export, toy_sentences, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(export, older)
    record = json.loads((older / "mtkit-export.json").read_text())
    del record["sha256"]
    (older / "mtkit-export.json").write_text(json.dumps(record))
    assert translate(older, toy_sentences[:5]).stdout == translate(export, toy_sentences[:5]).stdout
