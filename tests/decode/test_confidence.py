"""A confidence for each translation (mtkit/decode/confidence.py): the search unchanged, a probability per line, the
calibrator found beside the model, a reverse model's score read, and `mtkit calibrate` / `translate --confidence`
through the real command line."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
from pathlib import Path

import pytest

from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.decode.calibrator import BACKWARD, FORWARD, Calibrator, Head
from mtkit.decode.confidence import Confidence, features, sidecar
from mtkit.decode.loading import load_translator
from mtkit.errors import MtkitError
from tests.support.corpora import short_pairs

CONFIG = DecodeConfig(beam=2, max_len_b=4)
OPTIONS = ("--beam", "2", "--max-len-b", "4", "--device", "cpu", "--threads", "1")


def _constant(bias: float, backward: bool = False) -> Calibrator:
    """A calibrator that says sigmoid(bias) of every translation, whatever its features."""
    head = Head(["logprob"], [0.0], [1.0], [0.0], bias)
    return Calibrator(40.0, {FORWARD: head, **({BACKWARD: head} if backward else {})})


@pytest.fixture
def translator(model_file):
    return load_translator(model_file, device="cpu")


def test_a_confidence_changes_no_translation_and_is_a_probability(translator, multi30k_lines, caplog) -> None:
    lines = multi30k_lines["test_2016_flickr.en"][:8]
    lines.insert(3, "")
    plain = list(translator.translate_stream(lines, CONFIG, batch_tokens=64, chunk_lines=3))
    with caplog.at_level(logging.WARNING):
        rate = Confidence.load(translator)
        rated = list(translator.translate_stream(lines, CONFIG, batch_tokens=64, chunk_lines=3, confidence=rate))
    assert [t.hypotheses for t in rated] == [t.hypotheses for t in plain]
    assert all(t.confidence is None for t in plain)
    assert all(0.0 < t.confidence < 1.0 for i, t in enumerate(rated) if i != 3) and rated[3].confidence == 1.0
    assert len({t.confidence for t in rated}) > 2  # each sentence its own, not a constant
    said = [r.getMessage() for r in caplog.records if "no confidence calibrator" in r.getMessage()]
    assert len(said) == 1 and "using the default" in said[0]  # said when loaded, not once a chunk


def test_the_calibrator_beside_the_model_is_the_one_used(tmp_path, model_file, multi30k_lines, caplog) -> None:
    model = tmp_path / "model.pt"
    shutil.copy(model_file, model)
    _constant(3.0).save(sidecar(model))
    translator = load_translator(model, device="cpu")
    lines = multi30k_lines["test_2016_flickr.en"][:3]
    with caplog.at_level(logging.WARNING):
        rated = list(translator.translate_stream(lines, CONFIG, confidence=Confidence.load(translator)))
    assert [t.confidence for t in rated] == [pytest.approx(1 / (1 + math.exp(-3.0)))] * 3
    assert not [r for r in caplog.records if "calibrator" in r.getMessage()]
    given = Confidence.load(translator, calibrator=_save(tmp_path / "other.json", _constant(-3.0)))
    assert all(t.confidence < 0.05 for t in translator.translate_stream(lines, CONFIG, confidence=given))


def _save(path: Path, calibrator: Calibrator) -> Path:
    calibrator.save(path)
    return path


def test_a_reverse_model_scores_the_source_given_the_translation(tmp_path, translator, multi30k_lines) -> None:
    short = [line for line in multi30k_lines["test_2016_flickr.en"] if len(line.split()) <= 6][:4]
    lines = [*short, "", " ".join(["bicycle"] * 40)]  # an empty line; a source longer than the positions
    found = list(translator.translate_stream(lines, CONFIG))
    rows = features(translator, lines, found, CONFIG, reverse=translator)
    expected = translator.score([(t.text, s) for t, s in zip(found[:4], short)])
    assert [r["backward"] for r in rows[:4]] == [p.average for p in expected]  # type: ignore[index]
    assert rows[4] is None and rows[5] is not None and "backward" not in rows[5]  # too long: the forward head's
    assert all("backward" not in r for r in features(translator, short, found[:4], CONFIG))
    forward_only = _save(tmp_path / "f.json", _constant(0.0))
    with pytest.raises(MtkitError, match="fitted without a reverse model"):
        Confidence.load(translator, translator, forward_only)
    head = Head(["backward"], [0.0], [1.0], [1.0], 0.0)
    both = Calibrator(40.0, {FORWARD: Head(["logprob"], [0.0], [1.0], [0.0], 5.0), BACKWARD: head})
    rated = list(
        translator.translate_stream(
            lines, CONFIG, confidence=Confidence.load(translator, translator, _save(tmp_path / "b.json", both))
        )
    )
    assert [t.hypotheses for t in rated] == [t.hypotheses for t in found]
    assert [t.confidence for t in rated[:4]] == [pytest.approx(1 / (1 + math.exp(-p.average))) for p in expected]
    assert rated[5].confidence == pytest.approx(1 / (1 + math.exp(-5.0)))


def test_a_sample_gets_no_confidence(translator) -> None:
    rate = Confidence.load(translator)
    with pytest.raises(MtkitError, match="without sampling"):
        list(translator.translate_stream(["A dog."], CONFIG, sampling=SamplingConfig(), confidence=rate))


def _toy_data(root: Path) -> Path:
    """A data directory of the toy task's held-out pairs as `mtkit prepare` lays one out (raw/valid, prepare.json)."""
    pairs = short_pairs(160, seed=11)
    (root / "raw").mkdir(parents=True)
    (root / "raw" / "valid.en").write_text("".join(s + "\n" for s, _ in pairs))
    (root / "raw" / "valid.de").write_text("".join(t + "\n" for _, t in pairs))
    (root / "prepare.json").write_text(json.dumps({"src_lang": "en", "tgt_lang": "de"}))
    return root


