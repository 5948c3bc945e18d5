"""bench/confidence.py's figures: Spearman's correlation, the flagging precision and the deciles, each checked on
numbers whose answer is known, and the table and the reliability diagram it writes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support.recipes import load_script

bench = load_script("bench/confidence.py")


def test_spearman_is_pearsons_of_the_ranks_with_ties_sharing_theirs() -> None:
    assert bench.spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 25.0, 100.0]) == pytest.approx(1.0)
    assert bench.spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert bench.ranks([5.0, 1.0, 5.0, 0.0]) == [2.5, 1.0, 2.5, 0.0]


def test_flagging_finds_the_worst_when_confidence_follows_chrf_and_a_tenth_by_chance_otherwise() -> None:
    chrf = [float(i) for i in range(100)]
    assert bench.flagged(chrf, chrf) == 1.0
    assert bench.flagged([-c for c in chrf], chrf) == 0.0
    rng = random.Random(1)
    shuffled = [rng.random() for _ in range(10_000)]
    assert bench.flagged(shuffled, [rng.random() for _ in range(10_000)]) == pytest.approx(0.1, abs=0.03)


def test_deciles_compare_the_mean_confidence_with_the_observed_share(tmp_path: Path) -> None:
    confidence = [i / 100 for i in range(100)]
    acceptable = [i >= 50 for i in range(100)]
    d = bench.deciles(confidence, acceptable)
    assert [x["sentences"] for x in d] == [10] * 10
    assert [x["observed"] for x in d] == [0.0] * 5 + [1.0] * 5 and d[0]["predicted"] == pytest.approx(0.045)
    rows = [
        {"name": "raw", "spearman": 0.5, "flagged": 0.3},
        {"name": "c", "spearman": 0.7, "flagged": 0.5, "deciles": d, "max_decile_gap": 0.5, "time_ratio": 1.01}
        | {"own_time": 0.012},
    ]
    table = bench.table(rows, 100, 1200).splitlines()
    assert len(table) == 4 and "| c | 0.700 | 50% | 0.500 | 1.010x | +1.2% |" in table
    rows[1]["dev"] = {"spearman_c": 0.7, "spearman_c_by_threshold": {"40": 0.71, "35": 0.7}}
    assert bench.table(rows, 100, 1200).splitlines()[-1] == "| c | 0.700 | 0.710 |"  # thresholds in their order
    pytest.importorskip("matplotlib")
    bench.plot(rows, 40.0, tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
