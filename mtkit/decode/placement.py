"""Where a unit's tags go in its translation: each span around the target words aligned to its source words
(`links[j]`: the source word target word j came from, mtkit/decode/alignment.py), proportionally without
alignment; siblings kept apart and children inside their parents, so the result is always well nested."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mtkit.decode.htmltree import Element, escape_text


@dataclass(eq=False)
class Span:
    """An inline element of a unit: source words [first, last) (first == last: between words), its children."""

    element: Element
    first: int
    last: int
    children: list[Span] = field(default_factory=list)
    at: int = -1  # with no text of its own: its place in the source's characters (-1: it has text)
    glue: tuple[str, str] = ("", "")  # with no text: the source words it touched on its left and right


def proportional(unit: Any, n: int) -> list[int | None]:
    """Target word j linked to the source word at the same relative position (when no alignment is known)."""
    m = len(unit.words)
    return [min(m - 1, j * m // n) if m else None for j in range(n)]


def target_range(span: Span, links: Sequence[int | None], n_src: int) -> tuple[int, int]:
    """The target words [a, b) of a span: from the first to the last word linked into it (a boundary if none)."""
    inside = [j for j, i in enumerate(links) if i is not None and span.first <= i < span.last]
    if inside:
        return min(inside), max(inside) + 1
    return boundary(span.first, links, n_src), boundary(span.first, links, n_src)


def boundary(k: int, links: Sequence[int | None], n_src: int) -> int:
    """Where source position k (before source word k) falls in the target: after the words linked before it."""
    if k <= 0:
        return 0
    if k >= n_src:
        return len(links)
    before = [j for j, i in enumerate(links) if i is not None and i < k]
    return max(before) + 1 if before else 0


def place(spans: list[Span], links: Sequence[int | None], n_src: int, lo: int, hi: int) -> list[tuple[Span, int, int]]:
    """Each span's target range inside [lo, hi), siblings in target order without overlap, children inside."""
    ranges = sorted(((s, *target_range(s, links, n_src)) for s in spans), key=lambda r: (r[1], r[2], spans.index(r[0])))
    out: list[tuple[Span, int, int]] = []
    edge = lo
    for span, a, b in ranges:
        before = edge
        a, b = max(a, edge, lo), min(b, hi)
        if b < a:  # squeezed out by an earlier sibling: an empty element where it would have started
            b = a = min(max(a, edge), hi)
        if a == b and span.last > span.first and "nonempty" in span.element.attrs:
            # a span that is no markup when empty (Markdown's emphasis): the next word, or the one before
            a, b = (a, a + 1) if a < hi else (a - 1, a) if a - 1 >= max(before, lo) else (a, b)
        out.append((span, a, b))
        out += place(span.children, links, n_src, a, b)
        edge = max(edge, b)
    return out


def render_tree(
    words: list[str], placed: list[tuple[Span, int, int]], escape: Callable[[str], str] = escape_text
) -> str:
    """The words with each element around its target range, children inside, joined by single spaces."""
    where = {id(s): (a, b) for s, a, b in placed}
    inner = {id(c) for s, _, _ in placed for c in s.children}
    tops = [s for s, _, _ in placed if id(s) not in inner]

    def words_html(a: int, b: int) -> str:
        return " ".join(escape(w) for w in words[a:b])

    def node(spans: list[Span], a: int, b: int) -> str:
        parts: list[tuple[str, Span | None]] = []
        k = a
        for span in sorted(spans, key=lambda s: where[id(s)]):
            sa, sb = where[id(span)]
            if sa > k:
                parts.append((words_html(k, sa), None))
            k = max(k, sa)
            parts.append((span.element.start + node(span.children, sa, sb) + span.element.end, span))
            k = max(k, sb)
        if k < b:
            parts.append((words_html(k, b), None))
        out = ""
        for (text, left), (after, right) in zip(parts, [*parts[1:], ("", None)]):
            out += text
            out += "" if glued(left, right, text, after) else " "
        return out.rstrip(" ") if parts else ""

    return node(tops, 0, len(words))


def glued(left: Span | None, right: Span | None, left_text: str, right_text: str) -> bool:
    """Whether nothing goes between two parts of a rendering (words, or a span): an element with no text of its
    own stays against punctuation it touched in the source (`{name},`, `({name})`), and two such at one place
    stay together; anything else is one space apart."""
    if left is not None and right is not None and left.at >= 0 and left.at == right.at:
        return True
    if (left is not None and left.element.attrs.get("stick") == "right") or (
        right is not None and right.element.attrs.get("stick") == "left"
    ):
        return True  # a mark that belongs to the word beside it (Markdown's emphasis)
    if left is not None and left.at >= 0 and left.glue[1] and right is None and right_text:
        after = right_text.split(" ")[0]
        if after[:1] in CLOSING or after == left.glue[1]:
            return True
    if right is not None and right.at >= 0 and right.glue[0] and left is None and left_text:
        before = left_text.split(" ")[-1]
        return before[-1:] in OPENING or before == right.glue[0]
    return False


CLOSING = frozenset(".,;:!?)]}\"'»”’…")  # what stays against the element before it
OPENING = frozenset("([{\"'«“‘¿¡")  # what stays against the element after it
