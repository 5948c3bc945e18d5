"""Files translated through the Service, for every API that takes them (LibreTranslate's /translate_file, DeepL's
/v2/document): a file's bytes in, the same file translated out, its structure kept by mtkit/documents/ (the format
from the file name's extension), and the result kept for its owner to download.

A file is read and written back in a worker thread (never in the event loop), and its text units go to
the batcher `max_lines` at a time, so requests of other clients are decoded between the chunks of a long
document. A file over --max-file-bytes is refused (413) before it is read; one the reader refuses
(damaged, binary, a format it does not know) is one sentence (400). Results are kept by
mtkit/serve/files.py.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from mtkit.config import DecodeConfig
from mtkit.decode.glossary import Glossary
from mtkit.documents import EXTENSIONS, FORMATS, Plan, document_text, read
from mtkit.serve.markup import off_the_loop
from mtkit.serve.payload import RequestError, cut
from mtkit.serve.service import Service

ClientGone = Callable[[], Awaitable[object]]


# A .txt file sent to be translated is a document of paragraphs, as LibreTranslate's /translate_file takes it (the
# command line reads .txt as lines: a test set one sentence a line must keep its line alignment).
SERVED = {**EXTENSIONS, ".txt": "paragraphs"}


def file_format(filename: str) -> str:
    """The document format of a file name (by its extension), or 400 naming the ones taken."""
    found = SERVED.get(Path(filename).suffix.lower())
    if found is None:
        taken = ", ".join(sorted(SERVED))
        raise RequestError(400, f"{cut(filename)!r} is not a file this server translates; it takes {taken}.")
    assert found in FORMATS
    return found


def safe_name(filename: str) -> str:
    """A file name fit for a link and a Content-Disposition header: its last part, odd characters replaced."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", filename.replace("\\", "/").rsplit("/", 1)[-1])[-100:] or "file"


def check_size(data: bytes, limit: int) -> None:
    if len(data) > limit:
        raise RequestError(413, f"the file has {len(data)} bytes; the limit is {limit} (--max-file-bytes).")


async def read_plan(data: bytes, format: str) -> Plan:
    """The file cut into units by its format's reader, in a worker thread; a file it refuses is 400."""
    return await off_the_loop(lambda: read(data, format))


async def translate_plan(
    service: Service,
    plan: Plan,
    target_lang: str,
    client_gone: ClientGone | None = None,
    glossary: Glossary | None = None,
) -> bytes:
    """The file `plan` was read from, translated into `target_lang` (the translator's) with its structure kept and
    `glossary`'s terms enforced."""
    texts = plan.texts
    config: DecodeConfig = dataclasses.replace(service.defaults, nbest=1)
    step, found = service.settings.limits.max_lines, []
    for start in range(0, len(texts), step):  # a chunk at a time: other clients' requests go between them
        lines = texts[start : start + step]
        chunk = await service.translate(lines, config, client_gone, target_lang, glossary=glossary)
        found += [document_text(t.text) for t in chunk]
    pairs = plan.pairs(found)
    links = await service.align(pairs, target_lang) if pairs else []
    return await off_the_loop(lambda: plan.render(found, links))


def characters(plan: Plan) -> int:
    """The characters a file holds to translate (what a key's characters a day count)."""
    return sum(map(len, plan.texts))
