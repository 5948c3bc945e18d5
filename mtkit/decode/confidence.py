"""A calibrated confidence for each translation: the estimated probability that it is acceptable.

Cheap features of each translation (mtkit/decode/calibrator.py's FEATURES: the forward model's log-probability and
score, the length ratio, copied words, unknown pieces, and, with a reverse model, that model's score of the source
given the translation) go through the calibrator fitted for the model (`mtkit calibrate`), which says
P(sentence chrF >= threshold). The search is not changed: the features come from what it returns anyway, and a
reverse model costs one forced decode of each translation (no search). docs/confidence.md has the measurements.

The calibrator is found beside the model (`sidecar`): `MODEL.confidence.json` beside a model file, `confidence.json`
inside a model directory. Without one, a documented default (`DEFAULT`, fitted for a small Multi30k En-De model) is
used and the log says so once: it ranks sentences, but its probabilities are not calibrated for another model.

Used by `Translator.translate_stream(..., confidence=Confidence.load(translator))`, `mtkit translate --confidence`,
and a document's `summary` (its segments' confidences in one record).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit.config import UNK, DecodeConfig
from mtkit.decode.calibrator import Calibrator, from_record
from mtkit.decode.lengths import length_penalty

if TYPE_CHECKING:
    from mtkit.decode.translator import Source, Translation, Translator

logger = logging.getLogger(__name__)

SIDECAR = "confidence.json"
FLAG_BELOW = 0.5  # a document's segments below this confidence are counted as the ones to check


def sidecar(model: str | Path) -> Path:
    """Where a model's calibrator is kept: inside a model directory, or beside a model file (MODEL.confidence.json)."""
    path = Path(model)
    return path / SIDECAR if path.is_dir() else path.with_name(f"{path.stem}.{SIDECAR}")


@dataclasses.dataclass(frozen=True)
class Confidence:
    """How translations get their confidence: the calibrator, and the reverse model whose score it reads, if any.

    Examples:
        >>> translator = mtkit.load_translator("averaged.pt")
        >>> rate = mtkit.Confidence.load(translator)  # the calibrator beside the model, found once
        >>> [t.confidence for t in translator.translate_stream(lines, confidence=rate)]
        >>> both = mtkit.Confidence.load(translator, reverse=mtkit.load_translator("de-en.pt"))
    """

    calibrator: Calibrator
    reverse: Translator | None = None

    @staticmethod
    def load(
        translator: Translator, reverse: Translator | None = None, calibrator: str | Path | None = None
    ) -> Confidence:
        """The calibrator in `calibrator`, else the one beside the translator's model, else `DEFAULT` (said once,
        in the log); refused at once when it has no head for a reverse model and `reverse` is given."""
        if calibrator is not None:
            found = Calibrator.load(Path(calibrator))
        else:
            model = translator.describe().get("path")
            path = sidecar(model) if model else None
            if path is not None and path.is_file():
                found = Calibrator.load(path)
            else:
                logger.warning(
                    "no confidence calibrator beside %s (`mtkit calibrate` fits one): using the default, fitted for "
                    "a small Multi30k En-De model, which ranks translations but is not calibrated for another model",
                    model or "the model",
                )
                found = DEFAULT
        found.head(reverse is not None)  # a reverse model the calibrator cannot read: said now
        return Confidence(found, reverse)

    @staticmethod
    def open(
        translator: Translator,
        reverse_model: str | None = None,
        calibrator: str | Path | None = None,
        device: str = "auto",
        precision: str = "fp32",
    ) -> Confidence:
        """`load`, with the reverse model named by a path or a Hub name opened here (as `mtkit.load_translator`)."""
        from mtkit.decode.loading import prepare

        reverse = None if reverse_model is None else prepare(reverse_model, device, precision)
        return Confidence.load(translator, reverse, calibrator)

    def annotate(
        self, translator: Translator, items: Sequence[Source], found: Iterable[Translation], config: DecodeConfig
    ) -> list[Translation]:
        """`found` (the translations of `items`, in order) with their confidence."""
        translations = list(found)
        heads = {False: self.calibrator.head(False), True: self.calibrator.head(self.reverse is not None)}
        rows = features(translator, items, translations, config, self.reverse)
        return [
            dataclasses.replace(t, confidence=1.0 if row is None else heads["backward" in row].probability(row))
            for t, row in zip(translations, rows)
        ]


