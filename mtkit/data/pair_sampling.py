"""Which sentences of a multilingual directory an epoch trains on: language pairs mixed by temperature.

Pair k with n_k training sentences is drawn with probability p_k proportional to (n_k / N)^(1/T)
(Arivazhagan et al. 2019, "Massively Multilingual NMT in the Wild"; fairseq's
`--sampling-method temperature`). T = 1 samples by corpus size, a large T evenly; T = 5, the default,
is the value of that literature and of fairseq's multilingual examples: a small pair is seen several
times more often than its size alone would make it, a large one a little less, without the small
one being repeated so often that it is learned by heart.

An epoch keeps the real number of sentences, N: pair k gives round(N p_k) of them, its own sentences
drawn without replacement when it has enough, or all of them and then a draw of the rest again. The
draw is made once, by the seed, and then planned into batches as any corpus (mtkit/data/batching.py):
batches are packed by length across every pair, so each update mixes the pairs, and a resumed run
plans the same batches.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mtkit.data.batching import BatchPlan, plan_batches

DEFAULT_TEMPERATURE = 5.0


def temperature_shares(sizes: list[int], temperature: float) -> np.ndarray:
    """Each pair's probability, (n_k / N)^(1/T) normalised; a pair with no sentence gets 0."""
    n = np.asarray(sizes, dtype=np.float64)
    weights = np.where(n > 0, (n / max(n.sum(), 1.0)) ** (1.0 / temperature), 0.0)
    return weights / max(weights.sum(), 1e-300)


def sampled_indices(ranges: list[tuple[int, int]], temperature: float, seed: int) -> np.ndarray:
    """Sentence indices of one epoch: pair k's range [a, b) gives round(N p_k) of them, sorted."""
    sizes = [b - a for a, b in ranges]
    shares = temperature_shares(sizes, temperature)
    rng = np.random.default_rng((seed, 5))
    picked = []
    for (a, b), share in zip(ranges, shares):
        want, have = int(round(sum(sizes) * share)), b - a
        if not have or not want:
            continue
        whole, rest = divmod(want, have)  # all of it `whole` times, then `rest` more drawn without replacement
        picked += [np.arange(a, b, dtype=np.int64)] * whole
        picked.append(a + rng.choice(have, size=rest, replace=False).astype(np.int64))
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)


def pair_plan(
    src_sizes: np.ndarray,
    tgt_sizes: np.ndarray,
    ranges: list[tuple[int, int]],
    temperature: float,
    max_tokens: int,
    seed: int,
    max_positions: int | None = None,
    buckets: np.ndarray | None = None,
) -> BatchPlan:
    """The batch plan of the temperature-sampled sentences: `plan_batches` on them, indices mapped back."""
    chosen = sampled_indices(ranges, temperature, seed)
    plan = plan_batches(src_sizes[chosen], tgt_sizes[chosen], max_tokens, seed, max_positions, buckets)
    return dataclasses.replace(plan, batches=tuple(chosen[b] for b in plan.batches))


def pair_counts(plan: BatchPlan, ranges: list[tuple[int, int]]) -> list[int]:
    """How many sentences of each pair the plan holds (what the log says of the mix)."""
    every = np.concatenate(plan.batches) if plan.batches else np.zeros(0, dtype=np.int64)
    return [int(((every >= a) & (every < b)).sum()) for a, b in ranges]
