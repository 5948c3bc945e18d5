"""`-o PATH` where PATH is a device, a named pipe or /dev/stdout: written into, as coreutils' `cp` and `sort -o` do.

The temporary-file-and-rename that keeps a regular file whole (mtkit/atomic.py) put a regular
file of translations where a device was (as root, over /dev/null itself) and left a pipe's
reader waiting for ever. The tests never name /dev/null itself as the output: a link to it
shows the same fault (the link replaced) without risking the system's device.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from mtkit import checkpoint
from mtkit.atomic import atomic_file, is_special, write_atomic
from tests.support.cli import ROOT

FAST = ("--beam", "1", "--max-len-b", "3", "--device", "cpu", "--threads", "1")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def read_fifo_in_background(fifo) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, got


def test_a_named_pipe_gets_the_bytes_and_stays_a_pipe(tmp_path):
    """fault: an atomic write to a named pipe; expected: the reader gets the bytes, the pipe stays a pipe."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader, got = read_fifo_in_background(fifo)
    write_atomic(fifo, "hello\n")
    reader.join(timeout=60)
    assert got == [b"hello\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["fifo"]  # no temporary beside it


def test_system_names_are_written_into_even_when_they_lead_to_a_regular_file(tmp_path):
    """`-o /dev/stdout` with stdout redirected to a file: a regular file, but the name is the system's link."""
    assert is_special("/dev/stdout") and is_special("/proc/self/fd/1")
    assert not is_special(tmp_path) and not is_special(tmp_path / "new.txt")
    regular = tmp_path / "out.txt"
    regular.write_text("x")
    assert not is_special(regular)


def test_a_link_to_a_device_is_written_through(tmp_path):
    """fault: `-o LINK` to /dev/null (a model, a text); expected: written into the device, the link kept."""
    link = tmp_path / "null"
    link.symlink_to(os.devnull)
    with atomic_file(link) as f:
        f.write(b"translations\n")
    checkpoint.atomic_save({"weights": [1, 2, 3]}, link)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


@pytest.mark.slow
def test_translate_writes_into_a_named_pipe_and_dev_stdout(cli_model, tmp_path):
    """fault: `translate -o FIFO` and `-o /dev/stdout`; expected: the translations reach the reader, nothing
    replaced, exit 0."""
    source = tmp_path / "in.txt"
    source.write_text("a man runs\na dog\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader, got = read_fifo_in_background(fifo)
    command = [sys.executable, "-m", "mtkit", "translate", "-m", str(cli_model), "-i", str(source), *FAST]
    to_fifo = subprocess.run([*command, "-o", str(fifo)], capture_output=True, env=ENV, timeout=300)
    reader.join(timeout=60)
    assert to_fifo.returncode == 0, to_fifo.stderr
    assert len(got) == 1 and len(got[0].splitlines()) == 2
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    to_stdout = subprocess.run([*command, "-o", "/dev/stdout"], capture_output=True, env=ENV, timeout=300)
    assert to_stdout.returncode == 0, to_stdout.stderr
    assert len(to_stdout.stdout.splitlines()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "in.txt"]