def features(
    translator: Translator,
    items: Sequence[Source],
    translations: Sequence[Translation],
    config: DecodeConfig,
    reverse: Translator | None = None,
) -> list[dict[str, float] | None]:
    """Each translation's features (calibrator.FEATURES; "backward" with a `reverse` model); None for an empty
    line, whose empty translation is certainly right (its confidence is 1)."""
    sources = [s if isinstance(s, str) else s[0] for s in items]
    texts = [t.text for t in translations]
    src_ids = translator.vocab.encode_batch(sources)
    tgt_ids = translator.vocab.encode_target_batch(texts)
    backward: list[float | None] = [None] * len(sources)
    if reverse is not None:
        todo = [i for i in fits(reverse, texts, sources) if sources[i].strip()]
        for i, pair in zip(todo, reverse.score([(texts[i], sources[i]) for i in todo])):
            backward[i] = pair.average
    rows: list[dict[str, float] | None] = []
    for source, t, src, tgt, back in zip(sources, translations, src_ids, tgt_ids, backward):
        if not source.strip():
            rows.append(None)
            continue
        row = forward_features(source, t.text, t.score, len(src), len(tgt), src.count(UNK), config)
        if back is not None:
            row["backward"] = back
        rows.append(row)
    return rows


def fits(reverse: Translator, texts: Sequence[str], sources: Sequence[str]) -> list[int]:
    """The pairs the reverse model can score whole: a translation and a source within its positions (a longer one
    is rated by the forward model's features alone)."""
    limit = reverse.max_source_tokens
    src = reverse.vocab.encode_batch(list(texts))
    tgt = reverse.vocab.encode_target_batch(list(sources))
    return [i for i, (a, b) in enumerate(zip(src, tgt)) if len(a) <= limit and len(b) <= limit]


def forward_features(
    source: str, text: str, score: float, src_pieces: int, tgt_pieces: int, unknown: int, config: DecodeConfig
) -> dict[str, float]:
    """The features of one translation that need no second model (calibrator.FEATURES)."""
    length = tgt_pieces + 1  # |Y| counts the EOS, as the search's length penalty does
    ratio = math.log(length / (src_pieces + 1))
    words, source_words = text.split(), set(source.split())
    return {
        "logprob": score * float(length_penalty(float(length), config.alpha, config.lenpen)) / length,
        "score": score,
        "length_ratio": ratio,
        "length_ratio_sq": ratio * ratio,
        "source_length": math.log(src_pieces + 1),
        "copied": sum(w in source_words for w in words) / len(words) if words else 0.0,
        "unknown": unknown / src_pieces if src_pieces else 0.0,
    }


def summary(confidences: Sequence[float], flag_below: float = FLAG_BELOW) -> dict[str, Any]:
    """A document's confidence from its segments': `expected_acceptable`, the mean, is the share of its segments
    expected to be acceptable (the confidences are probabilities); `lowest`; `to_check`, the segments below
    `flag_below` (numbered from 1, lowest first)."""
    if not confidences:
        return {"segments": 0, "expected_acceptable": 1.0, "lowest": 1.0, "to_check": []}
    order = sorted(range(len(confidences)), key=lambda i: confidences[i])
    return {
        "segments": len(confidences),
        "expected_acceptable": sum(confidences) / len(confidences),
        "lowest": confidences[order[0]],
        "to_check": [i + 1 for i in order if confidences[i] < flag_below],
    }


# The default, for a model without a calibrator: fitted by `mtkit calibrate` on Multi30k's dev set (valid, 1,014
# captions) for a `small` En-De model after 549 updates, with a `small` De-En model of 550 updates as the reverse
# model, beam 4, alpha 0.6 (docs/confidence.md). Another model's scores are on another scale: it ranks them, but its
# probabilities mean "acceptable" only for models like that one.
DEFAULT: Calibrator = from_record(
    {
        "format": 1,
        "threshold": 40.0,
        "heads": {
            "forward": {
                "features": [
                    "logprob",
                    "score",
                    "length_ratio",
                    "length_ratio_sq",
                    "source_length",
                    "copied",
                    "unknown",
                ],
                "mean": [-1.10421, -7.25946, -0.252134, 0.136731, 2.69635, 0.0394365, 0.0],
                "scale": [0.494572, 4.76067, 0.270479, 0.341346, 0.293629, 0.0603866, 1.0],
                "weights": [0.961686, 1.62793, 1.29446, -0.0653749, 0.51874, -0.131595, 0.0],
                "bias": 0.00530258,
            },
            "backward": {
                "features": [
                    "logprob",
                    "score",
                    "length_ratio",
                    "length_ratio_sq",
                    "source_length",
                    "copied",
                    "unknown",
                    "backward",
                ],
                "mean": [-1.10421, -7.25946, -0.252134, 0.136731, 2.69635, 0.0394365, 0.0, -3.17753],
                "scale": [0.494572, 4.76067, 0.270479, 0.341346, 0.293629, 0.0603866, 1.0, 1.26414],
                "weights": [0.0430254, 1.60383, 1.19892, 0.372369, 0.702324, -0.217, 0.0, 1.36232],
                "bias": 0.108332,
            },
        },
    }
)
