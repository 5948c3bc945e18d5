"""A gettext catalogue (.po, .pot), read and written by polib: each entry's msgstr (every plural form: the
first from msgid, the others from msgid_plural) filled with the translation of its msgid; msgids, contexts,
comments, references and flags kept. An entry already translated keeps its msgstr, and the header and
obsolete entries are left as they are. Placeholders (`%(name)s`, `{0}`, `%d`, ...) come back byte for byte
(mtkit/decode/placeholders.py), so `c-format` and `python-format` entries still compile."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mtkit.decode.markup import Unit, alignment_pairs
from mtkit.documents.units import decode, keep_lines, tidy_breaks, unit
from mtkit.errors import MtkitError


class Catalogue:
    def __init__(self, text: str) -> None:
        import polib

        try:  # polib reads a path when given one that exists: content always holds a line break, no path does
            self.po = polib.pofile(text if text.endswith("\n") else text + "\n", wrapwidth=78)
        except (OSError, ValueError) as exc:
            raise MtkitError(f"the input is not a well-formed gettext catalogue ({exc}).") from None
        self.slots: list[tuple[Any, int | None, Unit]] = []  # (entry, plural form or None, unit)
        for entry in self.po:
            if entry.obsolete or not entry.msgid:
                continue
            if entry.msgid_plural:
                forms = sorted(entry.msgstr_plural) or [0, 1]
                for k in forms:
                    if not entry.msgstr_plural.get(k):
                        self._slot(entry, k, entry.msgid if k == 0 else entry.msgid_plural)
            elif not entry.msgstr:
                self._slot(entry, None, entry.msgid)

    def _slot(self, entry: Any, form: int | None, text: str) -> None:
        found = unit(text, breaks=True)
        if found is None:  # nothing to translate (placeholders, punctuation): the msgid itself
            if form is None:
                entry.msgstr = text
            else:
                entry.msgstr_plural[form] = text
            return
        self.slots.append((entry, form, found))

    @property
    def texts(self) -> list[str]:
        return [u.text for _, _, u in self.slots]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs((u for *_, u in self.slots), found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        aligned = iter(links or [])
        for (entry, form, u), target in zip(self.slots, found):
            source = entry.msgid if form in (None, 0) else entry.msgid_plural
            text = keep_lines(tidy_breaks(u.render(target, next(aligned, None) if u.tagged else None)), source)
            if form is None:
                entry.msgstr = text
            else:
                entry.msgstr_plural[form] = text
        return str(self.po).encode("utf-8") + (b"" if str(self.po).endswith("\n") else b"\n")


def read(data: bytes) -> Catalogue:
    return Catalogue(decode(data, "gettext catalogue"))
