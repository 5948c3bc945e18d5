"""`mtkit translate` through the real command line: text in, one line out for each line in, in order."""

from __future__ import annotations

import pytest

from mtkit.config import DecodeConfig
from mtkit.decode.loading import load_translator

OPTIONS = ("--beam", "2", "--max-len-b", "4", "--batch-tokens", "64", "--device", "cpu", "--threads", "1")


@pytest.mark.slow
def test_round_trip_with_empty_overlong_and_bad_utf8_lines(cli, model_file, multi30k_lines):
    lines = multi30k_lines["test_2016_flickr.en"][:6]
    lines.insert(2, "")
    lines.insert(4, " ".join(["bicycle"] * 60))  # more subword tokens than the model's 32 positions
    data = ("\n".join(lines) + "\n").encode() + b"caf\xe9 au lait\n"  # a Latin-1 byte: not UTF-8
    done = cli("translate", "-m", model_file, *OPTIONS, input=data)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode().split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines) + 1
    assert out[2] == ""
    stderr = done.stderr.decode()
    assert "line 5 has" in stderr and "input line 9 is not valid UTF-8" in stderr
    expected = load_translator(model_file, device="cpu").translate(lines + ["caf\ufffd au lait"], beam=2, max_len_b=4)
    assert out[:-1] == expected


@pytest.mark.slow
def test_files_scores_and_nbest(cli, model_file, tmp_path):
    src = tmp_path / "in.en"
    src.write_text("A dog runs.\n\nTwo men talk.\n")
    hyp = tmp_path / "out" / "hyp.de"
    done = cli("translate", "-m", model_file, "-i", src, "-o", hyp, "--scores", *OPTIONS)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    rows = [line.split("\t") for line in hyp.read_text().splitlines()]
    assert len(rows) == 3 and rows[1] == ["", "0.0000"] and all(float(r[1]) <= 0 for r in rows)
    done = cli("translate", "-m", model_file, "-i", src, "--nbest", "2", *OPTIONS)
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert [r[0] for r in rows] == ["1", "1", "2", "3", "3"]
    assert float(rows[0][2]) >= float(rows[1][2])
    translator = load_translator(model_file, device="cpu")
    [first] = translator.translate_stream(["A dog runs."], DecodeConfig(beam=2, nbest=2, max_len_b=4))
    assert [r[1] for r in rows[:2]] == [text for text, _ in first.hypotheses]


@pytest.mark.slow
def test_bad_model_and_options_are_one_clear_line(cli, tmp_path, model_file):
    for args, code, message in [
        (("-m", tmp_path / "nope.pt"), 1, "does not exist"),
        (("-m", model_file, "--lenpen", "wmt"), 2, "'--lenpen': 'wmt' is not one of 'gnmt', 'fairseq', 'none'"),
        (("-m", model_file, "--lenpen", "0.6"), 2, "did you mean --alpha 0.6 (with --lenpen fairseq for fairseq's"),
        (("-m", model_file, "--beam", "2", "--nbest", "3"), 1, "--nbest must be at most beam=2"),
        (("-m", model_file, "--beam", "0"), 1, "--beam must be a positive integer, got 0."),
    ]:
        done = cli("translate", *args, input="A dog.\n")
        assert done.returncode == code and done.stdout == ""
        assert message in done.stderr and "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.slow
def test_an_averaged_model_translates_like_its_only_checkpoint(cli, model_file, tmp_path):
    averaged = tmp_path / "averaged.pt"
    assert cli("average", model_file, "-o", averaged).returncode == 0
    text = "A dog runs.\nTwo men talk.\n"
    outputs = [cli("translate", "-m", m, *OPTIONS, input=text) for m in (model_file, averaged)]
    assert outputs[0].returncode == 0 and outputs[0].stdout == outputs[1].stdout


@pytest.mark.slow
def test_int8_and_the_early_stop_rules_through_the_cli(cli, model_file, tmp_path):
    src = tmp_path / "in.en"
    src.write_text("A dog runs.\nTwo men talk in the street.\n")
    outputs = {}
    for extra in (("--early-stop", "exact"), ("--early-stop", "none"), ("--precision", "int8")):
        done = cli("translate", "-m", model_file, "-i", src, *OPTIONS, *extra)
        assert done.returncode == 0, done.stderr
        outputs[extra] = done.stdout
        assert len(done.stdout.splitlines()) == 2
    assert outputs[("--early-stop", "exact")] == outputs[("--early-stop", "none")]
    done = cli("translate", "-m", model_file, "-i", src, "--early-stop", "sometimes", *OPTIONS)
    assert done.returncode != 0 and "Traceback" not in done.stderr
