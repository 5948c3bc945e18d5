"""Multi30k-noisy's rules for the dual cross-entropy threshold (recipes/multi30k-noisy/rules.py): each rule's
threshold on small synthetic scores against a value computed by hand, the oracle's largest drop under the limit,
what a threshold removes of each kind, and the whole measurement end to end with a stand-in scorer (no training)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math

import pytest

from tests.support.recipes import load_script

rules = load_script("recipes/multi30k-noisy/rules.py")


def test_a_fixed_share_is_the_quantile_mtkit_clean_takes():
    # 1..10: the 0.9 quantile, linear, is 1 + 0.9 * 9 = 9.1; only the 10 lies above it
    assert rules.share_threshold([float(i) for i in range(10, 0, -1)], 0.1) == pytest.approx(9.1)
    assert rules.share_threshold([float(i) for i in range(1, 11)], 0.5) == pytest.approx(5.5)


def test_the_knee_is_the_point_farthest_below_the_chord():
    # sorted 1..8, 20, 40: x = i/9, y = (s - 1)/39; x - y is 7/9 - 7/39 = 0.598 at s = 8, 0.513 at 7, 0.402 at 20
    scores = [40.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 20.0]
    assert rules.knee_threshold(scores) == 8.0
    assert rules.knee_threshold([3.0, 3.0, 3.0]) == 3.0  # a flat curve: no knee, nothing above it


def test_the_held_out_thresholds_come_from_the_dev_scores():
    # 0..200: the 99.5th percentile is 0.995 * 200 = 199
    assert rules.percentile_threshold([float(i) for i in range(201)], 99.5) == pytest.approx(199.0)
    # median 3, absolute deviations 2 1 0 1 97: MAD 1, so 3 + 3 * 1.4826 * 1
    assert rules.mad_threshold([1.0, 2.0, 3.0, 4.0, 100.0], 3.0) == pytest.approx(7.4478)
    assert rules.mad_threshold([1.0, 2.0, 3.0, 4.0, 100.0], 1.0) == pytest.approx(4.4826)


def test_the_oracle_drops_the_most_it_can_with_the_clean_lost_under_the_limit():
    scores = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    clean = [False, False, True, False, True, True, True, True, True, True]
    # of 100 clean pairs: dropping 9, 8, 7, 6 loses one (1%); with 5 it would lose two (2%, not under 2%)
    assert rules.oracle_threshold(scores, clean, 0, 100, 0.02) == 5.0
    # the rules lost one already: dropping 7 makes two, so only 9 and 8 go
    assert rules.oracle_threshold(scores, clean, 1, 100, 0.02) == 7.0
    assert rules.oracle_threshold(scores, clean, 2, 100, 0.02) == math.inf  # the rules alone reach the limit
    assert rules.oracle_threshold(scores, [False] * 10, 0, 100, 0.02) == -math.inf  # no clean pair: drop them all


def test_a_threshold_removes_by_kind_on_top_of_the_rules():
    table = {"clean": {"pairs": 10, "kept": 9}, "misaligned": {"pairs": 4, "kept": 4}, "html": {"pairs": 2, "kept": 0}}
    kinds = ["clean"] * 9 + ["misaligned"] * 4
    scores = [1.0] * 8 + [6.0] + [2.0, 7.0, 8.0, 9.0]
    row = rules.evaluate(5.0, scores, kinds, table)
    assert row["dropped"] == 4 and row["share"] == pytest.approx(4 / 13)
    assert row["by_kind"]["misaligned"] == {
        "pairs": 4, "rule_kept": 4, "dual_dropped": 3, "removed": 3, "removed_share": 0.75
    }  # fmt: skip
    assert row["clean_lost"] == pytest.approx(0.2) and row["clean_lost_dual"] == pytest.approx(0.1)
    assert row["noise_removed"] == pytest.approx(5 / 6)  # 3 misaligned + the 2 html the rules removed, of 6


def test_the_best_label_free_rule_removes_most_noise_under_the_limit_and_never_is_the_oracle():
    rows = [
        {"name": "a", "kind": "label-free", "clean_lost": 0.01, "noise_removed": 0.80},
        {"name": "b", "kind": "label-free", "clean_lost": 0.03, "noise_removed": 0.95},
        {"name": "c", "kind": "label-free", "clean_lost": 0.015, "noise_removed": 0.85},
        {"name": "oracle", "kind": "oracle", "clean_lost": 0.019, "noise_removed": 0.9},
    ]
    assert rules.best_label_free(rows, 0.02) == "c"
    assert rules.best_label_free(rows, 0.005) == "a"  # none under it: the one that loses the fewest


def toy(tmp_path, monkeypatch) -> tuple[list[str], list[int]]:
    """A toy noisy set and dev set, a stand-in for the two models (which counts its calls), no language
    identification (a test loads no model): rules.py's arguments for them, and the stand-in's calls."""
    noise = load_script("recipes/multi30k-noisy/noise.py")
    from tests.support.corpora import fake_multi30k

    data = fake_multi30k(tmp_path / "data")
    for lang in ("en", "de"):  # dev: the first 50 clean captions
        lines = gzip.open(data / f"train.{lang}.gz", "rt", encoding="utf-8").read().splitlines()[:50]
        with gzip.open(data / f"val.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    noise.build(data, tmp_path / "noisy", seed=1)
    calls = []

    def scorer(forward, backward):
        def score(src, tgt):
            calls.append(len(src))
            return [abs(len(s.split()) - len(t.split())) + 0.01 * len(s) for s, t in zip(src, tgt)]

        return score

    monkeypatch.setattr(rules, "dual_scorer", scorer)
    everything = rules.cleaning  # but language identification, whose model a test does not load
    monkeypatch.setattr(rules, "cleaning", lambda ratio: dataclasses.replace(everything(ratio), langid=False))
    return ["--noisy", str(tmp_path / "noisy"), "--dual-xent", "f.pt", "b.pt", "--data", str(data)], calls


def test_the_measurement_scores_once_and_writes_a_record(tmp_path, monkeypatch):
    """End to end on a toy noisy set, with a stand-in for the two models: each rule is measured, the record renders,
    and the scorer is called twice (the rule-kept pairs, the dev pairs), never pair by pair."""
    argv, calls = toy(tmp_path, monkeypatch)
    record = tmp_path / "r.json"
    rules.main([*argv, "--record", str(record)])
    kept = json.loads(record.read_text(encoding="utf-8"))
    names = [r["name"] for r in kept["rows"]]
    assert names == ["rules-only", "share-0.02", "share-0.04", "share-0.05", "share-0.1", "knee", "dev-p99",
                     "dev-p99.5", "dev-mad", "oracle"]  # fmt: skip
    assert len(calls) == 2 and calls[1] == 50 and calls[0] == kept["results"]["rule_kept"]
    assert kept["results"]["best_label_free"] in names and kept["results"]["oracle"]["clean_lost"] < 0.02
    assert kept["results"]["models"] == [{"model": "f.pt"}, {"model": "b.pt"}]  # no such files: named only
    assert kept["rows"][0]["share"] == 0 and kept["settings"]["shares"] == [0.02, 0.04, 0.05, 0.1]
    text = rules.table(kept["rows"], kept["sentences"], kept["words"])
    assert "| **" in text and text.count("\n|") == len(names) + 1


def test_bleu_trains_on_what_the_best_rule_and_the_oracle_keep_and_scores_the_rules_only_model(tmp_path, monkeypatch):
    argv, _ = toy(tmp_path, monkeypatch)
    trained = []

    def train_on(threshold, args, out):
        trained.append((out.name, threshold))
        return {"pairs": 100, "dev_bleu": 30.0 + len(trained), "test_bleu": 29.0}

    monkeypatch.setattr(rules, "train_on", train_on)
    monkeypatch.setattr(rules, "bleu", lambda model, data, out: {"dev_bleu": 28.0, "test_bleu": 27.5})
    record = tmp_path / "r.json"
    rules.main([*argv, "--record", str(record), "--bleu-steps", "10", "--out", str(tmp_path / "runs")])
    kept = json.loads(record.read_text(encoding="utf-8"))
    best = kept["results"]["best_label_free"]
    assert sorted(name for name, _ in trained) == sorted([best, "oracle"])
    assert dict(trained)["oracle"] == kept["results"]["oracle"]["threshold"]
    assert kept["rows"][0]["test_bleu"] == 27.5 and kept["settings"]["bleu_steps"] == 10
    text = rules.table(kept["rows"], kept["sentences"], kept["words"])
    assert (
        "| 28.00 / 27.50 |" in text
        and text.count(" / 29.00 |") == 2
        and sum(line.endswith(" - |") for line in text.splitlines()) == len(kept["rows"]) - 3
    )
