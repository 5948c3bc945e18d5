"""`mtkit translate -i FILE -o OUT` of documents through the real command line: the format from the extension,
the same structure out, a damaged or binary file refused in one sentence with nothing written."""

from __future__ import annotations

import random

import pytest

from tests.support.documents import MAKERS, same_structure

EXTENSION = {"paragraphs": "txt", "html": "html", "markdown": "md", "srt": "srt", "vtt": "vtt", "po": "po",
             "xliff": "xlf", "docx": "docx"}  # fmt: skip


@pytest.mark.parametrize("format", ["paragraphs", "html", "markdown", "srt", "vtt", "po", "xliff", "docx"])
def test_a_file_comes_back_in_its_own_format_with_its_structure(cli, cli_model, tmp_path, format):
    source = tmp_path / f"in.{EXTENSION[format]}"
    source.write_bytes(MAKERS[format](random.Random(format)))
    out = tmp_path / f"out.{EXTENSION[format]}"
    done = cli("translate", "-m", cli_model, "-i", source, "-o", out, "--beam", "1", "--max-len-b", "4")
    assert done.returncode == 0, done.stderr
    assert not same_structure(source.read_bytes(), out.read_bytes(), format)


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("bad.srt", b"1\n00:00:01,000 --> 00:00:0x,000\nHello.\n", "SubRip cue 1 is damaged"),
        ("bad.vtt", b"NOT VTT\n\n00:00:01.000 --> 00:00:02.000\nHello.\n", "not a well-formed WebVTT file"),
        ("bad.po", b'msgid "one"\nmsgstr ""\nnot po at all\n', "not a well-formed gettext catalogue"),
        ("bad.xlf", b"<xliff><file>", "not well-formed XML"),
        ("bomb.xlf", b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><xliff>&a;</xliff>', "has a DOCTYPE"),
        ("bad.docx", b"PK\x03\x04 not really a zip", "not a readable .docx document"),
        ("binary.txt", b"PK\x03\x04\x00\x00\x00binary", "the input is binary"),
        ("latin1.md", "caf\xe9 au lait\n".encode("latin-1"), "not UTF-8 text"),
    ],
)
def test_a_damaged_or_binary_file_is_one_sentence_and_nothing_written(cli, cli_model, tmp_path, name, data, said):
    source = tmp_path / name
    source.write_bytes(data)
    out = tmp_path / f"out{source.suffix}"
    done = cli("translate", "-m", cli_model, "-i", source, "-o", out, "--beam", "1")
    assert done.returncode == 1 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == [name]


def test_format_overrides_the_extension_and_plain_input_stays_lines(cli, cli_model, tmp_path):
    source = tmp_path / "subs.txt"
    source.write_bytes(MAKERS["srt"](random.Random(1)))
    as_srt = cli("translate", "-m", cli_model, "-i", source, "--format", "srt", "--beam", "1", "--max-len-b", "3")
    assert as_srt.returncode == 0 and not same_structure(source.read_bytes(), as_srt.stdout.encode(), "srt")
    lines = cli("translate", "-m", cli_model, "--beam", "1", "--max-len-b", "3", input="A man.\n\nA dog.\n")
    assert lines.returncode == 0 and len(lines.stdout.splitlines()) == 3  # stdin: one output line an input line
    refused = cli("translate", "-m", cli_model, "-i", source, "--format", "srt", "--nbest", "2", "--beam", "2")
    assert refused.returncode == 1 and "--format srt translates its text once" in refused.stderr
    word = tmp_path / "letter.docx"
    word.write_bytes(MAKERS["docx"](random.Random(2)))
    binary = cli("translate", "-m", cli_model, "--format", "text", "-i", word, "-o", tmp_path / "out.txt")
    assert binary.returncode == 1 and "is binary (it holds NUL bytes)" in binary.stderr, binary.stderr
    assert not (tmp_path / "out.txt").exists()
