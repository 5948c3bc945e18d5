"""The files sent to `mtkit serve` to be translated, and their translations kept for download, by id.

Kept in memory for KEEP_S seconds (as LibreTranslate keeps its translated files), at most MAX_KEPT_BYTES
in all (the oldest go first), each under an unguessable id and visible only to the key that sent the file
(mtkit/serve/documents.py translates them).
"""

from __future__ import annotations

import asyncio
import collections
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mtkit.serve.payload import RequestError

KEEP_S = 30 * 60
MAX_KEPT_BYTES = 256 * 2**20


@dataclass
class Kept:
    """One file sent to be translated: whose, its name, where it stands, and its translation once done."""

    owner: str
    name: str
    key: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)  # DeepL's document_key
    status: str = "queued"  # queued, translating, done, error
    error: str = ""
    characters: int = 0
    result: bytes = b""
    since: float = field(default_factory=time.monotonic)
    task: asyncio.Task | None = field(default=None, repr=False)


class Files:
    """The files being translated and the translations kept for download, by id; a key sees only its own."""

    def __init__(self) -> None:
        self._kept: collections.OrderedDict[str, Kept] = collections.OrderedDict()

    def add(self, owner: str, name: str) -> tuple[str, Kept]:
        self._expire()
        ident = secrets.token_hex(16)
        kept = self._kept[ident] = Kept(owner, name)
        return ident, kept

    def get(self, owner: str, ident: str) -> Kept | None:
        self._expire()
        kept = self._kept.get(ident)
        return kept if kept is not None and kept.owner == owner else None

    def download(self, ident: str) -> Kept | None:
        """A translation by its id alone (the link LibreTranslate's /translate_file answers with: the id, 128
        random bits, is what lets its holder download it)."""
        self._expire()
        kept = self._kept.get(ident)
        return kept if kept is not None and kept.status == "done" else None

    def remove(self, ident: str) -> None:
        self._kept.pop(ident, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for ident in [i for i, k in self._kept.items() if now - k.since > KEEP_S]:
            del self._kept[ident]
        while sum(len(k.result) for k in self._kept.values()) > MAX_KEPT_BYTES:
            self._kept.popitem(last=False)

    def run(self, kept: Kept, work: Callable[[Callable[[int], None]], Awaitable[bytes]]) -> None:
        """Translate in the background (DeepL's document API: upload now, ask for the status, download later)."""

        async def background() -> None:
            kept.status = "translating"

            def counted(characters: int) -> None:
                kept.characters = characters

            try:
                kept.result = await work(counted)
                kept.status = "done"
            except RequestError as exc:
                kept.status, kept.error = "error", exc.message
            except Exception as exc:  # noqa: BLE001 - said to the client that asks for the status
                kept.status, kept.error = "error", f"translating the file failed ({type(exc).__name__})."

        kept.task = asyncio.ensure_future(background())
