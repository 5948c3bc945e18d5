"""One mechanism for every file mtkit writes: whole or absent, with the mode `open` would give."""

import os

import pytest

from mtkit.atomic import atomic_file, write_atomic


def test_the_file_appears_whole_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "sub" / "a.json", '{"ü": 1}\n')
    finally:
        os.umask(old)
    path = tmp_path / "sub" / "a.json"
    assert path.read_text(encoding="utf-8") == '{"ü": 1}\n'
    assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    write_atomic(path, b"old\n")
    with pytest.raises(RuntimeError):
        with atomic_file(path) as f:
            f.write(b"half of the new")
            raise RuntimeError("killed")
    assert path.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
