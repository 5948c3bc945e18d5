"""`mtkit score`: agrees with the sacrebleu command line; the paper's tokenized BLEU checked by hand."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit import score
from mtkit.errors import MtkitError
from mtkit.textio import read_lines_strict


def damaged(lines: list[str], every: int) -> list[str]:
    """A stand-in system output: every `every`-th word of each line dropped."""
    return [" ".join(w for i, w in enumerate(line.split()) if (i + 1) % every) for line in lines]


@pytest.fixture(scope="module")
def files(tmp_path_factory, multi30k) -> dict[str, Path]:
    """Multi30k German as reference 1, its first lines shifted by one as reference 2, and two damaged systems."""
    tmp = tmp_path_factory.mktemp("score")
    with gzip.open(multi30k / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        ref = [line.rstrip("\n") for line in itertools.islice(f, 201)]
    texts = {"ref": ref[:200], "ref2": ref[1:201], "hyp": damaged(ref[:200], 4), "hyp2": damaged(ref[:200], 7)}
    paths = {}
    for name, lines in texts.items():
        paths[name] = tmp / f"{name}.txt"
        paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def sacrebleu_cli(*args) -> dict[str, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "sacrebleu", *map(str, args), "-m", "bleu", "chrf", "ter", "-w", "6", "-f", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {entry["name"]: entry for entry in json.loads(done.stdout)}


@pytest.mark.slow
@pytest.mark.parametrize("refs", [("ref",), ("ref", "ref2")], ids=["one-ref", "two-refs"])
def test_scores_agree_with_the_sacrebleu_command_line(cli, files, refs):
    expected = sacrebleu_cli(*(files[r] for r in refs), "-i", files["hyp"])
    done = cli("score", files["hyp"], *itertools.chain.from_iterable(("--ref", files[r]) for r in refs), "--json")
    assert done.returncode == 0, done.stderr
    got = {s["name"]: s for s in json.loads(done.stdout)["scores"]}
    assert set(got) == {"BLEU", "chrF2", "TER"}
    for name, entry in expected.items():
        assert got[name]["score"] == pytest.approx(entry["score"], abs=1e-6)
        assert got[name]["signature"] == entry["signature"]
    assert 0 < got["BLEU"]["score"] < 100


def test_paper_tokenization_is_moses_then_get_ende_bleu_compound_splitting():
    assert score.paper_tokenize(['Ein Mann fährt ein Mountain-Bike, "schnell".'], "de") == [
        'Ein Mann fährt ein Mountain ##AT##-##AT## Bike , " schnell " .'
    ]
    # The perl substitution does not overlap matches, so a one-letter part keeps its second hyphen.
    assert score.paper_tokenize(["Ein 3-D-Film - gut."], "de") == ["Ein 3 ##AT##-##AT## D-Film - gut ."]


def test_paper_bleu_by_hand():
    hyps = ["Ein Mann fährt Mountain-Bike.", "Die Mutter-Kind-Beziehung ist eng."]
    refs = ["Ein Mann fährt ein Mountain-Bike.", "Die Mutter-Kind-Beziehung ist eng."]
    # Tokens: "Ein Mann fährt Mountain ##AT##-##AT## Bike ." (7) against the reference's 8 (with "ein");
    # line 2 is 9 tokens, matching exactly. n-gram matches over both lines:
    #   1-grams 7+9 of 7+9, 2-grams 5+8 of 6+8, 3-grams 3+7 of 5+7, 4-grams 1+6 of 4+6;
    #   brevity penalty exp(1 - 17/16).
    precisions = [16 / 16, 13 / 14, 10 / 12, 7 / 10]
    by_hand = 100 * math.exp(1 - 17 / 16) * math.exp(sum(math.log(p) for p in precisions) / 4)
    assert by_hand == pytest.approx(80.5916, abs=1e-4)
    assert score.paper_bleu(hyps, [refs], "de").score == pytest.approx(by_hand, abs=1e-9)
    # Without the compound split the hyphenated word is one token: a different, lower figure.
    assert score.corpus_scores(hyps, [refs])[0].score < by_hand


@pytest.mark.slow
def test_paper_bleu_and_comparison_through_the_cli(cli, files, tmp_path):
    hyp, ref = tmp_path / "h.txt", tmp_path / "r.txt"
    hyp.write_text("Ein Mann fährt Mountain-Bike.\nDie Mutter-Kind-Beziehung ist eng.\n")
    ref.write_text("Ein Mann fährt ein Mountain-Bike.\nDie Mutter-Kind-Beziehung ist eng.\n")
    done = cli("score", hyp, "--ref", ref, "--paper-bleu")
    assert done.returncode == 0, done.stderr
    assert "BLEU = 80.59" in done.stdout and "tok:none|smooth:none" in done.stdout
    done = cli("score", files["hyp"], "--ref", files["ref"], "--compare", files["hyp2"], "--json")
    assert done.returncode == 0, done.stderr
    compared = {c["name"]: c for c in json.loads(done.stdout)["compare"]["metrics"]}
    assert compared["BLEU"]["system"] > compared["BLEU"]["baseline"]  # dropping fewer words is better
    assert compared["BLEU"]["p_value"] < 0.05
    assert compared["TER"]["system"] < compared["TER"]["baseline"]


def test_comparing_a_system_with_itself_finds_no_difference(files):
    hyps, refs = read_lines_strict(files["hyp"]), [read_lines_strict(files["ref"])]
    comparisons = score.paired_bootstrap(hyps, hyps, refs, samples=100)
    assert [c.name for c in comparisons] == ["BLEU", "chrF2", "TER"]
    for c in comparisons:  # (sacrebleu's p-value is 1/(n+1) here: multeval counts only strictly larger gaps)
        assert (c.system, c.system_mean, c.system_ci) == (c.baseline, c.baseline_mean, c.baseline_ci)


@pytest.mark.slow
def test_unequal_line_counts_and_missing_references_are_one_clear_line(cli, files, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("eins\nzwei\n")
    done = cli("score", short, "--ref", files["ref"])
    assert done.returncode == 1
    assert f"{short} has 2 lines but {files['ref']} has 200" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    done = cli("score", files["hyp"])
    assert done.returncode == 1 and "no references" in done.stderr


@pytest.mark.slow
def test_an_unreachable_test_set_is_one_clear_line(cli, files, tmp_path):
    done = cli(
        "score",
        files["hyp"],
        "--test-set",
        "wmt14",
        "--langpair",
        "en-de",
        env={
            "SACREBLEU": str(tmp_path / "empty-cache"),
            "http_proxy": "http://127.0.0.1:9",
            "https_proxy": "http://127.0.0.1:9",
        },
    )
    assert done.returncode == 1
    assert "could not get the wmt14 en-de references through sacrebleu" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


def test_unknown_test_sets_and_pairs_list_the_choices():
    with pytest.raises(MtkitError, match="no test set 'wmt99'"):
        score.sacrebleu_references("wmt99", "en-de")
    with pytest.raises(MtkitError, match="no language pair 'en-xx'; it has: .*de-en"):
        score.sacrebleu_references("wmt14", "en-xx")


def test_read_lines_accepts_gzip_and_refuses_bad_utf8(tmp_path):
    gz = tmp_path / "a.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("eins  \nzwei\n")
    assert read_lines_strict(gz) == ["eins", "zwei"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"gut\nschl\xe9cht\n")
    with pytest.raises(MtkitError, match="not valid UTF-8"):
        read_lines_strict(bad)


def test_the_command_is_evaluate_from_python(cli, files):
    """`mtkit score --json` prints `score.evaluate(...).record()`: Python callers get the same scores."""
    done = cli("score", files["hyp"], "--ref", files["ref"], "--paper-bleu", "--compare", files["hyp2"], "--json")
    assert done.returncode == 0, done.stderr
    found = score.evaluate(str(files["hyp"]), [str(files["ref"])], paper=True, compare=str(files["hyp2"]))
    assert json.loads(done.stdout) == json.loads(json.dumps(found.record()))
    with pytest.raises(MtkitError, match="no references"):
        score.evaluate(str(files["hyp"]))
