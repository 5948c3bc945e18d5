"""What the benches make of repeated rounds on a shared machine: the paired ratio of two systems, and the
percentiles of many timed requests.

from rounds import keep_best, latency, paired_ratio   # bench/ is a script's sys.path[0]

Two systems measured back to back in one round see nearly the same machine, so the median over
rounds of their within-round ratio is steadier than best round over best round: on a shared 2-core VM
whose speed drifts by 15-20% from one minute to the next, two identical variants came out 0.95x by their
best rounds and 1.02x paired (bench/decode_ab.py). One function, so that both decoding benches compute it
the same way.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) over rounds of numerators[i] / denominators[i], round by round."""
    if not numerators or len(numerators) != len(denominators):
        raise ValueError("a paired ratio needs the same number (at least one) of rounds on both sides")
    ratios = [a / b for a, b in zip(numerators, denominators)]
    return statistics.median(ratios), min(ratios), max(ratios)


def latency(ms: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and the mean of per-request times (inclusive percentiles, as every latency bench gives them)."""
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"p50": q[49], "p90": q[89], "p99": q[98], "mean": statistics.fmean(ms)}


def keep_best(best: dict[str, Any] | None, row: dict[str, Any]) -> dict[str, Any]:
    """The faster of two rounds' rows, with every round's sentences/s and the highest peak RSS (and PSS) of them all.

    Best speed: a shared machine only ever slows a round down. Highest memory: the peak is what a user must
    provision for, and it varies between identical runs.
    """
    if best is None:
        return {**row, "rounds_sentences_per_s": [row["sentences_per_s"]]}
    rounds = [*best["rounds_sentences_per_s"], row["sentences_per_s"]]
    faster = row if row["sentences_per_s"] > best["sentences_per_s"] else best
    kept = {**faster, "rounds_sentences_per_s": rounds, "peak_rss_mib": max(best["peak_rss_mib"], row["peak_rss_mib"])}
    if "peak_pss_mib" in row:
        kept["peak_pss_mib"] = max(best.get("peak_pss_mib", 0.0), row["peak_pss_mib"])
    return kept
