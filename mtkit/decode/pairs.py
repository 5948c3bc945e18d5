"""Input lines that carry a second column: SOURCE<TAB>PREFIX (a forced target prefix) or SOURCE<TAB>TARGET (scoring),
the score of such a pair (PairScore, here without torch: CTranslate2's path scores pairs too), and the dual
conditional cross-entropy of pairs under two models that score them (`dual_cross_entropy`).

The second column comes either after the line's first TAB or, line by line, from a second file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from mtkit.errors import MtkitError


@dataclass(frozen=True)
class PairScore:
    """One input pair's score (lines numbered from 1): log P(target + EOS | source) and |Y| (EOS counted)."""

    line: int
    logprob: float
    length: int

    @property
    def average(self) -> float:
        """log P per target token: comparable across lengths, as corpus filtering wants."""
        return self.logprob / self.length


def tab_pairs(lines: Iterable[str], required: str | None = None) -> Iterator[tuple[str, str]]:
    """(before the first TAB, after it) for each line; a line without TAB is (line, "") unless a TAB is
    `required` (then it names the option that needs it in the one-sentence error)."""
    for number, line in enumerate(lines, 1):
        source, tab, second = line.partition("\t")
        if not tab and required:
            raise MtkitError(
                f"input line {number} has no TAB: {required} reads SOURCE<TAB>TARGET lines "
                "(or give the targets in a file of their own with --target-file)."
            )
        yield source, second


def zip_lines(first: Iterable[str], second: Iterable[str], names: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """The lines of two aligned inputs, paired; unequal line counts are an error once the shorter one ends."""
    missing = object()
    for number, (a, b) in enumerate(itertools.zip_longest(first, second, fillvalue=missing), 1):
        if a is missing or b is missing:
            short = names[0] if a is missing else names[1]
            raise MtkitError(
                f"{names[0]} and {names[1]} have different numbers of lines ({short} ends before line {number})."
            )
        yield a, b  # type: ignore[misc]


class Scorer(Protocol):
    """What scores pairs: a Translator (mtkit/decode/translator.py), whatever model it runs."""

    def score(
        self, pairs: Iterable[tuple[str, str]], batch_tokens: int = ..., target_lang: str = "", cut: bool = False
    ) -> list[PairScore]: ...


def dual_cross_entropy(forward: Scorer, backward: Scorer) -> Callable[[Sequence[str], Sequence[str]], list[float]]:
    """The dual conditional cross-entropy of each (source, target) pair, for `mtkit clean --dual-xent`
    (Junczys-Dowmunt 2018, "Dual Conditional Cross-Entropy Filtering of Noisy Parallel Corpora", WMT).

    Two models trained on clean data, one for each direction (any model a Translator runs: an mtkit file, an
    OPUS-MT directory or Hub name, an ensemble, int8), score the pair by forced decoding: H_f is the forward
    model's cross-entropy of the target given the source, H_b the backward model's of the source given the
    target, each in nats per token (the end-of-sentence token included). The pair's score is

        |H_f - H_b| + (H_f + H_b) / 2

    low when both models find the pair likely and agree on it: a misaligned pair of two well-formed sentences in
    the right languages, which no rule sees, is unlikely to both. A side longer than a model's positions is cut to
    them, as a source is."""

    def scores(src: Sequence[str], tgt: Sequence[str]) -> list[float]:
        h_f = [-s.average for s in forward.score(zip(src, tgt), cut=True)]
        h_b = [-s.average for s in backward.score(zip(tgt, src), cut=True)]
        return [abs(f - b) + 0.5 * (f + b) for f, b in zip(h_f, h_b)]

    return scores
