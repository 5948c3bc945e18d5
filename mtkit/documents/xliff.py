"""XLIFF 1.2 and 2.0, the exchange format of translation tools: each unit's <source> translated into its
<target> (made where missing, filled where empty; one already holding a translation is kept), inline codes
(1.2's g, x, bx, ex, ph, bpt, ept, it, mrk; 2.0's pc, ph, sc, ec, mrk, cp) copied into the target around the
words aligned to theirs; everything else as it was.

Read with lxml and no DTD, no entities, no network: a file with a DOCTYPE is refused (XLIFF has none, and a
DOCTYPE is where entity bombs live)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from mtkit.decode.htmltree import Element
from mtkit.decode.markup import Unit, alignment_pairs, unit_of
from mtkit.decode.placeholders import protect
from mtkit.errors import MtkitError

NS = {"urn:oasis:names:tc:xliff:document:1.2": "1.2", "urn:oasis:names:tc:xliff:document:2.0": "2.0"}
PAIRED = {"g", "pc", "mrk"}  # inline elements whose content is text: spans of the words inside them


def xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Xliff:
    def __init__(self, data: bytes) -> None:
        from lxml import etree

        if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data:
            raise MtkitError("the input has a DOCTYPE; XLIFF has none, and mtkit reads no DTD or entity.")
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
        try:
            self.tree = etree.fromstring(data, parser).getroottree()
        except etree.XMLSyntaxError as exc:
            raise MtkitError(f"the input is not well-formed XML ({exc}).") from None
        root = self.tree.getroot()
        ns = etree.QName(root).namespace or ""
        if etree.QName(root).localname != "xliff" or ns not in NS:
            raise MtkitError("the input is not XLIFF 1.2 or 2.0 (its root is not <xliff> in an XLIFF namespace).")
        self.ns, self.etree = ns, etree
        holders = root.iter(f"{{{ns}}}trans-unit") if NS[ns] == "1.2" else root.iter(f"{{{ns}}}segment")
        self.slots: list[tuple[Any, Any, Unit]] = []  # (source, target, unit)
        for holder in holders:
            source = holder.find(f"{{{ns}}}source")
            if source is None:
                continue
            target = holder.find(f"{{{ns}}}target")
            if target is not None and (target.text or len(target)):
                continue  # already translated
            found = unit_of(self._run(source), xml_text)
            if target is None:
                target = etree.SubElement(holder, f"{{{ns}}}target")
                source.addnext(target)
                target.tail, source.tail = source.tail, source.tail
            if found is None:  # nothing to translate: the source's content as it is
                target.text = source.text
                target[:] = [copy.deepcopy(c) for c in source]
                continue
            self.slots.append((source, target, found))

    def _run(self, element: Any) -> list[Element | str]:
        """The element's content as text and inline elements: paired codes spans, the others void."""
        etree = self.etree
        run: list[Element | str] = list(protect(element.text or "", xml_text)) if element.text else []
        for child in element:
            if not isinstance(child.tag, str):  # a comment or processing instruction: kept in its place
                run.append(Element("#code", etree.tostring(child, with_tail=False).decode(), void=True, inline=True))
            elif etree.QName(child).localname in PAIRED:
                shell = copy.copy(child)
                shell[:], shell.text, shell.tail = [], None, None
                whole = etree.tostring(shell).decode()  # <g id="1"/>: its start tag and end tag from it
                name = whole[1 : whole.index(" ") if " " in whole.split(">")[0] else whole.index("/")]
                start = whole[:-2] + ">" if whole.endswith("/>") else whole[: whole.index(">") + 1]
                inner = Element(name, start, children=self._run(child), inline=True)
                run.append(inner)
            else:
                code = etree.tostring(child, with_tail=False).decode()
                run.append(Element("#code", code, void=True, inline=True))
            if child.tail:
                run.extend(protect(child.tail, xml_text))
        return run

    @property
    def texts(self) -> list[str]:
        return [u.text for _, _, u in self.slots]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs((u for *_, u in self.slots), found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        etree = self.etree
        aligned = iter(links or [])
        for (source, target, u), text in zip(self.slots, found):
            inner = u.render(text, next(aligned, None) if u.tagged else None)
            nsmap = {k: v for k, v in (source.nsmap or {}).items() if k}
            declared = "".join(f' xmlns:{k}="{v}"' for k, v in nsmap.items())
            made = etree.fromstring(f'<target xmlns="{self.ns}"{declared}>{inner}</target>')
            target.text = made.text
            target[:] = list(made)
        return etree.tostring(self.tree, xml_declaration=True, encoding="UTF-8")


def read(data: bytes) -> Xliff:
    return Xliff(data)
