"""HTML fragments translated through the Service, for every API that takes markup (LibreTranslate's `format: html`,
...): mtkit/decode/markup.py's `Markup` driven by the server's batcher (its decoding and alignment in the decoder
thread).

Reading and rendering the markup, which for a 16 kB request of inline tags take a large part of a
second, run in a worker thread, never in the event loop, so /health and other requests are
answered meanwhile. Markup the parser refuses (nested too deep, or that would not read back in a
browser as it was read) is the request's mistake: 400 with its sentence.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TypeVar

from mtkit.config import DecodeConfig
from mtkit.decode.glossary import Glossary
from mtkit.decode.markup import Markup
from mtkit.errors import MtkitError
from mtkit.serve.payload import RequestError
from mtkit.serve.service import Service

ClientGone = Callable[[], Awaitable[object]]
T = TypeVar("T")


async def off_the_loop(work: Callable[[], T]) -> T:
    """`work()` in a worker thread; markup the parser refuses is the request's mistake (400)."""
    try:
        return await asyncio.to_thread(work)
    except MtkitError as exc:
        raise RequestError(400, str(exc)) from None
    except RecursionError:
        raise RequestError(400, "the HTML nests its tags too deeply to translate.") from None


async def translate_html(
    service: Service,
    lines: list[str],
    config: DecodeConfig,
    target_lang: str,
    client_gone: ClientGone | None = None,
    glossary: Glossary | None = None,
) -> list[str]:
    """Each line, an HTML fragment, translated with its markup kept; into `target_lang` (the translator's), with
    `glossary`'s terms enforced in its text."""
    markup = await off_the_loop(lambda: Markup(lines))
    texts = markup.texts
    config = dataclasses.replace(config, nbest=1)
    found = (
        [t.text for t in await service.translate(texts, config, client_gone, target_lang, glossary=glossary)]
        if texts
        else []
    )
    pairs = markup.pairs(found)
    links = await service.align(pairs, target_lang) if pairs else []
    return await off_the_loop(lambda: markup.render(found, links))
