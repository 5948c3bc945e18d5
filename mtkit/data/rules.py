"""The cleaning rules of `prepare` and `mtkit clean`, peers behind one interface (OpusFilter's `score`/`accept`).

A `Rule` scores a batch of pairs (`score(sources, targets)`, one score a pair) and says which scores it keeps
(`keep(scores)`); its `name` is what the counts call it and `off` the option that turns it off. Its `kind` says
where the runner (mtkit/data/runner.py) may compute it:

- `PAIR`: score and keep depend on the pair alone (lengths, markup, the language): computed in the worker
  processes.
- `STREAM`: the score depends on the pair alone, the keep on the pairs kept before it (the duplicate rules,
  mtkit/data/dedup.py): scored in the workers, kept in order in the main process, which holds the state.
- `MODEL`: the score needs a model (dual cross-entropy): scored in the main process, on the pairs every earlier
  rule kept.

Whatever the kinds, a pair is counted under the first rule of `ORDER` that drops it, as if the rules ran one after
the other. A rule sees the pair's text: for `prepare` its normalised sides, for `mtkit clean` the lines as read
(without their line end); both sides are str, never bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import regex

from mtkit.langid import Identifier, base_language

PAIR, STREAM, MODEL = "pair", "stream", "model"
# Every rule in the one order they apply in (cheap before dear); a pipeline applies a subset in this order.
ORDER = (
    "invalid_utf8",
    "empty",
    "control",
    "markup",
    "copy",
    "too_long",
    "ratio",
    "too_long_chars",
    "char_ratio",
    "duplicate",
    "near_duplicate",
    "langid",
    "dual_xent",
)
CONTROL = regex.compile(r"[\p{Cc}\p{Co}\p{Cn}\uFFFD]")
MARKUP = regex.compile(
    r"<\s*/?\s*[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?\s*>|&(?:[A-Za-z][A-Za-z0-9]{1,7}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});"
)
NOT_LETTERS = regex.compile(r"[\p{P}\p{S}\p{Z}\p{N}\s]+")
# Scores of (sources, targets), one a pair: what a model-backed rule asks of its models.
Scorer = Callable[[list[str], list[str]], Sequence[float]]


class Rule:
    """One rule: `score` a batch of pairs, `keep` a batch of scores (True: the pair stays)."""

    name: ClassVar[str]
    off: ClassVar[str]  # the option that turns it off, for the sentence that says which rule emptied a corpus
    kind: ClassVar[str] = PAIR

    def score(self, sources: list[str], targets: list[str]) -> Sequence[Any]:
        raise NotImplementedError

    def keep(self, scores: Sequence[Any]) -> list[bool]:
        raise NotImplementedError

    def load(self) -> None:
        """Make ready what every worker needs (a model read from disk), before the workers are forked."""


class Empty(Rule):
    """A side that is blank (always on)."""

    name, off = "empty", "none: both sides need text"

    def score(self, sources: list[str], targets: list[str]) -> list[bool]:
        return [bool(s.strip()) and bool(t.strip()) for s, t in zip(sources, targets)]

    def keep(self, scores: Sequence[bool]) -> list[bool]:
        return list(scores)


class Matches(Rule):
    """A side holding a match of `pattern`."""

    pattern: ClassVar[Any]

    def score(self, sources: list[str], targets: list[str]) -> list[bool]:
        search = self.pattern.search
        return [bool(search(s) or search(t)) for s, t in zip(sources, targets)]

    def keep(self, scores: Sequence[bool]) -> list[bool]:
        return [not found for found in scores]


class Control(Matches):
    """A control character (Unicode Cc, tab included), a private-use or unassigned code point, or U+FFFD."""

    name, off, pattern = "control", "leave out --control", CONTROL


class Markup(Matches):
    """An HTML/XML tag (`<p>`, `</div>`, `<br/>`) or character entity (`&amp;`, `&#160;`)."""

    name, off, pattern = "markup", "leave out --markup", MARKUP


def letters(text: str) -> str:
    """The normal form of `copy` and `near_duplicate`: case-folded, without spaces, punctuation, symbols, digits."""
    return NOT_LETTERS.sub("", text.casefold())


class Copy(Rule):
    """The target is the source, up to case, spaces, punctuation, symbols and digits."""

    name, off = "copy", "leave out --copies"

    def score(self, sources: list[str], targets: list[str]) -> list[bool]:
        return [letters(s) == letters(t) for s, t in zip(sources, targets)]

    def keep(self, scores: Sequence[bool]) -> list[bool]:
        return [not same for same in scores]


def words(text: str) -> int:
    """len(text.split()), faster where the only whitespace is single ASCII spaces (most lines)."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text.count(" ") + 1 if text else 0
    return len(text.split())


class Lengths(Rule):
    """A side longer than `limit` (`count` of its text), or one side `limit` times longer than the other."""

    count: ClassVar[Callable[[str], int]]
    ratio: ClassVar[bool] = False

    def __init__(self, limit: float):
        self.limit = limit

    def score(self, sources: list[str], targets: list[str]) -> list[tuple[int, int]]:
        count = type(self).count
        return [(count(s), count(t)) for s, t in zip(sources, targets)]

    def keep(self, scores: Sequence[tuple[int, int]]) -> list[bool]:
        n = self.limit
        if self.ratio:
            return [not (a > n * b or b > n * a) for a, b in scores]
        return [a <= n and b <= n for a, b in scores]


class TooLong(Lengths):
    name, off, count = "too_long", "--max-words 0", words


class Ratio(Lengths):
    name, off, count, ratio = "ratio", "--max-ratio 0", words, True


class TooLongChars(Lengths):
    name, off, count = "too_long_chars", "--max-chars 0", len


class CharRatio(Lengths):
    name, off, count, ratio = "char_ratio", "--max-char-ratio 0", len, True


class LangId(Rule):
    """Either side not identified as its language (`mtkit.langid`)."""

    name, off = "langid", "leave out --langid"

    def __init__(self, src_lang: str, tgt_lang: str):
        self.langs = base_language(src_lang), base_language(tgt_lang)
        self.identifier = Identifier(needs="--langid")

    def load(self) -> None:
        self.identifier.load()

    def score(self, sources: list[str], targets: list[str]) -> list[tuple[str, str]]:
        guess = self.identifier.classify
        return [(guess(s), guess(t)) for s, t in zip(sources, targets)]

    def keep(self, scores: Sequence[tuple[str, str]]) -> list[bool]:
        return [langs == self.langs for langs in scores]


class DualXent(Rule):
    """The pair's dual conditional cross-entropy under two translation models, one each way, is above `limit`.

    The scorer is passed in (this layer has no models): anything that scores a batch of pairs."""

    name, off, kind = "dual_xent", "a higher --dual-xent-max, or no --dual-xent", MODEL

    def __init__(self, scorer: Scorer, limit: float):
        self.scorer, self.limit = scorer, limit

    def score(self, sources: list[str], targets: list[str]) -> Sequence[float]:
        return self.scorer(sources, targets) if sources else []

    def keep(self, scores: Sequence[float]) -> list[bool]:
        return [score <= self.limit for score in scores]
