"""Normalisation and filtering of parallel training text, streamed and spread over processes.

What happens to each training pair (dev and test sets never come here):

1. Both sides are decoded as UTF-8. A pair with an invalid byte on either side is dropped
   and counted (`invalid_utf8`), and its first file:line positions go to prepare.json:
   web-crawled training data has such lines, and one bad line in 4.5M pairs is no reason
   to stop. (Dev and test sets are never filtered, so there a bad byte is an error naming
   the file and the line.)
2. Moses punctuation normalisation, `normalize-punctuation.perl -l LANG` as sacremoses'
   `MosesPunctNormalizer(lang)` implements it, then Moses' `remove-non-printing-char.perl`:
   every `\\p{C}` character (controls, format characters, unassigned code points; plus the
   Unicode line and paragraph separators, so that no line reader can split a line) becomes
   a space, and runs of spaces collapse. `PunctNormalizer` (normalize.py) applies sacremoses'
   own rule table with precompiled patterns and skips a rule when the one character every
   match of it must contain is absent: output identical to sacremoses' (the tests compare
   them), many times faster (docs/benchmarks.md: mtkit/data/normalize.py).
3. Filters, the first one that applies is counted: `empty` (a side is empty after step 2),
   `too_long` (a side has more than 250 words), `ratio` (one side has more than 1.5 times
   the words of the other), `too_long_chars` and `char_ratio` (the same tests counted in
   characters, Unicode code points spaces included: a unit that works for every script),
   and with `dedup`, `duplicate` (the same normalised pair seen before). The word limits are
   per corpus (corpora.py: a named corpus keeps its own rules, custom data has none unless
   asked); the character limits are off unless asked; 0 turns one off. Words are
   whitespace-separated tokens of the untokenised text. That is Moses'
   `clean-corpus-n.perl -ratio 1.5 ... 1 250` with its word counts, applied before
   tokenisation: fairseq's `prepare-wmt14en2de.sh` runs the same script after Moses
   tokenisation and BPE, so there the counts are subword tokens and a little more pairs
   pass the ratio test and fewer pass the length test than here.

The rules are mtkit/data/rules.py's, applied by the one runner (mtkit/data/runner.py): streamed in
chunks over worker processes, memory bounded; with `dedup`, 8 bytes per kept pair (a 64-bit hash,
mtkit/data/dedup.py), about 36 MB for 4.5M pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtkit.data.dedup import Duplicate
from mtkit.data.rules import CharRatio, Empty, Ratio, Rule, TooLong, TooLongChars
from mtkit.data.runner import NORMALIZE, STRIP, Stats, Text
from mtkit.errors import MtkitError
from mtkit.langid import base_language

RULES = ("invalid_utf8", "empty", "too_long", "ratio", "too_long_chars", "char_ratio", "duplicate")
# The option that turns each rule off, for the sentence that says which rule emptied a corpus.
RULE_OPTIONS = {
    "invalid_utf8": "none: re-encode the files as UTF-8 (iconv)",
    **{rule.name: rule.off for rule in (Empty, TooLong, Ratio, TooLongChars, CharRatio, Duplicate)},
}
# Written without spaces between words: whitespace word counts mean nothing there.
NO_SPACES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu", "dz"})


@dataclass(frozen=True)
class CleanConfig:
    max_words: int = 250  # 0: no limit
    max_ratio: float = 1.5  # 0: no limit
    dedup: bool = False
    normalize: bool = True
    max_chars: int = 0  # 0: no limit
    max_char_ratio: float = 0.0  # 0: no limit

    def active(self) -> tuple[str, ...]:
        """The rules this configuration applies, in RULES' order."""
        on = {"too_long": self.max_words, "ratio": self.max_ratio, "duplicate": self.dedup}
        on.update(too_long_chars=self.max_chars, char_ratio=self.max_char_ratio)
        return tuple(rule for rule in RULES if bool(on.get(rule, True)))

    def rules(self) -> list[Rule]:
        """The rules this configuration applies, in order (invalid_utf8 is the runner's own)."""
        made: list[Rule] = [Empty()]
        for limit, kind in (
            (self.max_words, TooLong),
            (self.max_ratio, Ratio),
            (self.max_chars, TooLongChars),
            (self.max_char_ratio, CharRatio),
        ):
            if limit:
                made.append(kind(limit))
        if self.dedup:
            made.append(Duplicate())
        return made

    def text(self, src: str, tgt: str) -> Text:
        """Training text normalised (or only stripped), as raw/train.LANG holds it."""
        return Text(src, tgt, NORMALIZE if self.normalize else STRIP)

    def check_script(self, src: str, tgt: str) -> None:
        """Refuse word-counting rules for a language written without spaces between words."""
        lang = next((code for code in (src, tgt) if base_language(code) in NO_SPACES), None)
        if lang is None:
            return
        for value, option, chars in (
            (self.max_words, "--max-words", "--max-chars"),
            (self.max_ratio, "--max-ratio", "--max-char-ratio"),
        ):
            if value:
                raise MtkitError(
                    f"{option} counts whitespace-separated words, which '{lang}' text does not have; "
                    f"give {option} 0 and use {chars} (characters) instead."
                )

    def describe(self, src: str, tgt: str) -> dict:
        return {
            "applied_to": "train only (valid and test are written as published)",
            "normalizer": f"sacremoses MosesPunctNormalizer(lang='{src}' / '{tgt}') = Moses normalize-punctuation.perl"
            if self.normalize
            else "none",
            "non_printing": "\\p{C} and U+2028/U+2029 -> space, runs of spaces collapsed "
            "(Moses remove-non-printing-char.perl)"
            if self.normalize
            else "none",
            "invalid_utf8": "pair dropped and counted; first positions listed",
            "empty": "a side empty after normalisation",
            "max_words": self.max_words or "off",
            "max_ratio": self.max_ratio or "off",
            "ratio_unit": "whitespace-separated words of the untokenised text, max(a/b, b/a) > max_ratio "
            "(clean-corpus-n.perl's test; fairseq applies it to BPE tokens after tokenisation)",
            "max_chars": self.max_chars or "off",
            "max_char_ratio": self.max_char_ratio or "off",
            "char_unit": "Unicode code points of the normalised text, spaces included",
            "rules": list(self.active()),
            "dedup": self.dedup,
        }


def record(stats: Stats) -> dict:
    """A part's or the train split's counts, as prepare.json holds them."""
    out = {"pairs_in": stats.pairs_in, "kept": stats.kept, "dropped": dict(stats.dropped)}
    if stats.invalid_utf8_at:
        out["invalid_utf8_at"] = list(stats.invalid_utf8_at)
    return out


def summary(dropped: dict[str, int], config: CleanConfig) -> str:
    """Every applied rule with its count, zeros included: 'invalid_utf8 0, empty 2, ratio 5'."""
    return ", ".join(f"{rule} {dropped.get(rule, 0)}" for rule in config.active())
