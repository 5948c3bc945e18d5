"""Things in a text that are not language: format placeholders, URLs, e-mail addresses, custom emoji.

Each is taken out of the text before it is translated and put back, byte for byte, between the translation's
words aligned to its place (mtkit/decode/markup.py places it as it places a void tag such as `<img>`), so the
model never sees it and cannot change it. The set (`PATTERNS`, in the order tried) covers Python's `{name}`,
`{0:>8}`, `%s`, `%(city)s`, `%1$s`; Jinja's and Mustache's `{{count}}`; the shell's `${HOME}` and `$HOME`;
URLs; e-mail addresses; a Mastodon post's `:custom_emoji:`; inline tags (`<i>`, `</b>`, `<x id="1"/>`) and
subtitles' `{\\an8}` in formats that are not HTML. `add_pattern(regex)` extends it for a process.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mtkit.decode.htmltree import Element

PATTERNS: list[str] = [
    r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>",  # an inline tag in a format that is not HTML: <i>, </b>, <x id="1"/>
    r"\{\\[^{}\n]*\}",  # a subtitle's ASS override: {\an8}
    r"\{\{[^{}\n]{1,80}\}\}",  # {{count}}, {{ user.name }}
    r"\$\{[^{}\s]{1,80}\}",  # ${HOME}
    r"\{[\w.\[\]]{0,40}(?:![rsa])?(?::[^{}\s]{0,20})?\}",  # {name}, {0}, {}, {x.y[0]!r:>8}
    r"%(?:\([\w.]{1,40}\)|\d+\$)?[-+#0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[diouxXeEfFgGcrsa%]",  # %s %(city)s %1$s %.2f
    r"\$[A-Z_][A-Z0-9_]{1,40}\b",  # $HOME
    r"(?:https?|ftp)://[^\s<>\"']+[^\s<>\"'.,;:!?)\]}]",  # a URL, its final punctuation left out
    r"www\.[\w-]+(?:\.[\w-]+)+(?:/[^\s<>\"']*[^\s<>\"'.,;:!?)\]}])?",
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}",  # an e-mail address
    r"(?<![\w:]):[A-Za-z0-9_]{2,40}:(?![\w:])",  # :custom_emoji:
]
_compiled: re.Pattern[str] | None = None


def pattern() -> re.Pattern[str]:
    """PATTERNS as one expression (leftmost match; at one place the first pattern listed)."""
    global _compiled
    if _compiled is None:
        _compiled = re.compile("|".join(f"(?:{p})" for p in PATTERNS))
    return _compiled


def add_pattern(regex: str) -> None:
    """One more kind of placeholder, for this process (e.g. r"<ph id=\\d+/>" or r"\\[\\[\\w+\\]\\]")."""
    global _compiled
    re.compile(regex)  # a bad one is refused now, not at the next text
    PATTERNS.append(regex)
    _compiled = None


def protect(text: str, escape: Callable[[str], str] = lambda s: s) -> list[Element | str]:
    """`text` as text and placeholders, each placeholder a void inline element that writes itself as it was
    (through `escape`: HTML's escaping in HTML text)."""
    out: list[Element | str] = []
    at = 0
    for m in pattern().finditer(text):
        if m.start() > at:
            out.append(text[at : m.start()])
        out.append(Element("#placeholder", escape(m.group()), void=True, inline=True))
        at = m.end()
    if at < len(text) or not out:
        out.append(text[at:])
    return out


def placeholders(text: str) -> list[str]:
    """The placeholders of a text, in order: what a translation of it must hold, byte for byte."""
    return [m.group() for m in pattern().finditer(text)]
