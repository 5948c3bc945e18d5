"""Markdown: markdown-it-py (CommonMark, with tables and strikethrough) finds the text of each paragraph,
heading, list item, quote and table cell; only that text changes, in place, line for line: list markers,
quote marks, heading marks, table pipes, code blocks and fences, HTML blocks, link reference definitions
and a YAML front matter are copied as they are.

Inside the text, what is not language is kept byte for byte: inline code, images, link targets (`](url)`,
`][ref]`, around the link text's translation), autolinks, inline HTML, escapes, entities, emphasis marks,
placeholders; the translation's own characters that Markdown would read as markup (`*`, `_`, `|`, ...) are
escaped, so it cannot add a list, a table cell or emphasis."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mtkit.decode.htmltree import Element
from mtkit.decode.markup import Unit, alignment_pairs, unit_of
from mtkit.decode.placeholders import protect
from mtkit.documents.units import decode, spread

logger = logging.getLogger(__name__)

INLINE = re.compile(
    r"(?P<code>(`+).+?(?<!`)\2(?!`))"
    r"|(?P<image>!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\]))"
    r"|(?P<link>\[(?P<text>[^\]]*)\](?P<target>\([^)]*\)|\[[^\]]*\]))"
    r"|(?P<auto><[A-Za-z][\w+.-]*:[^<>\s]*>)"
    r"|(?P<html></?[A-Za-z][^<>]*>|<!--.*?-->)"
    r"|(?P<escape>\\[!-/:-@\[-`{-~])"
    r"|(?P<entity>&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z]\w*);)"
    r"|(?P<emphasis>(?<![\w*\\])\*{1,3}(?=\S)|(?<=\S)\*{1,3}(?![\w*])|(?<![\w_\\])_{1,3}(?=\S)|(?<=\S)_{1,3}(?![\w_])|~~)"
)
SPECIAL = re.compile(r"([\\`*\[\]<|]|(?<!\w)_|_(?!\w)|~(?=~))")
LINE_START = re.compile(r"^(\s*)([#>+-]|\d+[.)])(?=\s|$)")
FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


def escape(text: str) -> str:
    """A translation's text as Markdown text: the characters Markdown reads as markup escaped."""
    return SPECIAL.sub(r"\\\1", text)


def inline_run(content: str) -> list[Element | str]:
    """A text's inline Markdown as text and elements: link texts and emphasis spans, the rest of the markup
    void."""
    return paired(_inline(content))


def paired(run: list[Element | str]) -> list[Element | str]:
    """Each emphasis opener and the next closer of the same mark after it as one span of what lies between."""
    out: list[Element | str] = []
    for item in run:
        out.append(item)
        if isinstance(item, Element) and item.attrs.get("stick") == "left":  # a closer: find its opener
            for k in range(len(out) - 2, -1, -1):
                opener = out[k]
                if isinstance(opener, Element) and opener.attrs.get("stick") == "right" and opener.start == item.start:
                    inner = paired(out[k + 1 : -1])
                    del out[k:]
                    attrs = {"end": item.start, "nonempty": ""}
                    out.append(Element("#em", item.start, children=inner, inline=True, attrs=attrs))
                    break
    return out


def _inline(content: str) -> list[Element | str]:
    run: list[Element | str] = []
    at = 0
    for m in INLINE.finditer(content):
        if m.start() > at:
            run.extend(p for p in protect(content[at : m.start()], escape) if p != "")
        if m.group("link") is not None:
            children = inline_run(m.group("text"))
            attrs = {"end": "]" + m.group("target"), "nonempty": ""}
            run.append(Element("#link", "[", children=children, inline=True, attrs=attrs))
        elif m.group("emphasis") is not None:  # an opener stays on the word after it, a closer on the one before
            opener = (
                m.end() < len(content)
                and not content[m.end()].isspace()
                and (m.start() == 0 or content[m.start() - 1].isspace())
            )
            run.append(
                Element("#md", m.group(), void=True, inline=True, attrs={"stick": "right" if opener else "left"})
            )
        else:
            run.append(Element("#md", m.group(), void=True, inline=True))
        at = m.end()
    if at < len(content):
        run.extend(p for p in protect(content[at:], escape) if p != "")
    return run


@dataclass
class Place:
    """Where one line of a unit's text stands in the source: line, columns [start, end)."""

    line: int
    start: int
    end: int


class Markdown:
    def __init__(self, text: str) -> None:
        from markdown_it import MarkdownIt

        self.lines = text.splitlines(keepends=True)
        front = FRONT_MATTER.match(text)
        skip = front.group().count("\n") if front else 0
        body = "".join(self.lines[skip:])
        md = MarkdownIt("commonmark").enable("table").enable("strikethrough")
        cursor: dict[int, int] = {}
        self.units: list[Unit] = []
        self.places: list[list[Place]] = []
        missed = 0
        for token in md.parse(body):
            if token.type != "inline" or not token.map or not token.content.strip():
                continue
            places = self._find(token.content, skip + token.map[0], cursor)
            if places is None:
                missed += 1
                continue
            found = self._unit(token.content)
            if found is not None:
                self.units.append(found)
                self.places.append(places)
        if missed:
            logger.warning("%d Markdown passages could not be found line by line and are left as they were.", missed)

    def _find(self, content: str, first: int, cursor: dict[int, int]) -> list[Place] | None:
        places = []
        for k, part in enumerate(content.split("\n")):
            line = first + k
            if line >= len(self.lines):
                return None
            at = self.lines[line].find(part, cursor.get(line, 0))
            if at < 0:
                return None
            places.append(Place(line, at, at + len(part)))
        for p in places:
            cursor[p.line] = p.end
        return places

    @staticmethod
    def _unit(content: str) -> Unit | None:
        run: list[Element | str] = []
        for k, part in enumerate(content.split("\n")):
            if k:
                run += [Element("#break", "\n", void=True, inline=True), " "]
            run += inline_run(part)
        return unit_of(run, escape) if run else None

    @property
    def texts(self) -> list[str]:
        return [u.text for u in self.units]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs(self.units, found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        aligned = iter(links or [])
        edits: dict[int, list[tuple[int, int, str]]] = {}
        for unit, places, target in zip(self.units, self.places, found):
            out = unit.render(target, next(aligned, None) if unit.tagged else None)
            parts = [re.sub(r"^[ \t]+|[ \t]+$", "", p) for p in out.split("\n")]
            if len(parts) != len(places) or not all(parts):  # a line left empty would end the paragraph
                parts = spread(" ".join(p for p in parts if p), [p.end - p.start for p in places])
            for k, (place, part) in enumerate(zip(places, parts)):
                if k:  # a line that would start a list, a quote or a heading keeps being text
                    part = LINE_START.sub(r"\1\\\2", part)
                edits.setdefault(place.line, []).append((place.start, place.end, part))
        out_lines = []
        for n, line in enumerate(self.lines):
            for start, end, part in sorted(edits.get(n, []), reverse=True):
                line = line[:start] + part + line[end:]
            out_lines.append(line)
        return "".join(out_lines).encode("utf-8")


def read(data: bytes) -> Markdown:
    return Markdown(decode(data, "Markdown"))
