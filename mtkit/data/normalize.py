"""Step 2 of cleaning (clean.py): Moses punctuation normalisation and non-printing characters, fast.

`PunctNormalizer` gives sacremoses' `MosesPunctNormalizer(lang).normalize` output (the tests
compare them on real text) many times faster (docs/benchmarks.md, "Figures behind the code's choices": this module);
`remove_non_printing` is Moses'
remove-non-printing-char.perl plus the Unicode line and paragraph separators.
"""

from __future__ import annotations

import re
from collections.abc import Callable

try:  # the regex parser of the standard library (sre_parse before 3.11); private, so only an optimisation
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
    from re._constants import LITERAL, MAX_REPEAT, MIN_REPEAT, SUBPATTERN  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    try:
        import sre_parse as _sre_parse  # type: ignore[no-redef]
        from sre_constants import LITERAL, MAX_REPEAT, MIN_REPEAT, SUBPATTERN  # type: ignore[no-redef]
    except ImportError:
        _sre_parse = None  # type: ignore[assignment]


def _required_chars(pattern: str) -> list[str]:
    """Characters that every match of `pattern` contains (literals outside any optional part).

    An empty list (apply the rule to every line) if the parser is not there or changed shape.
    """
    out: list[str] = []

    def walk(items) -> None:
        for op, av in items:
            if op is LITERAL:
                out.append(chr(av))
            elif op is SUBPATTERN:
                walk(av[-1])
            elif op in (MAX_REPEAT, MIN_REPEAT) and av[0] >= 1:
                walk(av[2])

    try:
        walk(_sre_parse.parse(pattern))
    except Exception:  # noqa: BLE001 - a private API: any surprise means "no shortcut"
        return []
    return out


class PunctNormalizer:
    """sacremoses' `MosesPunctNormalizer(lang).normalize`, the same rules in the same order, faster.

    sacremoses calls `re.sub(pattern_string, ...)` for each of its ~45 rules on every line.
    Here each pattern is compiled once, and a rule whose required character does not occur
    in the line is skipped: it could not have matched, so the result is the same.
    """

    def __init__(self, lang: str):
        from sacremoses import MosesPunctNormalizer

        self.lang = lang
        self.reference = MosesPunctNormalizer(lang=lang)
        self.rules: list[tuple[str, Callable[..., str], str]] = []
        for pattern, replacement in self.reference.substitutions:
            required = [c for c in _required_chars(pattern) if c != " "]
            # Test for the rarest required character: '"' rather than '.' in `(\.+)"(\s*[^<])`.
            rare = [c for c in required if c not in ".,:;'"]
            trigger = (rare or required or [""])[0]  # "": no required character, always apply
            if pattern == r" +" and replacement == " ":
                trigger = "  "  # one space for one space changes nothing
            self.rules.append((trigger, re.compile(pattern).sub, replacement))

    def normalize(self, text: str) -> str:
        for trigger, sub, replacement in self.rules:
            if trigger in text:  # "" is in every string
                text = sub(replacement, text)
        return text.strip()


_NON_PRINTING = None


def remove_non_printing(text: str) -> str:
    """Moses' remove-non-printing-char.perl (`s/\\p{C}/ /g`), plus U+2028/U+2029, then single spaces."""
    global _NON_PRINTING
    if text.isprintable():  # no \p{C}, no line/paragraph separator: the common case, in C
        return text
    if _NON_PRINTING is None:
        import regex

        _NON_PRINTING = regex.compile(r"[\p{C}\u2028\u2029]")
    text = _NON_PRINTING.sub(" ", text)
    if "  " in text:
        text = re.sub(" {2,}", " ", text)
    return text.strip()


_NORMALIZERS: dict[str, PunctNormalizer] = {}


def normalizer(lang: str) -> PunctNormalizer:
    if lang not in _NORMALIZERS:
        _NORMALIZERS[lang] = PunctNormalizer(lang)
    return _NORMALIZERS[lang]


def normalize(text: str, lang: str) -> str:
    """The text a training sentence becomes in raw/train.LANG (steps 2 of the module docstring)."""
    return remove_non_printing(normalizer(lang).normalize(text))
