"""`prepare` and `bpe` write into a directory the user names: they replace only what their record lists."""

from __future__ import annotations

import json

from tests.support.cli import error_line
from tests.support.corpora import prepare_custom, text_files


def test_prepare_keeps_the_users_files_and_refuses_to_overwrite_one(cli, tmp_path):
    files, out = text_files(tmp_path), tmp_path / "out"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / "notes.txt").write_text("my notes\n")
    (out / "raw" / "train.en").write_text("my own corpus\n")
    line = error_line(prepare_custom(files, out))
    assert f"{out / 'raw' / 'train.en'} was not written by `mtkit prepare`" in line
    assert (out / "raw" / "train.en").read_text() == "my own corpus\n"

    (out / "raw" / "train.en").unlink()
    assert prepare_custom(files, out).returncode == 0
    assert (out / "raw" / "notes.txt").read_text() == "my notes\n"
    assert "raw/notes.txt" not in json.loads((out / "prepare.json").read_text())["files"]

    # A rerun without a test set removes the test files mtkit wrote, and only those.
    done = prepare_custom(text_files(tmp_path, tag="new"), out, test=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (out / "raw").iterdir()) == [
        "notes.txt",
        "train.de",
        "train.en",
        "valid.de",
        "valid.en",
    ]
    assert "new" in (out / "raw" / "train.en").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["prepare.json", "raw"]


def test_bpe_keeps_the_users_files_and_refuses_to_overwrite_one(cli, tmp_path):
    out = tmp_path / "out"
    assert prepare_custom(text_files(tmp_path), out).returncode == 0
    (out / "spm.model").write_bytes(b"a model from elsewhere")
    line = error_line(cli("bpe", out, "--vocab-size", "300"))
    assert f"{out / 'spm.model'} was not written by `mtkit bpe`" in line
    assert (out / "spm.model").read_bytes() == b"a model from elsewhere"

    (out / "spm.model").unlink()
    (out / "bin").mkdir()
    (out / "bin" / "mine.txt").write_text("keep me\n")
    assert cli("bpe", out, "--vocab-size", "300").returncode == 0
    record = json.loads((out / "bpe.json").read_text())
    assert "spm.model" in record["files"] and "bin/train.en.bin" in record["files"]
    done = cli("bpe", out, "--vocab-size", "310", "--force")  # its own files are replaced, even with --force
    assert done.returncode == 0, done.stderr
    assert (out / "bin" / "mine.txt").read_text() == "keep me\n"


def test_a_publish_cut_short_still_knows_which_files_are_mtkits(cli, tmp_path):
    """Killed between moving files into raw/ and writing the final record: the rerun replaces them."""
    files, out = text_files(tmp_path), tmp_path / "out"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / "train.en").write_text("half of an old run\n")
    (out / "raw" / "notes.txt").write_text("my notes\n")
    (out / "prepare.json").write_text(
        json.dumps({"format": 1, "state": "publishing", "files": {"raw/train.en": {}, "raw/old.de": {}}})
    )
    (out / "raw" / "old.de").write_text("from a split no longer prepared\n")
    done = prepare_custom(files, out)
    assert done.returncode == 0, done.stderr
    assert "house number 0" in (out / "raw" / "train.en").read_text()
    assert not (out / "raw" / "old.de").exists() and (out / "raw" / "notes.txt").exists()
    assert json.loads((out / "prepare.json").read_text())["settings"]["corpus"] == "custom-en-de"
