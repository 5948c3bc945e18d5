"""Glossaries kept by `mtkit serve`: each one a source and a target language and its entries (source term -> target
term), owned by the API key that made it and invisible to every other key; in memory, for as long as the server
runs. The APIs that take glossaries (DeepL's /v2/glossaries) store and read them here.

Entries come as DeepL sends them, TSV (a source term, a tab, a target term, a line each) or CSV, and are
checked as DeepL checks them: no empty term, no control character, no source term twice. Bounded: at most
MAX_GLOSSARIES per key and MAX_ENTRIES per glossary.
"""

from __future__ import annotations

import csv
import datetime
import io
import uuid
from dataclasses import dataclass, field

from mtkit.serve.payload import RequestError, cut

MAX_GLOSSARIES = 100  # per key
MAX_ENTRIES = 10_000  # per glossary
MAX_TERM_CHARS = 1024


@dataclass(frozen=True)
class Glossary:
    glossary_id: str
    name: str
    owner: str  # the name of the key that made it ("" on a server without keys)
    source: str
    target: str
    entries: dict[str, str] = field(repr=False)
    created: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc))


def _check_term(term: str, where: str) -> str:
    if not term.strip():
        raise RequestError(400, f"{where}: a term is empty.")
    if len(term) > MAX_TERM_CHARS:
        raise RequestError(400, f"{where}: a term is longer than {MAX_TERM_CHARS} characters.")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in term):
        raise RequestError(400, f"{where}: a term holds a control character.")
    if term != term.strip():
        raise RequestError(400, f"{where}: a term begins or ends with a space.")
    return term


def parse_entries(text: str, entries_format: str) -> dict[str, str]:
    """The entries of a TSV or CSV text (source term, target term a line), or 400 naming the line that is wrong."""
    if entries_format not in ("tsv", "csv"):
        raise RequestError(400, f"entries_format must be tsv or csv, not {cut(entries_format)}.")
    if entries_format == "tsv":
        rows = [line.split("\t") for line in text.split("\n")]
    else:
        try:
            rows = list(csv.reader(io.StringIO(text)))
        except csv.Error as exc:
            raise RequestError(400, f"the CSV entries cannot be read: {exc}.") from None
    entries: dict[str, str] = {}
    for number, row in enumerate(rows, 1):
        if row in ([], [""], ["\r"]):
            continue
        where = f"entry line {number}"
        if len(row) != 2:
            raise RequestError(400, f"{where} holds {len(row)} fields; a line is a source term and a target term.")
        source, target = (_check_term(term.rstrip("\r") if k else term, where) for k, term in enumerate(row))
        if source in entries:
            raise RequestError(400, f"{where}: the source term {cut(source)!r} is listed twice.")
        entries[source] = target
        if len(entries) > MAX_ENTRIES:
            raise RequestError(413, f"a glossary holds at most {MAX_ENTRIES} entries.")
    if not entries:
        raise RequestError(400, "the glossary has no entries.")
    return entries


class Glossaries:
    """Every key's glossaries, by id; a key sees only its own."""

    def __init__(self) -> None:
        self._by_id: dict[str, Glossary] = {}

    def create(self, owner: str, name: str, source: str, target: str, entries: dict[str, str]) -> Glossary:
        if not name.strip():
            raise RequestError(400, "a glossary needs a name.")
        if sum(g.owner == owner for g in self._by_id.values()) >= MAX_GLOSSARIES:
            raise RequestError(400, f"a key keeps at most {MAX_GLOSSARIES} glossaries; delete one first.")
        glossary = Glossary(str(uuid.uuid4()), name, owner, source, target, entries)
        self._by_id[glossary.glossary_id] = glossary
        return glossary

    def get(self, owner: str, glossary_id: str) -> Glossary | None:
        """The glossary, or None when there is none by that id for this owner (another key's is never shown)."""
        glossary = self._by_id.get(glossary_id)
        return glossary if glossary is not None and glossary.owner == owner else None

    def owned(self, owner: str) -> list[Glossary]:
        return [g for g in self._by_id.values() if g.owner == owner]

    def delete(self, owner: str, glossary_id: str) -> bool:
        if self.get(owner, glossary_id) is None:
            return False
        del self._by_id[glossary_id]
        return True
