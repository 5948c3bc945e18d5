"""Languages: the base language of a code, and language identification, one copy of each for every caller.

`base_language` is the rule that `zh-Hans`, `pt_BR` and `EN` count as `zh`, `pt` and `en` (which BLEU
tokenizer, whether a script has spaces, what `mtkit clean --langid` expects). `Identifier` is langid.py's model
through py3langid (its maintained fork; the extra `mtkit[langid]`, chosen as the most
accurate of four libraries on short sentences), loaded once on first use, optionally restricted to some
languages: `mtkit clean --langid` classifies among all of them, serve's `/detect` ranks among a model's.

A base module, not one of `mtkit.data`: `mtkit.score` (base too) asks for the base language.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from mtkit.errors import MtkitError


def base_language(code: str) -> str:
    """The language of a code without its script or region, lowercased: 'zh-Hans' -> 'zh', 'pt_BR' -> 'pt'."""
    return code.lower().replace("_", "-").split("-")[0]


class Identifier:
    """py3langid's model, loaded at the first call (and by `load`, before a fork); safe to share between threads.

    `languages` restricts it to those codes (py3langid's ISO 639-1 codes, base languages of the ones given);
    Without py3langid, the sentence says "NEEDS needs py3langid: pip install 'mtkit[EXTRA]'"."""

    def __init__(
        self, languages: Sequence[str] | None = None, *, needs: str = "language identification", extra: str = "langid"
    ) -> None:
        self.languages = [base_language(code) for code in languages] if languages else None
        self.needs, self.extra = needs, extra
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> Identifier:
        """Load the model now (seconds); one sentence when py3langid is missing or a language is unknown to it."""
        with self._lock:
            if self._model is None:
                try:
                    import py3langid  # noqa: F401 - first: its submodule may be imported while it was taken away
                    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier
                except ImportError:
                    raise MtkitError(f"{self.needs} needs py3langid: pip install 'mtkit[{self.extra}]'.") from None
                model = LanguageIdentifier.from_modelpath(f"{MODEL_DIR}/{MODEL_FILE}", norm_probs=True)
                if self.languages:
                    unknown = sorted(set(self.languages) - set(model.nb_classes))
                    if unknown:
                        raise MtkitError(
                            f"language identification knows no language {', '.join(unknown)} "
                            f"(py3langid knows {len(set(model.nb_classes))}, by ISO 639-1 codes such as en, de, zh)."
                        )
                    model.set_languages(self.languages)
                self._model = model
        return self

    def classify(self, text: str) -> str:
        """The most likely language of `text`, as an ISO 639-1 code."""
        return str((self._model or self.load()._model).classify(text)[0])

    def rank(self, text: str) -> list[tuple[str, float]]:
        """Every language with its probability (they add up to 1), the most likely first."""
        return [(str(code), float(p)) for code, p in (self._model or self.load()._model).rank(text)]
