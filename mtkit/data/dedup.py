"""The duplicate rules: a pair seen before, byte for byte (`duplicate`) or up to case, spaces, punctuation,
symbols and digits (`near_duplicate`, the normal form `copy` compares); the first occurrence is kept.

Memory stays bounded: the seen pairs are 64-bit hashes (8 bytes a kept pair a rule) in sorted numpy runs merged
like a binary counter (`HashSet`), 80 MB a rule for 10 million pairs. Two different pairs with one hash
(probability about n^2 / 2^65: 4e-5 for 36M pairs) count as one. A run that resumes reloads the hashes its
interrupted part added (`added`, `restore`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from mtkit.data.rules import STREAM, Rule, letters


def pair_hash(source: str, target: str) -> int:
    """The pair's 64-bit hash: blake2b of 'source<TAB>target'."""
    return int.from_bytes(hashlib.blake2b(f"{source}\t{target}".encode(), digest_size=8).digest(), "little")


class HashSet:
    """The 64-bit hashes seen so far, in sorted runs whose sizes halve from the first: a lookup is a binary
    search per run (log2(n) runs at most), an insert merges runs like a binary counter's carries, and memory
    is 8 bytes a hash."""

    def __init__(self, hashes: np.ndarray | None = None):
        self.runs: list[np.ndarray] = [np.unique(hashes)] if hashes is not None and len(hashes) else []

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """True where a hash was never seen before (nor earlier in `hashes`); those are added."""
        new = np.zeros(len(hashes), dtype=bool)
        new[np.unique(hashes, return_index=True)[1]] = True
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, hashes), len(run) - 1)
            new &= run[at] != hashes
        run = np.sort(hashes[new])
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate((self.runs.pop(), run)), kind="stable")
        if len(run):
            self.runs.append(run)
        return new


class Duplicate(Rule):
    """The same pair, as the rules see it, kept before."""

    name, off, kind = "duplicate", "leave out --dedup", STREAM
    form: ClassVar[bool] = False  # compare `letters` of each side

    def __init__(self) -> None:
        self.seen = HashSet()
        self.added = np.zeros(0, np.uint64)  # the hashes the last `keep` added, for a resumable run's log

    def score(self, sources: list[str], targets: list[str]) -> list[int]:
        if self.form:
            return [pair_hash(letters(s), letters(t)) for s, t in zip(sources, targets)]
        return [pair_hash(s, t) for s, t in zip(sources, targets)]

    def keep(self, scores: Sequence[int]) -> list[bool]:
        hashes = np.array(scores, dtype=np.uint64)
        new = self.seen.first_seen(hashes)
        self.added = hashes[new]
        return new.tolist()

    def restore(self, hashes: np.ndarray) -> None:
        """Start from the hashes an interrupted run had added."""
        self.seen = HashSet(hashes)


class NearDuplicate(Duplicate):
    name, off, form = "near_duplicate", "leave out --near-dedup", True
