"""`mtkit translate` with --sampling, several -m, --prefix / --prefix-file and --score-only, through the real CLI."""

from __future__ import annotations

import pytest

from mtkit.config import SamplingConfig
from mtkit.decode.loading import load_translator

OPTIONS = ("--max-len-b", "4", "--device", "cpu", "--threads", "1")
LINES = ["a dog runs in the park", "a man sits", "the cat plays with a red ball"]


@pytest.mark.slow
def test_samples_are_seeded_per_sentence_and_match_the_python_api(cli, cli_model):
    args = ("translate", "-m", cli_model, "--sampling", "--topk", "5", "--seed", "4", "--nbest", "2", *OPTIONS)
    many = cli(*args, input="\n".join(LINES) + "\n")
    assert many.returncode == 0, many.stderr
    rows = [line.split("\t") for line in many.stdout.splitlines()]
    assert [r[0] for r in rows] == ["1", "1", "2", "2", "3", "3"] and all(float(r[2]) < 0 for r in rows)
    alone = cli(*args, input=LINES[1] + "\n")  # line 2 alone: the same two samples
    assert [r[1:] for r in rows[2:4]] == [line.split("\t")[1:] for line in alone.stdout.splitlines()]
    translator = load_translator(cli_model, device="cpu")
    first_samples = translator.translate(LINES, max_len_b=4, sampling=SamplingConfig(topk=5, seed=4))
    assert first_samples == [r[1] for r in rows[::2]]


@pytest.mark.slow
def test_an_ensemble_prefixes_and_scores(cli, cli_model, tmp_path):
    text = "\n".join(f"{line}\ta man" for line in LINES) + "\n"
    prefixed = cli("translate", "-m", cli_model, "-m", cli_model, "--prefix", "--max-len-b", "8", input=text)
    assert prefixed.returncode == 0, prefixed.stderr
    assert all(line.startswith("a man") for line in prefixed.stdout.splitlines())
    prefixes = tmp_path / "prefixes"
    prefixes.write_text("a man\n" * 3)
    from_file = cli(
        "translate", "-m", cli_model, "--prefix-file", prefixes, "--max-len-b", "8", input="\n".join(LINES) + "\n"
    )
    assert from_file.stdout == prefixed.stdout  # an ensemble of a model with itself is the model
    pairs = "".join(f"{s}\t{t}\n" for s, t in zip(LINES, prefixed.stdout.splitlines()))
    scored = cli("translate", "-m", cli_model, "--score-only", input=pairs)
    assert scored.returncode == 0, scored.stderr
    rows = [line.split("\t") for line in scored.stdout.splitlines()]
    expected = load_translator(cli_model, device="cpu").score(list(zip(LINES, prefixed.stdout.splitlines())))
    assert [(float(r[0]), float(r[1]), int(r[2])) for r in rows] == [
        (pytest.approx(s.logprob, abs=1e-3), pytest.approx(s.average, abs=1e-3), s.length) for s in expected
    ]
    targets = tmp_path / "targets"
    targets.write_text(prefixed.stdout)
    two_files = cli(
        "translate", "-m", cli_model, "--score-only", "--target-file", targets, input="\n".join(LINES) + "\n"
    )
    assert two_files.stdout == scored.stdout


@pytest.mark.slow
def test_mistakes_are_one_sentence(cli, cli_model, tmp_path):
    short = tmp_path / "short"
    short.write_text("a man\n")
    for args, message in [
        (("--topk", "3"), "--topk applies only with --sampling."),
        (("--sampling", "--beam", "5"), "--beam does not apply with --sampling"),
        (("--sampling", "--topp", "1.5"), "--topp must be a number in (0, 1], got 1.5."),
        (("--score-only", "--sampling"), "--sampling does not apply with --score-only"),
        (("--score-only",), "input line 2 has no TAB: --score-only reads SOURCE<TAB>TARGET lines"),
        (("--prefix-file", short), "have different numbers of lines"),
        (("--target-file", short), "--target-file gives the targets of --score-only"),
        (("--prefix", "--max-len-b", "1"), "line 1: the target prefix has"),
    ]:
        done = cli("translate", "-m", cli_model, *map(str, args), input="a dog runs\ta man walks in the park\nb\n")
        assert done.returncode == 1 and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_help_shows_an_example_of_each(cli):
    text = " ".join(cli("translate", "--help", env={"COLUMNS": "200"}).stdout.split())
    for example in (
        "--sampling --topk 10 --nbest 3",
        "-m seed1/averaged.pt -m seed2/averaged.pt",
        "--prefix",
        "--score-only",
        "--temperature",
        "--prefix-file",
        "--target-file",
    ):
        assert example in text, example
