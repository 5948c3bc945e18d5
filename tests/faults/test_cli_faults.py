"""What the command line survives: closed pipes, closed stdin, bad output paths, empty files, typos, odd pieces.

Each test is one row of issue 10's table: one clear sentence on stderr, the documented exit
code, no traceback, no half-written file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.support.cli import ROOT

FAST = ("--beam", "1", "--max-len-b", "3", "--device", "cpu", "--threads", "1")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def one_sentence(done: subprocess.CompletedProcess, code: int, message: str) -> None:
    stderr = done.stderr if isinstance(done.stderr, str) else done.stderr.decode()
    assert done.returncode == code, stderr
    assert message in stderr and "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr


@pytest.mark.slow
def test_a_reader_that_goes_away_is_a_normal_end(cli_model, tmp_path):
    """`mtkit translate ... | head -1`: exit 0 and nothing on stderr (typer's own handler exits 1)."""
    source = tmp_path / "in.txt"
    source.write_text("a man runs on the street\n" * 300)
    translate = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mtkit",
            "translate",
            "-m",
            str(cli_model),
            "-i",
            str(source),
            *FAST,
            "--buffer-size",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    head = subprocess.run(["head", "-1"], stdin=translate.stdout, capture_output=True, timeout=300)
    translate.stdout.close()  # only head holds the pipe now
    assert translate.wait(timeout=300) == 0
    assert translate.stderr.read() == b"" and len(head.stdout.splitlines()) == 1


@pytest.mark.slow
def test_an_output_directory_is_refused_before_the_model_is_even_read(cli, tmp_path):
    done = cli("translate", "-m", tmp_path / "no-model.pt", "-o", tmp_path, input="a man\n")
    one_sentence(done, 1, f"output {tmp_path} is a directory; give a file name.")


def test_closed_stdin_is_one_sentence(cli_model, tmp_path):
    (tmp_path / "ref.txt").write_text("eins\n")
    for args in (("translate", "-m", str(cli_model), *FAST), ("score", "-", "--ref", str(tmp_path / "ref.txt"))):
        done = subprocess.run(
            [sys.executable, "-m", "mtkit", *args],
            capture_output=True,
            text=True,
            env=ENV,
            preexec_fn=lambda: os.close(0),
            timeout=300,
        )
        one_sentence(done, 1, "stdin is closed; give an input file, or pipe text in.")


def test_scoring_two_empty_files_is_one_sentence(cli, tmp_path):
    (tmp_path / "hyp.txt").write_text("")
    (tmp_path / "ref.txt").write_text("")
    one_sentence(
        cli("score", tmp_path / "hyp.txt", "--ref", tmp_path / "ref.txt"),
        1,
        f"{tmp_path / 'hyp.txt'} is empty: there is nothing to score.",
    )


def test_averaging_a_mistyped_run_says_it_does_not_exist(cli, tmp_path):
    one_sentence(cli("average", tmp_path / "typo", "--last", "5"), 1, f"{tmp_path / 'typo'} does not exist")


def test_missing_and_directory_inputs_are_one_sentence(cli, tmp_path):
    (tmp_path / "hyp.txt").write_text("eins\n")
    one_sentence(cli("score", tmp_path / "nope.txt", "--ref", tmp_path / "hyp.txt"), 1, "nope.txt does not exist.")
    one_sentence(cli("score", tmp_path / "hyp.txt", "--ref", tmp_path), 1, f"{tmp_path} is a directory")


def test_no_output_line_holds_a_line_break_or_a_tab(cli_model, tmp_path, monkeypatch):
    """A byte-fallback piece can decode to a newline, CR or tab: each becomes a space at write time."""
    from mtkit.cli import app
    from mtkit.decode.translator import Translation, Translator

    def translate_stream(self, lines, config, batch_tokens, chunk_lines, **options):
        for number, _ in enumerate(lines, 1):
            yield Translation(number, [("a\nb\rc\td\u2028e", -1.0), ("f\ng", -2.0)])

    monkeypatch.setattr(Translator, "translate_stream", translate_stream)
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("one\ntwo\n")
    for extra, expected in [
        ((), "a b c d e\n" * 2),
        (
            ("--nbest", "2", "--beam", "2"),
            "1\ta b c d e\t-1.0000\n1\tf g\t-2.0000\n2\ta b c d e\t-1.0000\n2\tf g\t-2.0000\n",
        ),
    ]:
        done = CliRunner().invoke(
            app, ["translate", "-m", str(cli_model), "-i", str(source), "-o", str(out), "--device", "cpu", *extra]
        )
        assert done.exit_code == 0, done.output
        assert out.read_text() == expected


@pytest.mark.slow
def test_ctrl_c_while_translating_exits_130_without_a_traceback(cli_model):
    translate = subprocess.Popen(
        [sys.executable, "-m", "mtkit", "translate", "-m", str(cli_model), *FAST, "--buffer-size", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        translate.stdin.write(b"a man runs\n")
        translate.stdin.flush()
        assert translate.stdout.readline()  # running, and waiting for the next line
        translate.send_signal(signal.SIGINT)
        assert translate.wait(timeout=300) == 130
        assert b"Traceback" not in translate.stderr.read()
    finally:
        translate.kill()
        translate.wait()


def test_stdin_can_be_only_one_of_the_files(cli):
    one_sentence(cli("score", "-", "--ref", "-", input="eins\n"), 1, "only one file can be read from stdin (-).")
