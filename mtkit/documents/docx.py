"""A Word document (.docx), read and written by python-docx: the text of every paragraph (the body's, tables'
cells, nested tables', headers' and footers') translated, each run keeping its formatting (bold, italic,
font, style) around the words aligned to its own; runs that hold anything but text (pictures, fields,
footnote marks) are kept whole in their place, and the document's other parts (styles, numbering, images,
settings) are not touched.

A run is a span of the paragraph's words, written with markers that cannot occur in text
(\\x01 index \\x02 ... \\x03), so that the rendered paragraph is cut back into the runs' new texts."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from typing import Any

from mtkit.decode.htmltree import Element
from mtkit.decode.markup import Unit, alignment_pairs, unit_of
from mtkit.decode.placeholders import protect
from mtkit.errors import MtkitError

RUN = re.compile(r"\x01(\d+)\x02(.*?)\x03|\x04(\d+)\x05", re.DOTALL)
NOT_TEXT = ("drawing", "pict", "object", "fldChar", "instrText", "footnoteReference", "endnoteReference", "sym")


def _pieces(text: str) -> list[Element | str]:
    """A run's text: tabs and line breaks void (python-docx writes them back as <w:tab/>, <w:br/>)."""
    out: list[Element | str] = []
    for k, part in enumerate(re.split(r"([\t\n])", text)):
        if k % 2:
            out.append(Element("#space", part, void=True, inline=True))
        elif part:
            out.extend(p for p in protect(part) if p != "")
    return out


class Word:
    def __init__(self, data: bytes) -> None:
        import zipfile

        import docx
        from docx.opc.exceptions import PackageNotFoundError

        try:
            self.doc = docx.Document(io.BytesIO(data))
        except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
            raise MtkitError(f"the input is not a readable .docx document ({exc}).") from None
        self.slots: list[tuple[Any, list[Any], list[Any], Unit]] = []  # (paragraph, text runs, other runs, unit)
        seen: set[int] = set()
        for paragraph in self._paragraphs(seen):
            runs = [r for item in paragraph.iter_inner_content() for r in getattr(item, "runs", [item])]
            run_list: list[Element | str] = []
            texts, objects = [], []
            for r in runs:
                if any(child.tag.endswith("}" + t) for child in r._r.iter() for t in NOT_TEXT):
                    run_list.append(Element("#object", f"\x04{len(objects)}\x05", void=True, inline=True))
                    objects.append(r)
                    continue
                texts.append(r)
                index = len(texts) - 1
                run_list.append(Element("#run", f"\x01{index}\x02", children=_pieces(r.text), inline=True,
                                        attrs={"end": "\x03"}))  # fmt: skip
            found = unit_of(run_list, lambda s: s) if texts else None
            if found is not None:
                self.slots.append((paragraph, texts, objects, found))

    def _paragraphs(self, seen: set[int]) -> Iterator[Any]:
        def of(container: Any) -> Iterator[Any]:
            yield from container.paragraphs
            for table in container.tables:
                for row in table.rows:
                    for cell in row.cells:
                        if id(cell._tc) not in seen:  # a merged cell is listed once for each grid cell it covers
                            seen.add(id(cell._tc))
                            yield from of(cell)

        yield from of(self.doc)
        for section in self.doc.sections:
            for part in (section.header, section.footer, section.first_page_header, section.first_page_footer,
                         section.even_page_header, section.even_page_footer):  # fmt: skip
                if not part.is_linked_to_previous:
                    yield from of(part)

    @property
    def texts(self) -> list[str]:
        return [u.text for *_, u in self.slots]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs((u for *_, u in self.slots), found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        aligned = iter(links or [])
        for (paragraph, runs, objects, unit), target in zip(self.slots, found):
            out = unit.render(target, next(aligned, None) if unit.tagged else None)
            segments: list[list[Any]] = []  # [text run index or None, object index or None, text], in order
            at = 0
            for m in RUN.finditer(out):
                if segments and out[at : m.start()]:  # what lies between two runs (a space) ends the one before
                    segments[-1][2] += out[at : m.start()]
                text = re.sub(r" ?([\t\n]) ?", r"\1", m.group(2) or "")
                segments.append(
                    [int(m.group(1)) if m.group(1) else None, int(m.group(3)) if m.group(3) else None, text]
                )
                at = m.end()
            place(paragraph, runs, objects, segments)
        buffer = io.BytesIO()
        self.doc.save(buffer)
        return buffer.getvalue()


def place(paragraph: Any, runs: list[Any], objects: list[Any], segments: list[list[Any]]) -> None:
    """The paragraph's runs in the translation's order: a copy of run k (its formatting) for each piece of text
    that went to it, the other runs where they went. Where the runs do not all sit directly in the paragraph
    (a hyperlink's), each run takes its own pieces in its place instead."""
    import copy

    from docx.text.run import Run

    elements = [r._r for r in runs] + [o._r for o in objects]
    if all(e.getparent() is paragraph._p for e in elements):
        first = min(paragraph._p.index(e) for e in elements)
        for e in elements:
            paragraph._p.remove(e)
        for k, (run, obj, text) in enumerate(segments):
            if obj is not None:
                element = objects[obj]._r
            else:
                element = copy.deepcopy(runs[run]._r)
                Run(element, paragraph).text = text
            paragraph._p.insert(first + k, element)
        return
    new = [""] * len(runs)
    for run, _, text in segments:
        if run is not None:
            new[run] += text
    for k, run in enumerate(runs):
        run.text = new[k] + (" " if k + 1 < len(runs) and new[k] and not new[k][-1:].isspace() else "")


def read(data: bytes) -> Word:
    return Word(data)
