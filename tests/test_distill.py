"""`mtkit distill`: a teacher's translations as a new data directory, resumable, with its provenance."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from mtkit import distill
from mtkit.config import DecodeConfig
from mtkit.data.dataset import open_data
from mtkit.decode import loading
from mtkit.errors import MtkitError
from tests.support.distill import toy_task


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A data directory of the toy task and two teachers sharing its vocabulary (a trained one, a random one)."""
    return toy_task(tmp_path_factory.mktemp("distill"))


CONFIG = DecodeConfig(beam=2, max_len_a=1.0, max_len_b=8)


def train_sources(data: Path) -> list[str]:
    return (data / "raw" / "train.en").read_text().splitlines()


def run(data: Path, teacher: Path, out: Path, **options) -> dict:
    config = options.pop("config", CONFIG)
    plan = loading.plan([teacher], device="cpu", **dataclasses.asdict(config))
    return distill.distill(data, plan, out, distill.DistillOptions(chunk_lines=5, **options))


def test_the_new_directory_trains_with_the_same_vocabulary_and_says_where_it_came_from(toy, tmp_path):
    data, teacher, _ = toy
    record = run(data, teacher, tmp_path / "new")
    new = tmp_path / "new"
    assert (new / "spm.model").read_bytes() == (data / "spm.model").read_bytes()
    assert (new / "raw" / "valid.de").read_bytes() == (data / "raw" / "valid.de").read_bytes()
    sources = (new / "raw" / "train.en").read_text().splitlines()
    targets = (new / "raw" / "train.de").read_text().splitlines()
    assert len(sources) == len(targets) == record["pairs"]["distilled"] == 23 - record["pairs"]["empty_left_out"]
    assert set(sources) <= set((data / "raw" / "train.en").read_text().splitlines())
    # the targets are the teacher's translations of the sources (its CONFIG search), empty ones left out
    teacher_says = loading.load_translator(teacher, device="cpu").translate(train_sources(data), CONFIG)
    assert list(zip(sources, targets)) == [(s, t) for s, t in zip(train_sources(data), teacher_says) if t.strip()]
    assert open_data(new).split("train") is not None  # what `mtkit train` opens
    prepared = json.loads((new / "prepare.json").read_text())
    settings = prepared["distilled"]["settings"]
    assert settings["teacher"] == distill.fingerprint_teacher([teacher])
    assert settings["decode"]["beam"] == 2 and settings["decode"]["max_len_b"] == 8
    assert json.loads((new / "distill.json").read_text())["state"] == "done"
    assert not (new / distill.CHUNKS).exists()
    assert run(data, teacher, new)["reused"] is True


def test_a_killed_run_resumes_to_the_same_bytes(toy, tmp_path, monkeypatch):
    data, teacher, _ = toy
    run(data, teacher, tmp_path / "whole")
    real, opened = distill.atomic_file, []

    @contextlib.contextmanager
    def killed_in_the_third_chunk(path):
        opened.append(path)
        with real(path) as f:
            yield f
            if len(opened) == 3:
                f.write(b"half a line")
                raise KeyboardInterrupt

    monkeypatch.setattr(distill, "atomic_file", killed_in_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        run(data, teacher, tmp_path / "killed")
    monkeypatch.setattr(distill, "atomic_file", real)
    assert len(list((tmp_path / "killed" / distill.CHUNKS).glob("*.tsv"))) == 2
    assert not list((tmp_path / "killed" / distill.CHUNKS).glob(".*"))  # no half-written chunk
    run(data, teacher, tmp_path / "killed")
    for name in ("raw/train.en", "raw/train.de", "bin/train.de.bin", "bin/train.de.idx"):
        assert (tmp_path / "killed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_nbest_and_the_original_references(toy, tmp_path):
    data, teacher, _ = toy
    config = DecodeConfig(beam=3, nbest=2, max_len_b=8)
    record = run(data, teacher, tmp_path / "n", config=config, mix_references=True)
    original = (data / "raw" / "train.de").read_text().splitlines()
    targets = (tmp_path / "n" / "raw" / "train.de").read_text().splitlines()
    assert record["pairs"]["references"] == 23
    assert targets[-23:] == original
    # before them, each line's two best translations by the teacher, in order, empty ones left out
    found = loading.load_translator(teacher, device="cpu").translate_stream(train_sources(data), config)
    assert targets[:-23] == [text for tr in found for text, _ in tr.hypotheses if text.strip()]
    assert record["pairs"]["distilled"] + record["pairs"]["empty_left_out"] == 2 * 23


def test_refusals(toy, tmp_path):
    data, teacher, other = toy
    new = tmp_path / "new"
    run(data, teacher, new)
    with pytest.raises(MtkitError, match=r"holds a distillation by another teacher .*--restart"):
        run(data, other, new)
    with pytest.raises(MtkitError, match=r"other settings \(decode.beam 2, now 3\)"):
        run(data, teacher, new, config=DecodeConfig(beam=3, max_len_b=8))
    assert run(data, other, new, restart=True)["reused"] is False
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(MtkitError, match="did not write"):
        run(data, teacher, tmp_path / "mine")
    with pytest.raises(MtkitError, match="not the data directory itself"):
        run(data, teacher, data)
    bare = tmp_path / "bare"
    shutil.copytree(data / "raw", bare / "raw")
    with pytest.raises(MtkitError, match=r"run `mtkit bpe"):
        run(bare, teacher, tmp_path / "x")


def test_the_command(toy, tmp_path, cli):
    data, teacher, _ = toy
    out = tmp_path / "cli"
    result = cli("distill", data, "-m", teacher, "--out", out, "--beam", "1", "--max-len-b", "8", "--chunk-lines", "9")
    assert result.returncode == 0, result.stderr
    assert "distilled pairs" in result.stderr and "chunk 3/3" in result.stderr
    assert json.loads((out / "distill.json").read_text())["settings"]["decode"]["beam"] == 1
    again = cli("distill", data, "-m", teacher, "--out", out, "--beam", "2", "--max-len-b", "8", "--chunk-lines", "9")
    assert again.returncode == 1 and "other settings" in again.stderr and "Traceback" not in again.stderr
