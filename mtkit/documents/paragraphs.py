"""Plain text with paragraphs: each paragraph (lines between blank lines) translated as one text, its sentences
split and joined back, its line breaks put back where their words went, so it keeps its number of lines; the
blank lines, line endings and the whitespace around paragraphs are copied."""

from __future__ import annotations

import re

from mtkit.documents.units import Pieces, decode, tidy_breaks

BLANK = re.compile(r"((?:^[ \t]*(?:\r?\n|$))+)", re.MULTILINE)


def read(data: bytes) -> Pieces:
    text = decode(data, "plain text")
    pieces = Pieces(tidy=tidy_breaks)
    for k, part in enumerate(BLANK.split(text)):
        if k % 2:  # blank lines
            pieces.copy(part)
        elif part:
            body = part.rstrip("\r\n")
            pieces.add(body, breaks=True)
            pieces.copy(part[len(body) :])
    return pieces
