"""The confidence calibrator (mtkit/decode/calibrator.py): a logistic regression that is calibrated on the data it
was fitted on, kept as JSON that is read back to the same numbers and refused whole when it is anything else."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from mtkit.config import DecodeConfig
from mtkit.decode.calibrator import BACKWARD, FORWARD, Calibrator, Head, fit_head, from_record
from mtkit.decode.confidence import DEFAULT, forward_features, sidecar, summary
from mtkit.decode.lengths import length_penalty
from mtkit.errors import MtkitError


def _synthetic(n: int = 2000, seed: int = 1) -> tuple[list[dict[str, float]], list[bool]]:
    """Rows whose "logprob" decides acceptability through a known logistic curve; "copied" is noise."""
    rng = random.Random(seed)
    rows, labels = [], []
    for _ in range(n):
        x = rng.gauss(-1.0, 0.5)
        rows.append({"logprob": x, "copied": rng.random()})
        labels.append(rng.random() < 1 / (1 + math.exp(-4 * (x + 1))))
    return rows, labels


def test_a_fitted_head_is_calibrated_on_its_data_and_learns_the_direction_of_a_feature() -> None:
    rows, labels = _synthetic()
    head = fit_head(["logprob", "copied"], rows, labels)
    p = [head.probability(r) for r in rows]
    assert sum(p) / len(p) == pytest.approx(sum(labels) / len(labels), abs=1e-3)  # the bias's likelihood equation
    assert head.weights[0] > 1.0 and abs(head.weights[1]) < 0.2  # the true slope is 4 x 0.5 = 2 in scale units
    order = sorted(range(len(p)), key=p.__getitem__)
    for d in range(10):  # within every tenth: its mean probability is the share that is acceptable
        part = order[d * len(p) // 10 : (d + 1) * len(p) // 10]
        assert sum(p[i] for i in part) / len(part) == pytest.approx(sum(labels[i] for i in part) / len(part), abs=0.1)


def test_one_class_only_cannot_be_fitted() -> None:
    rows, _ = _synthetic(50)
    with pytest.raises(MtkitError, match="acceptable and unacceptable"):
        fit_head(["logprob"], rows, [True] * 50)


def test_a_calibrator_reads_back_to_the_same_probabilities(tmp_path: Path) -> None:
    rows, labels = _synthetic(300)
    head = fit_head(["logprob", "copied"], rows, labels)
    calibrator = Calibrator(40.0, {FORWARD: head}, {"split": "valid"})
    calibrator.save(tmp_path / "c.json")
    back = Calibrator.load(tmp_path / "c.json")
    assert back == calibrator
    assert [back.head(False).probability(r) for r in rows] == [head.probability(r) for r in rows]
    with pytest.raises(MtkitError, match="fitted without a reverse model"):
        back.head(True)


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda r: r.update(format=2), "format"),
        (lambda r: r["heads"].pop(FORWARD), "no forward head"),
        (lambda r: r["heads"][FORWARD].update(weights=[float("nan"), 1.0]), "not a finite number"),
        (lambda r: r["heads"][FORWARD].update(weights=[1.0]), "different lengths"),
        (lambda r: r["heads"][FORWARD].update(features=["logprob", "bleu"]), "a feature mtkit does not compute"),
        (lambda r: r["heads"][FORWARD].update(scale=[0.0, 1.0]), "scale <= 0"),
        (lambda r: r.update(threshold="high"), "could not convert"),
    ],
)
def test_anything_but_a_calibrator_is_refused_in_one_sentence(tmp_path: Path, change, why: str) -> None:
    head = Head(["logprob", "copied"], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0], 0.0)
    Calibrator(40.0, {FORWARD: head}).save(tmp_path / "c.json")
    record = json.loads((tmp_path / "c.json").read_text())
    change(record)
    (tmp_path / "c.json").write_text(json.dumps(record))
    with pytest.raises(MtkitError, match=why) as caught:
        Calibrator.load(tmp_path / "c.json")
    assert "\n" not in str(caught.value)
    (tmp_path / "c.json").write_bytes(b"\x80 not json")
    with pytest.raises(MtkitError, match="cannot read the confidence calibrator"):
        Calibrator.load(tmp_path / "c.json")


def test_the_default_has_both_heads_over_features_mtkit_computes() -> None:
    assert set(DEFAULT.heads) == {FORWARD, BACKWARD}
    assert from_record(
        {"format": 1, "threshold": DEFAULT.threshold, "heads": {k: vars(h) for k, h in DEFAULT.heads.items()}}
    ) == Calibrator(DEFAULT.threshold, DEFAULT.heads)


def test_forward_features_follow_their_definitions() -> None:
    config = DecodeConfig(alpha=0.6)
    row = forward_features("A man rides a Vespa.", "Ein Mann fährt eine Vespa.", -3.0, 7, 9, 1, config)
    assert row["logprob"] == pytest.approx(-3.0 * length_penalty(10.0, 0.6, "gnmt") / 10)  # |Y| counts the EOS
    assert row["length_ratio"] == pytest.approx(math.log(10 / 8)) and row["length_ratio_sq"] == pytest.approx(
        math.log(10 / 8) ** 2
    )
    assert row["copied"] == pytest.approx(1 / 5)  # "Vespa." only
    assert row["unknown"] == pytest.approx(1 / 7) and row["source_length"] == pytest.approx(math.log(8))
    assert forward_features("x", "", -1.0, 1, 0, 0, DecodeConfig(lenpen="none"))["logprob"] == -1.0


def test_a_documents_summary_counts_what_to_check_lowest_first() -> None:
    s = summary([0.9, 0.4, 0.7, 0.2])
    assert s == {"segments": 4, "expected_acceptable": pytest.approx(0.55), "lowest": 0.2, "to_check": [4, 2]}
    assert summary([])["segments"] == 0 and summary([0.6], flag_below=0.7)["to_check"] == [1]


def test_the_calibrator_lives_beside_the_model(tmp_path: Path) -> None:
    assert sidecar(tmp_path / "averaged.pt") == tmp_path / "averaged.confidence.json"
    assert sidecar(tmp_path) == tmp_path / "confidence.json"  # a model directory (Marian, CTranslate2) holds it
