"""Markup kept intact: HTML taken apart into text to translate, and its tags put back around the words they belonged to.

The source is read as a browser reads it and written back escaped (mtkit/decode/htmltree.py). The
text is cut into units at block elements (p, div, li, br, ...): each unit is one line to translate,
its inline elements (a, b, em, span, img, ...) spans of its words; the text of script, style and
textarea is copied, never translated. `Unit.render(target, links)` writes the translation back with
each inline element around the target words aligned to its source words (`links[j]`: the source word
target word j is aligned to, from the model's cross-attention: mtkit/decode/alignment.py), so the
output holds the source's elements and attributes, well-formed.

`Markup(fragments)` is the algorithm, written once for every caller: its `texts` to translate, then
`pairs(found)` to align, then `render(found, links)`; `translate_fragments` runs it on a Translator,
the server (mtkit/serve/libretranslate.py) on its batcher.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from mtkit.config import DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, DecodeConfig
from mtkit.decode.batches import chunks
from mtkit.decode.htmltree import VOID, Element, check_reads_back, escape_text, parse

if TYPE_CHECKING:
    from mtkit.decode.translator import Translator

WORD = re.compile(r"\S+")


@dataclass(eq=False)
class Span:
    """An inline element of a unit: source words [first, last) (first == last: between words), its children."""

    element: Element
    first: int
    last: int
    children: list[Span] = field(default_factory=list)


@dataclass
class Unit:
    """One line to translate: its words, its inline elements as word spans, and the whitespace around it."""

    words: list[str]
    spans: list[Span]
    lead: str
    trail: str

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def tagged(self) -> bool:
        return bool(self.spans)

    def render(self, target: str, links: Sequence[int | None] | None = None) -> str:
        """The translation with the unit's elements around the target words aligned to their source words.

        `links[j]`: the source word target word j is aligned to (None: none); without links (or a
        unit with no elements) each source position maps to the target proportionally.
        """
        words = target.split()
        if not self.spans:
            return escape_text(self.lead + " ".join(words) + self.trail)
        known = links is not None and len(links) == len(words) and any(i is not None for i in links)
        links = list(links) if known and links is not None else proportional(self, len(words))
        placed = place(self.spans, links, len(self.words), 0, len(words))
        return escape_text(self.lead) + render_tree(words, placed) + escape_text(self.trail)


def proportional(unit: Unit, n: int) -> list[int | None]:
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
        a, b = max(a, edge, lo), min(b, hi)
        if b < a:  # squeezed out by an earlier sibling: an empty element where it would have started
            b = a = min(max(a, edge), hi)
        out.append((span, a, b))
        out += place(span.children, links, n_src, a, b)
        edge = max(edge, b)
    return out


def render_tree(words: list[str], placed: list[tuple[Span, int, int]]) -> str:
    """The words with each element around its target range, children inside, joined by single spaces."""
    where = {id(s): (a, b) for s, a, b in placed}
    inner = {id(c) for s, _, _ in placed for c in s.children}
    tops = [s for s, _, _ in placed if id(s) not in inner]

    def words_html(a: int, b: int) -> str:
        return " ".join(escape_text(w) for w in words[a:b])

    def node(spans: list[Span], a: int, b: int) -> str:
        parts, k = [], a
        for span in sorted(spans, key=lambda s: where[id(s)]):
            sa, sb = where[id(span)]
            if sa > k:
                parts.append(words_html(k, sa))
            k = max(k, sa)
            parts.append(span.element.start + node(span.children, sa, sb) + span.element.end)
            k = max(k, sb)
        if k < b:
            parts.append(words_html(k, b))
        return " ".join(p for p in parts if p)

    return node(tops, 0, len(words))


def word_range(words: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The words [first, last) that characters [start, end) touch; an empty range (between words) if none."""
    touched = [k for k, (a, b) in enumerate(words) if a < end and b > start]
    if touched:
        return touched[0], touched[-1] + 1
    before = sum(1 for _, b in words if b <= start)
    return before, before


def copied(element: Element) -> bool:
    """Written as it is, never translated: comments, void elements, raw text (script, style), a textarea's text."""
    return element.void or element.raw or element.name == "textarea"


