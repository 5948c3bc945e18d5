"""Input lines that carry a second column: SOURCE<TAB>PREFIX (a forced target prefix) or SOURCE<TAB>TARGET (scoring),
and the score of such a pair (PairScore, here without torch: CTranslate2's path scores pairs too).

The second column comes either after the line's first TAB or, line by line, from a second file.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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
