"""Pipes both ways: `-`, named pipes and /dev/stdin as input, translate | score, and translate as a co-process."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.cli import ROOT

FAST = ("--beam", "1", "--max-len-b", "3", "--max-tokens", "256", "--device", "cpu", "--threads", "1")  # fairseq's name
LINES = "a man runs\nthe dog sits on the street\n\nred ball\n"


def fifo_with(tmp_path: Path, text: str) -> tuple[Path, threading.Thread]:
    """A named pipe that a thread fills with `text` (what `<(printf ...)` gives a command)."""
    path = tmp_path / "fifo"
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return path, thread


@pytest.mark.slow
def test_stdin_dash_named_pipes_and_dev_stdin_read_like_a_file(cli, cli_model, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text(LINES)
    expected = cli("translate", "-m", cli_model, "-i", text, *FAST)
    assert expected.returncode == 0 and len(expected.stdout.splitlines()) == 4, expected.stderr
    assert cli("translate", "-m", cli_model, "-i", "-", *FAST, input=LINES).stdout == expected.stdout
    from_dev_stdin = cli("translate", "-m", cli_model, "-i", "/dev/stdin", *FAST, input=LINES, process=True)
    assert from_dev_stdin.stdout == expected.stdout  # /dev/stdin is a process's file descriptor 0
    fifo, writer = fifo_with(tmp_path, LINES)
    assert cli("translate", "-m", cli_model, "-i", fifo, *FAST).stdout == expected.stdout
    writer.join()


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="bash process substitution")
def test_translate_piped_into_score_from_stdin_and_a_process_substitution(cli_model, tmp_path):
    (tmp_path / "in.txt").write_text(LINES)
    (tmp_path / "ref.txt").write_text("ein Mann rennt\nder Hund sitzt\n\nroter Ball\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    mtkit = f"{sys.executable} -m mtkit"
    translate = f"{mtkit} translate -m {cli_model} -i in.txt {' '.join(FAST)}"
    piped = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {translate} | {mtkit} score - --ref ref.txt --json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0, piped.stderr
    substituted = subprocess.run(
        ["bash", "-c", f"{mtkit} score <({translate}) --ref ref.txt --json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert substituted.returncode == 0, substituted.stderr
    piped_report, substituted_report = json.loads(piped.stdout), json.loads(substituted.stdout)
    assert piped_report["lines"] == 4 and piped_report["scores"] == substituted_report["scores"]


@pytest.mark.slow
def test_buffer_size_1_answers_each_line_before_the_next_is_written(cli_model):
    """A co-process: write a line, read its translation, write the next; a hang here would fail the guard."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mtkit", "translate", "-m", str(cli_model), *FAST, "--buffer-size", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    try:
        answers = []
        for line in ("a man runs\n", "red ball\n", "\n"):
            process.stdin.write(line.encode())
            process.stdin.flush()
            assert selector.select(timeout=300), "no answer while the input stays open"  # a hang guard, not timing
            answers.append(process.stdout.readline())
        process.stdin.close()
        assert process.wait(timeout=300) == 0 and process.stdout.read() == b""
        assert len(answers) == 3 and answers[2] == b"\n"
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_a_terminal_is_answered_line_by_line(cli_model):
    """Typed input (stdin a terminal) needs no --buffer-size: each line is translated when Enter is pressed."""
    import pty

    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "mtkit", "translate", "-m", str(cli_model), *FAST],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(terminal)
    try:
        os.write(controller, b"a man runs\n")
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=300), "no answer to a typed line"  # a hang guard, not timing
        assert process.stdout.readline().endswith(b"\n")
        os.write(controller, b"\x04")  # Ctrl-D: end of input
        assert process.wait(timeout=300) == 0
    finally:
        process.kill()
        process.wait()
        os.close(controller)
