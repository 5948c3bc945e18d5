"""`mtkit export -o DIR` touches nothing outside DIR, whatever DIR's record lists and whatever links DIR holds.

A cloned model repository can carry both an `mtkit-export.json` and a symbolic link out of the
directory; the record's names refuse `..` and absolute paths, and are also resolved here, so that
a name reaching outside through a link is never removed or replaced.
"""

from __future__ import annotations

import json

from mtkit.data.owned import inside
from mtkit.export import target


def _fill(names: dict[str, str]):
    def fill(tmp):
        for name, text in names.items():
            (tmp / name).write_text(text, encoding="utf-8")

    return fill


def test_a_record_naming_a_file_through_a_link_out_of_the_directory_removes_nothing_there(tmp_path):
    """fault: `export -o DIR` over an earlier export whose record lists `ext/victim.txt`, `ext` a link out of DIR;
    expected: the file outside DIR is kept, the export is written."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.txt").write_text("keep me", encoding="utf-8")
    out = tmp_path / "out"
    target.write_export(out, _fill({"model.bin": "old"}), {"format": "x"})
    (out / "ext").symlink_to(elsewhere, target_is_directory=True)
    record = json.loads((out / target.RECORD).read_text(encoding="utf-8"))
    record["files"].append("ext/victim.txt")
    (out / target.RECORD).write_text(json.dumps(record), encoding="utf-8")

    target.check_target(out, ["model.bin"])
    target.write_export(out, _fill({"model.bin": "new"}), {"format": "x"})

    assert (elsewhere / "victim.txt").read_text(encoding="utf-8") == "keep me"
    assert (out / "model.bin").read_text(encoding="utf-8") == "new"
    assert "ext/victim.txt" not in json.loads((out / target.RECORD).read_text(encoding="utf-8"))["files"]


def test_names_are_kept_only_where_they_resolve_inside_the_directory(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path, target_is_directory=True)
    (root / "loop").symlink_to(root / "sub", target_is_directory=True)  # a link that stays inside is fine
    (root / "final").symlink_to(tmp_path / "anything")  # the last part a link: removing it removes the link
    names = {"a.bin", "sub/b.bin", "out/c.bin", "loop/d.bin", "final"}
    assert inside(root, names) == {"a.bin", "sub/b.bin", "loop/d.bin", "final"}
