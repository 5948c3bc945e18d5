"""The languages a served model translates, and which of them a text is in: what every API asks, in no API's shape.

`Directions` are the model's language pairs (from --languages, the model file's record, or its
target-language tokens), with the one rule that turns a request's target language into the
translator's `target_lang` (its >>xx<< token where the model has them). `Detector` identifies the
language of a text with mtkit/langid.py's `Identifier` (py3langid, as `mtkit clean --langid`),
restricted to the codes it is given: checked when the server starts (`Detector.check`), so a code
py3langid does not know is one sentence at start, never a 500 at the first request.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from mtkit.errors import MtkitError
from mtkit.langid import Identifier, base_language
from mtkit.serve.payload import RequestError

# English names of the codes a client is likely to see (LibreTranslate's and DeepL's lists say a name); others:
# the code itself.
NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French",
    "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian",
    "lv": "Latvian", "nb": "Norwegian Bokmål", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
    "zh": "Chinese",
}  # fmt: skip
NO_LANGUAGES = "this server does not know its model's languages; its operator can name them with --languages en-de."


@dataclass(frozen=True)
class Directions:
    """The language pairs the served model translates; `tokens`: whether it picks its target by a >>xx<< token."""

    pairs: tuple[tuple[str, str], ...]
    tokens: bool = False

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(s for s, _ in self.pairs))

    @property
    def all_targets(self) -> list[str]:
        return list(dict.fromkeys(t for _, t in self.pairs))

    def targets(self, source: str) -> list[str]:
        return [t for s, t in self.pairs if s == source]

    def languages(self) -> list[dict[str, Any]]:
        """Each source with its targets, then the languages that are only targets (LibreTranslate's /languages)."""
        codes = list(dict.fromkeys([*self.sources, *self.all_targets]))
        return [{"code": c, "name": NAMES.get(c, c), "targets": self.targets(c)} for c in codes]

    def spelled(self, code: str) -> str:
        """`code` as the model's languages spell it, matched in any case (EN is en, zho_hant is zho_Hant); as given
        when it is none of them."""
        known = {c.lower(): c for c in [*self.sources, *self.all_targets]}
        return known.get(code.lower(), code)

    def target_lang(self, target: str) -> str:
        """The one place a request's target language becomes the translator's `target_lang`: its >>xx<< token,
        where the model has them ("": a model of one pair)."""
        return target if self.tokens else ""


def translatable(text: str) -> bool:
    """Whether a text holds a letter or a digit: one of emoji, symbols and spaces only is given back as it is (as
    LibreTranslate does), never made into a sentence by the model."""
    return any(unicodedata.category(c)[0] in "LN" for c in text)


def for_target(target: str, dirs: Directions) -> str:
    """`dirs.target_lang(target)` (the name LibreTranslate's adapter has used)."""
    return dirs.target_lang(target)


def parse_languages(text: str) -> tuple[tuple[str, str], ...]:
    """`--languages en-de,en-fr`: the pairs, or one sentence on why not."""
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        source, sep, target = item.partition("-")
        if not sep or not source.isalnum() or not target.replace("_", "").isalnum():
            raise MtkitError(f"--languages takes pairs like en-de or en-de,en-fr; {item!r} is not one.")
        pairs.append((source.lower(), target))
    if not pairs:
        raise MtkitError("--languages takes pairs like en-de or en-de,en-fr; it was empty.")
    return tuple(pairs)


def directions(given: tuple[tuple[str, str], ...], recorded: Any, language_tokens: dict[str, int]) -> Directions:
    """--languages when given; else the pair the model file records, or its targets' tokens with that source."""
    tokens = bool(language_tokens)
    if given:
        return Directions(given, tokens)
    if isinstance(recorded, (list, tuple)) and len(recorded) == 2 and all(isinstance(x, str) for x in recorded):
        source, target = recorded
        if not tokens:
            return Directions(((source, target),))
        if source != "src":  # a multilingual data directory calls its sides src and tgt: no source known
            return Directions(tuple((source, tok[2:-2]) for tok in language_tokens), True)
    return Directions((), tokens)


def known_to_detection(codes: list[str]) -> list[str]:
    """The codes py3langid identifies (ISO 639-1: en, de; not eng, deu) among `codes` (none without py3langid)."""
    global _KNOWN
    if _KNOWN is None:
        try:
            from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier
        except ImportError:
            return []
        _KNOWN = frozenset(LanguageIdentifier.from_modelpath(f"{MODEL_DIR}/{MODEL_FILE}").nb_classes)
    return [c for c in codes if base_language(c) in _KNOWN]


_KNOWN: frozenset[str] | None = None


def detected_among(dirs: Directions) -> list[str]:
    """The languages a text is identified among: the model's sources, and its targets detection knows, as
    LibreTranslate detects among every language it has (so German sent with `source: auto` to an English-German
    model is German, which it does not translate from, not English). A model of one source language whose code
    detection does not know (eng) is always that language."""
    sources = dirs.sources
    if len(sources) == 1 and not known_to_detection(sources):
        return sources
    return list(dict.fromkeys([*sources, *known_to_detection(dirs.all_targets)]))


class Detector:
    """Language identification among the given languages (mtkit/langid.py's `Identifier`: py3langid, restricted to
    them); one language: always that one."""

    def __init__(self, languages: list[str]) -> None:
        self.languages = languages
        self._identifier = (
            Identifier(languages, needs="detecting the language", extra="serve") if len(languages) >= 2 else None
        )

    def check(self) -> None:
        """Read py3langid's model now and restrict it to the languages, or say in one sentence which codes it does
        not know (a server refuses to start then: detection over the wrong set of languages is no detection)."""
        if self._identifier is not None:
            self._identifier.load()

    def detect(self, text: str) -> list[dict[str, Any]]:
        """[{"confidence": 0-100, "language": code}], most likely first (one language: it, with 100)."""
        if self._identifier is None:
            return [{"confidence": 100.0, "language": code} for code in self.languages]
        try:
            ranked = self._identifier.rank(text)
        except MtkitError as exc:
            raise RequestError(400, str(exc)) from None
        return [{"confidence": round(100.0 * p, 1), "language": code} for code, p in ranked]
