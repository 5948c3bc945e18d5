"""A lexical shortlist learnt from a data directory's binarized training pairs: p(target piece | source piece).

IBM Model 1 (Brown et al. 1993), the lexical model fast_align and Bergamot's `extract_lex` start from, trained by
a few rounds of EM on the pieces of each pair (a NULL source piece, PAD's id, takes what aligns to nothing). Then
each source piece keeps its K target pieces of highest p(t | s), and the N most frequent target pieces are kept
for every batch (mtkit/decode/shortlist.py).

Written here in numpy rather than taken from eflomal or fast_align: the shortlist needs only IBM1's lexical
table, not alignments of each sentence (eflomal's output; its priors and HMM add nothing to it), it is learnt on
the ids the model uses (no text round trip), and it adds no compiled dependency. Every co-occurrence of a
sampled pair is one entry of flat arrays, so EM is a few `bincount`s: the Multi30k training set (29k pairs,
about 9 M co-occurrences) takes seconds and under 1 GB; `sample` bounds both for larger corpora.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from mtkit.config import EOS, PAD
from mtkit.data.binarize import IndexedDataset
from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)

NULL = PAD  # the source piece every target piece may align to: PAD never appears in a pair


@dataclass(frozen=True)
class Learned:
    candidates: np.ndarray  # (source vocabulary, k) int32, best first, -1 where a piece has fewer
    frequent: np.ndarray  # (n,) int32, the most frequent target pieces, most frequent first
    pairs: int  # sentence pairs learnt from
    cooccurrences: int


def _occurrences(src: IndexedDataset, tgt: IndexedDataset, chosen: np.ndarray) -> tuple[np.ndarray, ...]:
    """(source piece, target piece, target position) of every co-occurrence in the chosen pairs, NULL included."""
    s_parts, t_parts, g_parts = [], [], []
    position = 0
    for i in chosen.tolist():
        s = np.concatenate([[NULL], src[i]])
        t = tgt[i]
        if t.size == 0:
            continue
        s_parts.append(np.tile(s, t.size))
        t_parts.append(np.repeat(t, s.size))
        g_parts.append(np.repeat(np.arange(position, position + t.size), s.size))
        position += t.size
    if not s_parts:
        raise MtkitError("the training pairs hold no target pieces to learn a shortlist from.")
    return np.concatenate(s_parts), np.concatenate(t_parts), np.concatenate(g_parts), position


def learn(
    src: IndexedDataset,
    tgt: IndexedDataset,
    vocab_size: int,
    k: int = 50,
    frequent: int = 100,
    sample: int = 50_000,
    iterations: int = 5,
    seed: int = 1,
) -> Learned:
    """Each source piece's `k` likeliest target pieces by IBM Model 1 on at most `sample` pairs, and the
    `frequent` most frequent target pieces of all pairs."""
    if len(src) != len(tgt):
        raise MtkitError(f"the training arrays differ in length ({len(src)} and {len(tgt)} sentences).")
    if k < 1 or frequent < 0 or sample < 1 or iterations < 1:
        raise MtkitError("the shortlist needs k >= 1, frequent >= 0, sample >= 1 and iterations >= 1.")
    n = len(src)
    rng = np.random.default_rng(seed)
    chosen = np.arange(n) if n <= sample else np.sort(rng.choice(n, size=sample, replace=False))
    s, t, g, positions = _occurrences(src, tgt, chosen)
    keys = s.astype(np.int64) * vocab_size + t
    pair_keys, pair = np.unique(keys, return_inverse=True)  # one entry per distinct (s, t)
    del keys
    pair_src = (pair_keys // vocab_size).astype(np.int64)
    table = np.ones(pair_keys.size)  # t(t | s): uniform to start (the first round counts co-occurrences)
    for _ in range(iterations):
        p = table[pair]
        p /= np.bincount(g, weights=p, minlength=positions)[g]  # each target piece's alignment posterior
        counts = np.bincount(pair, weights=p, minlength=pair_keys.size)
        table = counts / np.bincount(pair_src, weights=counts, minlength=vocab_size)[pair_src]
    # Each source piece's best k: sorted by source, then by -t(t | s); the first k of each source's run.
    pair_tgt = (pair_keys % vocab_size).astype(np.int64)
    keep = (pair_tgt > EOS) & (pair_src != NULL)
    order = np.lexsort((-table[keep], pair_src[keep]))
    by_src, by_tgt = pair_src[keep][order], pair_tgt[keep][order]
    starts = np.searchsorted(by_src, by_src, side="left")
    rank = np.arange(by_src.size) - starts
    top = rank < k
    candidates = np.full((vocab_size, k), -1, dtype=np.int32)
    candidates[by_src[top], rank[top]] = by_tgt[top]
    counts_t = np.bincount(np.asarray(tgt.ids, dtype=np.int64), minlength=vocab_size)[:vocab_size]
    counts_t[: EOS + 1] = 0
    most = np.argsort(-counts_t, kind="stable")[:frequent]
    most = most[counts_t[most] > 0].astype(np.int32)
    logger.info(
        "shortlist: IBM Model 1, %d rounds on %d of %d pairs (%d co-occurrences); %d candidates a source piece "
        "and the %d most frequent target pieces",
        iterations,
        chosen.size,
        n,
        s.size,
        k,
        most.size,
    )
    return Learned(candidates, most, int(chosen.size), int(s.size))
