"""`mtkit translate -i FILE -o OUT` of a document: the file read whole, translated by mtkit.documents with a
progress bar, written at once (the output appears only when complete: mtkit/textio.py's open_output)."""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

from mtkit.errors import MtkitError

MAX_BYTES = 256 * 1024 * 1024  # a document is read whole: past this it is refused, not swapped in


def refuse_binary(source: BinaryIO, name: str) -> None:
    """Binary data given as lines of text (a .docx with --format text, an image on stdin) refused before the
    model is loaded, by the NUL bytes in its first 64 KiB that text never holds; a terminal is not read ahead."""
    peek = getattr(source, "peek", None)
    if peek is None or source.isatty():
        return
    if b"\x00" in peek(65536)[:65536]:
        raise MtkitError(
            f"{name} is binary (it holds NUL bytes), not lines of text; a document is translated with its own "
            "--format (docs/documents.md)."
        )


def translate_file(
    source: BinaryIO,
    out: BinaryIO,
    format: str,
    translator: Any,
    config: Any,
    batch_tokens: int,
    target_lang: str,
    attributes: list[str],
) -> None:
    from tqdm import tqdm

    from mtkit.documents import translate_document

    data = source.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise MtkitError(f"the input is over {MAX_BYTES >> 20} MiB; a document is read whole, so split it first.")
    bar = tqdm(unit=" units", disable=not sys.stderr.isatty(), file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        written = translate_document(
            data,
            format,
            translator,
            config,
            target_lang=target_lang,
            batch_tokens=batch_tokens,
            progress=progress,
            attributes=attributes,
        )
    finally:
        bar.close()
    out.write(written)
