"""What the system refuses (a full disk, a directory where a file goes) and damaged inputs: one sentence, exit 1.

A full disk is a real ENOSPC: the write goes to /dev/full. The sentence names the file, which the
system itself does not for a write to an already open file, and nothing half-written is left.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json

import pytest
import torch

from mtkit import checkpoint
from mtkit.cli.app import os_error_sentence
from tests.support.cli import run_cli
from tests.support.corpora import prepare_custom, text_files

pytestmark = pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full (Linux)")


def _one_sentence(result) -> str:
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("mtkit: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@contextlib.contextmanager
def _full_disk(path):
    with open("/dev/full", "wb") as f:
        yield f


def test_translate_to_a_full_disk_names_the_output(cli_model, tmp_path, monkeypatch) -> None:
    """fault: translate -o on a full disk (ENOSPC); expected: exit 1, one sentence naming the file, no file left."""
    monkeypatch.setattr("mtkit.textio.atomic_file", _full_disk)
    out = tmp_path / "hyp.txt"
    line = _one_sentence(run_cli("translate", "-m", cli_model, "-o", out, input="a b c\n" * 3))
    assert f"cannot write {out} (No space left on device)" in line and list(tmp_path.iterdir()) == []


def test_bpe_on_a_full_disk_names_the_array(tmp_path, monkeypatch) -> None:
    """fault: bpe's binarize on a full disk (ENOSPC); expected: exit 1, one sentence naming the array, no temporary."""
    files, out = text_files(tmp_path), tmp_path / "out"
    assert prepare_custom(files, out).returncode == 0
    from mtkit.data import binarize

    real = binarize._temporary

    def to_dev_full(prefix, ext):
        f, path = real(prefix, ext)
        f.close()
        return open("/dev/full", "wb"), path

    monkeypatch.setattr(binarize, "_temporary", to_dev_full)
    line = _one_sentence(run_cli("bpe", out, "--vocab-size", "300"))
    assert "cannot write" in line and "/bin/train." in line and ("No space left" in line or "disk full" in line)
    assert not list((out / "bin").glob(".*.tmp")) and not list((out / "bin").glob("*.bin"))


def test_plot_into_a_directory_is_one_sentence(tmp_path) -> None:
    """fault: plot -o a directory named like an image; expected: exit 1, one sentence naming it."""
    pytest.importorskip("matplotlib")
    run, target = tmp_path / "run", tmp_path / "curves.png"
    run.mkdir()
    target.mkdir()
    records = [{"event": "train", "time": 1.0 + i, "step": i, "loss": 5.0 - i} for i in range(1, 4)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    line = _one_sentence(run_cli("plot", run, "-o", target))
    assert str(target) in line and "Is a directory" in line


def test_an_os_error_without_a_file_name_still_gives_the_reason() -> None:
    """fault: an OSError that names no file; expected: the reason, and that the system named no file."""
    assert os_error_sentence(OSError(errno.EIO, "Input/output error")) == (
        "Input/output error (the system did not say which file)."
    )
    assert os_error_sentence(PermissionError(errno.EACCES, "Permission denied", "/x/y")) == (
        "cannot use /x/y: Permission denied."
    )


def test_a_damaged_gz_given_to_translate_is_one_sentence(cli_model, tmp_path) -> None:
    """fault: translate -i a truncated .gz; expected: exit 1, one sentence naming the file."""
    whole = gzip.compress(("a b c d e f g\n" * 20).encode())
    damaged = tmp_path / "input.en.gz"
    damaged.write_bytes(whole[:-12])  # cut before its end marker and checksum, as by a full disk
    line = _one_sentence(run_cli("translate", "-m", cli_model, "-i", damaged, "-o", tmp_path / "hyp.txt"))
    assert f"cannot read {damaged}" in line and "damaged" in line
    assert not (tmp_path / "hyp.txt").exists()


@pytest.mark.parametrize("key", ["model", "model_config"])
@pytest.mark.parametrize("command", ["average", "translate", "info", "export"])
def test_a_checkpoint_without_its_model_is_one_sentence(cli_model, tmp_path, key, command) -> None:
    """fault: a checkpoint without `model` or `model_config`; expected: exit 1, one sentence naming what is missing."""
    ckpt = checkpoint.load(cli_model)
    del ckpt[key]
    broken = tmp_path / "broken.pt"
    torch.save(ckpt, broken)
    args = {
        "average": ("average", broken, cli_model, "-o", tmp_path / "averaged.pt"),
        "translate": ("translate", "-m", broken),
        "info": ("info", broken),
        "export": ("export", broken, "-o", tmp_path / "exported"),
    }[command]
    if command == "export":
        pytest.importorskip("ctranslate2")
    line = _one_sentence(run_cli(*args, input="a b c\n"))
    assert f"is an mtkit file, but a damaged one: it holds no {key} " in line


def test_info_lists_a_run_whose_last_checkpoint_is_damaged(cli_model, tmp_path) -> None:
    """fault: info RUN with checkpoint_last.pt damaged; expected: exit 0, the run listed from the newest readable."""
    run = cli_model.parent
    copy = tmp_path / "run"
    copy.mkdir()
    for p in run.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    (copy / "checkpoint_last.pt").write_bytes(b"damaged by a full disk")
    result = run_cli("info", copy)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "unreadable" in result.stdout and "checkpoint_last.pt" in result.stdout
    assert f"newest: {copy / 'checkpoint_10.pt'}" in result.stdout
