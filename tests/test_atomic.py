"""One mechanism for every file mtkit writes: whole or absent, with the mode `open` would give."""

import os
import signal
import sys
import tempfile

import pytest

from mtkit.atomic import atomic_file, write_atomic
from tests.support.signals import another_thread, signal_self_after


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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_as_the_temporary_is_made_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, sig):
    path = tmp_path / "out.txt"
    write_atomic(path, b"old\n")
    monkeypatch.setattr(tempfile, "mkstemp", signal_self_after(tempfile.mkstemp, sig))
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # as `prepare` and `bpe` see SIGTERM
    try:
        with pytest.raises(KeyboardInterrupt), another_thread():
            write_atomic(path, b"new\n")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert path.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_on_windows_the_directory_is_not_opened_for_fsync(tmp_path, monkeypatch):
    """Windows cannot open a directory as a file; a write must not fail for that."""
    real_open = os.open

    def no_directories(path, flags, *args, **kwargs):
        if os.path.isdir(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_directories)
    with pytest.raises(PermissionError):  # the simulation bites where the OS is POSIX...
        write_atomic(tmp_path / "a.txt", "posix\n")
    monkeypatch.setattr(sys, "platform", "win32")  # (os.name = "nt" would make pathlib build WindowsPaths)
    write_atomic(tmp_path / "a.txt", "windows\n")  # ...and is stepped around on Windows
    assert (tmp_path / "a.txt").read_text() == "windows\n"
