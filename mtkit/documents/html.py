"""An HTML document or fragment: mtkit/decode/markup.py's Markup on the whole file (read as a browser reads it,
written back escaped; script, style, code, pre, translate="no" and class="notranslate" kept, a Mastodon
post's mentions and hashtags too)."""

from __future__ import annotations

from collections.abc import Sequence

from mtkit.decode.markup import Markup
from mtkit.documents.units import decode


class Page:
    def __init__(self, data: bytes, attributes: Sequence[str] = ()) -> None:
        self.markup = Markup([decode(data, "HTML")], attributes)

    @property
    def texts(self) -> list[str]:
        return self.markup.texts

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return self.markup.pairs(found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        return self.markup.render(found, links)[0].encode("utf-8")


def read(data: bytes, attributes: Sequence[str] = ()) -> Page:
    return Page(data, attributes)