class Document:
    """An HTML fragment (or whole document) cut into units to translate; `render(outputs)` puts it together."""

    def __init__(self, source: str) -> None:
        self.root = parse(source)
        self.units: list[Unit] = []
        self._pieces: list[str | int] = []  # markup as it is, or the index of a unit
        self._walk(self.root.children)

    def _walk(self, children: list[Element | str]) -> None:
        run: list[Element | str] = []
        for child in children:
            if isinstance(child, str) or child.inline:
                run.append(child)
                continue
            self._flush(run)
            run = []
            if copied(child):
                self._pieces.append(child.html())
            else:
                self._pieces.append(child.opening)
                self._walk(child.children)
                self._pieces.append(child.end)
        self._flush(run)

    def _flush(self, run: list[Element | str]) -> None:
        if not run:
            return
        text: list[str] = []  # the run's text, tags taken out: words glued across a tag stay one word
        marks: list[tuple[Element, int, int, int]] = []  # (element, depth, start, end) in characters

        def walk(items: list[Element | str], depth: int) -> None:
            for item in items:
                if isinstance(item, str):
                    text.append(item)
                    continue
                start = sum(map(len, text))
                walk(item.children, depth + 1)
                marks.append((item, depth, start, sum(map(len, text))))

        walk(run, 0)
        found = [(m.start(), m.end()) for m in WORD.finditer("".join(text))]
        if not found:  # nothing to translate: the markup as it was
            self._pieces.append("".join(escape_text(c) if isinstance(c, str) else c.html() for c in run))
            return
        full = "".join(text)
        words = [full[a:b] for a, b in found]
        spans = {id(e): Span(e, *word_range(found, start, end)) for e, _, start, end in marks}
        tops: list[Span] = []
        for e, depth, _, _ in sorted(marks, key=lambda m: m[1]):  # stable: siblings stay in source order
            if depth == 0:
                tops.append(spans[id(e)])
            spans[id(e)].children = [spans[id(c)] for c in e.children if isinstance(c, Element)]
        lead = full[: found[0][0]] if isinstance(run[0], str) else ""
        trail = full[found[-1][1] :] if isinstance(run[-1], str) else ""
        self._pieces.append(len(self.units))
        self.units.append(Unit(words, tops, lead, trail))

    def render(self, outputs: Sequence[str]) -> str:
        """The fragment with unit i replaced by outputs[i] (each from `Unit.render`), checked to read back in a
        browser as the tree it was written from (`check_reads_back`: refused in one sentence if not)."""
        return check_reads_back("".join(p if isinstance(p, str) else outputs[p] for p in self._pieces))


class Markup:
    """Fragments translated with their markup kept, in three steps any caller drives with its own model calls:
    translate `texts`, align `pairs(found)` (the units that hold tags), then `render(found, links)`."""

    def __init__(self, fragments: Iterable[str]) -> None:
        self.docs = [Document(f) for f in fragments]
        self.units = [u for d in self.docs for u in d.units]

    @property
    def texts(self) -> list[str]:
        """The units' texts, each one line to translate."""
        return [u.text for u in self.units]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        """(source words, translation words) of each unit that holds tags: what to align."""
        return [(u.words, t.split()) for u, t in zip(self.units, found) if u.tagged]

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> list[str]:
        """Each fragment with its units' translations (`found`, one a unit) and their tags placed by `links`
        (one a tagged unit, as `pairs` listed them; None: placed proportionally)."""
        aligned = iter(links or [])
        outputs = [u.render(t, next(aligned, None) if u.tagged else None) for u, t in zip(self.units, found)]
        rendered, start = [], 0
        for d in self.docs:
            rendered.append(d.render(outputs[start : start + len(d.units)]))
            start += len(d.units)
        return rendered


def translate_fragments(
    translator: Translator,
    lines: Iterable[str],
    config: DecodeConfig = DecodeConfig(),
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    target_lang: str = "",
) -> Iterator[str]:
    """Each line, an HTML fragment, translated with its markup kept (`mtkit translate --format html`), in order;
    into `target_lang` for a multilingual model."""
    config = dataclasses.replace(config, nbest=1)
    for _, chunk in chunks(lines, chunk_lines):
        markup = Markup(chunk)
        stream = translator.translate_stream(markup.texts, config, batch_tokens, target_lang=target_lang)
        found = [t.text for t in stream]
        pairs = markup.pairs(found)
        yield from markup.render(found, translator.align(pairs, target_lang) if pairs else [])


def start_tags(fragment: str) -> list[str]:
    """The start tags of a fragment as a browser reads them, sorted: what the output must hold as the input did."""
    found: list[str] = []
    todo: list[Element | str] = list(parse(fragment).children)
    while todo:
        item = todo.pop()
        if isinstance(item, Element):
            found.append(item.start)
            todo.extend(item.children)
    return sorted(found)


def well_formed(fragment: str) -> bool:
    """Every end tag closes the element opened last, and every element is closed (void ones need no end)."""
    stack: list[str] = []
    ok = True

    class Checker(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag not in VOID:
                stack.append(tag)

        def handle_endtag(self, tag: str) -> None:
            nonlocal ok
            if tag in VOID:  # <br/>, or a stray </br>: no element to close
                return
            if not stack or stack.pop() != tag:
                ok = False

    checker = Checker(convert_charrefs=True)
    checker.feed(fragment)
    checker.close()
    return ok and not stack


def strip_tags(fragment: str) -> str:
    """The text of a fragment, its words joined by single spaces."""
    return " ".join(Markup([fragment]).texts)