@pytest.mark.slow
def test_calibrate_then_translate_with_a_confidence(cli, tmp_path, trained_model) -> None:
    model = tmp_path / "model" / "model.pt"
    model.parent.mkdir()
    shutil.copy(trained_model, model)
    data = _toy_data(tmp_path / "data")
    done = cli("calibrate", data, "-m", model, "--reverse-model", model, "--threshold", "50", *OPTIONS)
    assert done.returncode == 0, done.stderr
    assert "acceptable (chrF >= 50)" in done.stderr and "forward 0." in done.stderr and "backward 0." in done.stderr
    calibrator = Calibrator.load(sidecar(model))
    dev = calibrator.fitted_on["dev"]
    assert set(dev["spearman_backward_by_threshold"]) <= {"30", "35", "40", "45", "50", "55", "60"}
    assert dev["spearman_forward_by_threshold"]["50"] == pytest.approx(dev["spearman_forward"])
    assert set(calibrator.heads) == {FORWARD, BACKWARD} and calibrator.fitted_on["dev"]["sentences"] == len(
        short_pairs(160, seed=11)
    )
    held_out = [s for s, _ in short_pairs(40, seed=12)]
    sources = "".join(s + "\n" for s in held_out)
    done = cli("translate", "-m", model, "--confidence", "--scores", *OPTIONS, input=sources)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # the calibrator found: nothing to say
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert len(rows) == len(held_out) > 10 and all(len(r) == 3 and 0 <= float(r[2]) <= 1 for r in rows)
    plain = cli("translate", "-m", model, *OPTIONS, input=sources).stdout.splitlines()
    assert [r[0] for r in rows] == plain
    both = cli("translate", "-m", model, "--confidence", "--reverse-model", model, *OPTIONS, input=sources)
    assert both.returncode == 0 and [line.split("\t")[0] for line in both.stdout.splitlines()] == plain
    assert [line.split("\t")[1] for line in both.stdout.splitlines()] != [r[2] for r in rows]


@pytest.mark.slow
def test_confidence_options_that_cannot_work_are_one_line(cli, model_file, tmp_path) -> None:
    forward_only = _save(tmp_path / "f.json", _constant(0.0))
    for args, message in [
        (("--reverse-model", model_file), "--reverse-model applies only with --confidence"),
        (("--calibrator", forward_only), "--calibrator applies only with --confidence"),
        (("--confidence", "--nbest", "2"), "drop --nbest"),
        (("--confidence", "--calibrator", forward_only, "--reverse-model", model_file), "without a reverse model"),
        (("--confidence", "--calibrator", tmp_path / "none.json"), "cannot read the confidence calibrator"),
    ]:
        done = cli("translate", "-m", model_file, *OPTIONS, *args, input="A dog.\n")
        assert done.returncode == 1 and done.stdout == "", args
        assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    done = cli("translate", "-m", model_file, "--confidence", "--sampling", "--threads", "1", input="A dog.\n")
    assert done.returncode == 1 and "drop --sampling" in done.stderr and len(done.stderr.splitlines()) == 1
    done = cli("calibrate", tmp_path, "-m", model_file, "-m", model_file, *OPTIONS)
    assert done.returncode == 1 and "name it with --output" in done.stderr and len(done.stderr.splitlines()) == 1
    done = cli("calibrate", tmp_path, "-m", model_file, *OPTIONS)
    assert done.returncode == 1 and "no prepare.json" in done.stderr and len(done.stderr.splitlines()) == 1
    done = cli("calibrate", _toy_data(tmp_path / "data"), "-m", model_file, "--threshold", "100", *OPTIONS)
    assert done.returncode == 1 and "0 of the" in done.stderr and "at least 5 of each kind" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_line_split_into_sentences_gets_the_mean_of_its_sentences(translator) -> None:
    """Each sentence is rated as the calibrator was fitted (one sentence a line); the line, by the share of its
    sentences expected to be acceptable."""
    rate = Confidence.load(translator)
    one = [t.confidence for t in translator.translate_stream(["A dog runs.", "Two men talk."], CONFIG, confidence=rate)]
    split = dataclasses.replace(CONFIG, split=True)
    [both] = translator.translate_stream(["A dog runs. Two men talk."], split, confidence=rate)
    assert one[0] != one[1] and both.confidence == pytest.approx((one[0] + one[1]) / 2)
