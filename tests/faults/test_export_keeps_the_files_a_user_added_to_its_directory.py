"""`mtkit export -o DIR` never loses a user's file, and every bad DIR is one sentence before the conversion.

The CLI cases run with whichever export extra is installed (ct2 or hf) and skip, with the reason,
where neither is; the directory protocol itself (mtkit/export/target.py) is tested without either.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os

import pytest

from mtkit.errors import MtkitError
from mtkit.export import target
from tests.support.cli import run_cli


def _format() -> str:
    for module, name in (("ctranslate2", "ctranslate2"), ("transformers", "huggingface")):
        if importlib.util.find_spec(module) is not None:
            return name
    pytest.skip("neither export extra is installed: pip install 'mtkit[ct2]' or 'mtkit[hf]'")


def _export(model, out, **kwargs):
    return run_cli("export", model, "--format", _format(), "-o", out, **kwargs)


def test_reexport_keeps_a_file_the_user_added(cli_model, tmp_path):
    """fault: `export -o DIR` again over an earlier export to which the user added a file; expected: the
    user's file is kept, the export's own files are replaced."""
    out = tmp_path / "exported"
    assert _export(cli_model, out).returncode == 0
    (out / "notes.txt").write_text("my notes", encoding="utf-8")
    again = _export(cli_model, out)
    assert again.returncode == 0, again.stderr
    assert (out / "notes.txt").read_text(encoding="utf-8") == "my notes"
    record = json.loads((out / target.RECORD).read_text(encoding="utf-8"))
    assert "notes.txt" not in record["files"] and "complete" not in record


def test_a_user_file_the_export_would_overwrite_is_refused(cli_model, tmp_path):
    """fault: the user put a file named like one the export writes into an earlier export; expected: one
    sentence naming it, before the conversion, and the file unchanged."""
    out = tmp_path / "exported"
    assert _export(cli_model, out).returncode == 0
    (out / "config.json").unlink()
    (out / "config.json").write_text("mine", encoding="utf-8")  # now not the export's (the record still lists it)
    record = json.loads((out / target.RECORD).read_text(encoding="utf-8"))
    record["files"].remove("config.json")
    (out / target.RECORD).write_text(json.dumps(record), encoding="utf-8")
    done = _export(cli_model, out)
    assert done.returncode == 1 and "config.json was not written by" in done.stderr and "Traceback" not in done.stderr
    assert (out / "config.json").read_text(encoding="utf-8") == "mine"


def test_output_dot_in_an_empty_directory_works(cli_model, tmp_path):
    """fault: `export -o .` in an empty directory; expected: the export is written there, nothing beside it."""
    here = tmp_path / "empty"
    here.mkdir()
    done = _export(cli_model, ".", cwd=here)
    assert done.returncode == 0, done.stderr
    assert (here / target.RECORD).is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_a_dangling_symlink_is_one_sentence_before_the_conversion(cli_model, tmp_path):
    """fault: `export -o LINK` where LINK points to nothing; expected: one sentence, the link left as it was."""
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    done = _export(cli_model, link)
    assert done.returncode == 1 and "does not exist" in done.stderr and "Traceback" not in done.stderr
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_an_existing_directory_is_filled_in_place_as_a_mount_point_needs(cli_model, tmp_path):
    """fault: `export -o MOUNTPOINT` (a directory that cannot be renamed, whose parent may be read-only); expected:
    the export is written inside it, and nothing is created or renamed in its parent."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    inode = mount.stat().st_ino
    done = _export(cli_model, mount)
    assert done.returncode == 0, done.stderr
    assert mount.stat().st_ino == inode and sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_a_read_only_parent_is_one_sentence_before_the_conversion(cli_model, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    done = _export(cli_model, locked / "out")
    assert done.returncode == 1 and "permission denied" in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- the protocol, without an extra
def _fill(names: dict[str, str]):
    def fill(tmp):
        for name, text in names.items():
            (tmp / name).write_text(text, encoding="utf-8")

    return fill


def test_a_failure_while_moving_in_leaves_every_file_listed_and_a_rerun_finishes(tmp_path, monkeypatch):
    out = tmp_path / "out"
    target.write_export(out, _fill({"a.bin": "old", "b.json": "old", "gone.txt": "old"}), {"format": "x"})
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    real, calls = os.replace, []

    def failing(src, dst):
        calls.append(dst)
        if len(calls) == 3:  # after the first file moved in: disk full
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst)

    monkeypatch.setattr(target.os, "replace", failing)
    with pytest.raises(MtkitError, match="No space left on device"):
        target.write_export(out, _fill({"a.bin": "new", "b.json": "new"}), {"format": "x"})
    monkeypatch.setattr(target.os, "replace", real)
    assert target.owned(out) >= {"a.bin", "b.json", "gone.txt"}  # the interim record lists old and new
    target.check_target(out, ["a.bin", "b.json"])  # so a rerun is not refused
    target.write_export(out, _fill({"a.bin": "new", "b.json": "new"}), {"format": "x"})
    assert sorted(p.name for p in out.iterdir()) == ["a.bin", "b.json", target.RECORD, "notes.txt"]
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine" and (out / "a.bin").read_text() == "new"


def test_a_non_empty_directory_export_never_wrote_is_refused(tmp_path):
    (tmp_path / "project.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(MtkitError, match="did not write"):
        target.check_target(tmp_path, ["model.bin"])


def test_a_file_as_output_is_refused(tmp_path):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(MtkitError, match="is not a directory"):
        target.check_target(tmp_path / "file", ["model.bin"])
