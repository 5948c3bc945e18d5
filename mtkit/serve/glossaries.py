"""Glossaries kept by `mtkit serve`: each one a source and a target language and its entries (source term -> target
term), owned by the API key that made it and invisible to every other key; in memory, for as long as the server
runs. DeepL's /v2/glossaries endpoints (mtkit/serve/deepl_glossaries.py) make, list and delete them, for every API:
a translation names one by its id (DeepL's and mtkit's `glossary_id`), or brings its own entries (mtkit's
`glossary`, `inline`).

Entries come as DeepL sends them, TSV (a source term, a tab, a target term, a line each) or CSV, and are
checked as DeepL checks them (no empty term, no control character, no source term twice) and then as the decoder
enforces them (mtkit/decode/glossary.py: no source term twice in any case), once, when the glossary is made: each
keeps its `terms`, the value the Service hands the Translator. Bounded: at most MAX_GLOSSARIES per key, MAX_ENTRIES
and MAX_BYTES per glossary, MAX_INLINE_ENTRIES in a request's own.
"""

from __future__ import annotations

import csv
import datetime
import io
import uuid
from dataclasses import dataclass, field
from typing import Any

from mtkit.decode.glossary import Glossary
from mtkit.errors import MtkitError
from mtkit.serve.payload import RequestError, cut

MAX_GLOSSARIES = 100  # per key
MAX_ENTRIES = 10_000  # per glossary
MAX_BYTES = 2**20  # a glossary's entries, as TSV or CSV (DeepL takes 10 MiB; a key keeps MAX_GLOSSARIES of them)
MAX_INLINE_ENTRIES = 1000  # a request's own glossary (more: make one and send its id), within the request's body limit
MAX_TERM_CHARS = 1024


@dataclass(frozen=True)
class Stored:
    """A glossary a key made: its description, its entries as given, and `terms`, the entries checked and compiled
    once for the decoder."""

    glossary_id: str
    name: str
    owner: str  # the name of the key that made it ("" on a server without keys)
    source: str
    target: str
    entries: dict[str, str] = field(repr=False)
    terms: Glossary = field(repr=False)
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
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise RequestError(413, f"the glossary's entries are {size} bytes; a glossary holds at most {MAX_BYTES}.")
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
        self._by_id: dict[str, Stored] = {}

    def create(self, owner: str, name: str, source: str, target: str, entries: dict[str, str]) -> Stored:
        if not name.strip():
            raise RequestError(400, "a glossary needs a name.")
        if sum(g.owner == owner for g in self._by_id.values()) >= MAX_GLOSSARIES:
            raise RequestError(400, f"a key keeps at most {MAX_GLOSSARIES} glossaries; delete one first.")
        try:
            terms = Glossary.of(entries, "the glossary")
        except MtkitError as exc:  # a source term twice in another case: the decoder could not tell which applies
            raise RequestError(400, str(exc)) from None
        glossary = Stored(str(uuid.uuid4()), name, owner, source, target, entries, terms)
        self._by_id[glossary.glossary_id] = glossary
        return glossary

    def get(self, owner: str, glossary_id: str) -> Stored | None:
        """The glossary, or None when there is none by that id for this owner (another key's is never shown)."""
        glossary = self._by_id.get(glossary_id)
        return glossary if glossary is not None and glossary.owner == owner else None

    def owned(self, owner: str) -> list[Stored]:
        return [g for g in self._by_id.values() if g.owner == owner]

    def delete(self, owner: str, glossary_id: str) -> bool:
        if self.get(owner, glossary_id) is None:
            return False
        del self._by_id[glossary_id]
        return True


def inline(value: Any) -> Glossary:
    """A request's own glossary: `{"source term": "target term", ...}` or `[["source term", "target term"], ...]`,
    checked as a stored one's entries are; 422 (413 past MAX_INLINE_ENTRIES) naming the entry that is wrong."""
    if isinstance(value, dict):
        pairs: list[Any] = list(value.items())
    elif isinstance(value, list):
        pairs = [tuple(p) if isinstance(p, list) else p for p in value]
    else:
        raise RequestError(422, 'glossary must be an object {"source term": "target term"} or a list of pairs.')
    if not pairs:
        raise RequestError(422, "glossary has no entries; leave it out to translate without one.")
    if len(pairs) > MAX_INLINE_ENTRIES:
        raise RequestError(
            413,
            f"glossary has {len(pairs)} entries; a request's own holds at most {MAX_INLINE_ENTRIES} (make a larger one "
            "with POST /v2/glossaries and send its glossary_id).",
        )
    for number, pair in enumerate(pairs, 1):
        if isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(t, str) for t in pair):
            for term in pair:
                if len(term) > MAX_TERM_CHARS:
                    longer = f"a term is longer than {MAX_TERM_CHARS} characters"
                    raise RequestError(422, f"glossary, entry {number}: {longer}.")
    try:
        return Glossary.of(pairs, "glossary")
    except MtkitError as exc:
        raise RequestError(422, str(exc)) from None
