"""`mtkit translate -i FILE -o OUT` of a document: the file read whole, translated by mtkit.documents with a
progress bar, written at once (the output appears only when complete: mtkit/textio.py's open_output)."""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

from mtkit.errors import MtkitError

MAX_BYTES = 256 * 1024 * 1024  # a document is read whole: past this it is refused, not swapped in


def translate_file(
    source: BinaryIO, out: BinaryIO, format: str, translator: Any, config: Any, batch_tokens: int, target_lang: str
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
            data, format, translator, config, target_lang=target_lang, batch_tokens=batch_tokens, progress=progress
        )
    finally:
        bar.close()
    out.write(written)
