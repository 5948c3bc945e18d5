"""`mtkit calibrate`: the confidence calibrator of a model, fitted on a data directory's dev set.

The model translates DATA/raw/valid.SRC as it will be used (the same decoding settings); each translation gets its
features (mtkit/decode/confidence.py) and its sentence chrF against DATA/raw/valid.TGT; "acceptable" is a chrF of
at least `threshold`; one logistic regression per set of features (mtkit/decode/calibrator.py) is fitted to it: the
forward model's own, and with a reverse model that model's score too. The dev figures the record keeps (Spearman
of the confidence with chrF) are 5-fold cross-validated: each sentence rated by a calibrator fitted without it.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig
from mtkit.data.dataset import recorded_languages
from mtkit.decode.calibrator import BACKWARD, BACKWARD_FEATURES, FORWARD, FORWARD_FEATURES, Calibrator, fit_head
from mtkit.decode.confidence import features
from mtkit.errors import MtkitError
from mtkit.textio import read_lines_strict

if TYPE_CHECKING:
    from mtkit.decode.translator import Translator

logger = logging.getLogger(__name__)

FOLDS = 5
SWEEP = (30.0, 35.0, 40.0, 45.0, 50.0, 55.0, 60.0)  # thresholds whose dev figures a calibrator keeps, to choose by


def languages(data: Path) -> tuple[str, str]:
    """DATA's (source, target) languages, from prepare.json (or bpe.json), or one sentence saying why not."""
    found = recorded_languages(data)
    if found is not None:
        return found[2], found[3]
    raise MtkitError(f"{data} has no prepare.json naming its languages; make it with `mtkit prepare` first.")


def fit(
    translator: Translator,
    data: Path,
    config: DecodeConfig | None = None,
    reverse: Translator | None = None,
    threshold: float = 40.0,
    split: str = "valid",
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
) -> Calibrator:
    """The calibrator of `translator` (and `reverse`, if given) for `config`'s decoding (None: the translator's
    defaults), fitted on DATA's `split`."""
    import sacrebleu

    src_lang, tgt_lang = languages(data)
    paths = [data / "raw" / f"{split}.{lang}" for lang in (src_lang, tgt_lang)]
    for path in paths:
        if not path.is_file():
            raise MtkitError(f"{path} is missing: the calibrator is fitted on DATA's {split} split.")
    sources, references = (read_lines_strict(p) for p in paths)
    if len(sources) != len(references):
        raise MtkitError(f"{paths[0]} and {paths[1]} have different numbers of lines.")
    # Line by line, not split into sentences: a reference is a line's (a one-sentence line is the same either way).
    config = dataclasses.replace(translator.defaults if config is None else config, split=False)
    translations = list(translator.translate_stream(sources, config, batch_tokens))
    rows = features(translator, sources, translations, config, reverse)
    chrf = sacrebleu.metrics.CHRF()
    kept = [i for i, row in enumerate(rows) if row is not None]
    found = [rows[i] for i in kept]
    scores = [chrf.sentence_score(translations[i].text, [references[i]]).score for i in kept]
    good = sum(s >= threshold for s in scores)
    if not FOLDS <= good <= len(scores) - FOLDS:
        raise MtkitError(
            f"{good} of the {len(scores)} translations of {paths[0]} are acceptable (chrF >= {threshold:g}): a "
            f"calibrator needs at least {FOLDS} of each kind; change --threshold or fit on more sentences."
        )
    heads = {FORWARD: FORWARD_FEATURES, **({BACKWARD: BACKWARD_FEATURES} if reverse is not None else {})}
    fitted, dev = {}, {"sentences": len(kept), "acceptable": good / len(kept)}
    dev["spearman_score"] = spearman([r["score"] for r in found], scores)
    for name, names in heads.items():
        # the backward head is fitted on the pairs the reverse model could score (mtkit/decode/confidence.py: fits)
        some = [(r, s) for r, s in zip(found, scores) if set(names) <= set(r)]
        rows_of, chrf_of = [r for r, _ in some], [s for _, s in some]
        fitted[name] = fit_head(names, rows_of, [s >= threshold for s in chrf_of])
        dev[f"spearman_{name}"] = spearman(cross_validated(names, rows_of, chrf_of, threshold), chrf_of)
        dev[f"spearman_{name}_by_threshold"] = {
            f"{t:g}": spearman(cross_validated(names, rows_of, chrf_of, t), chrf_of)
            for t in SWEEP
            if FOLDS <= sum(s >= t for s in chrf_of) <= len(chrf_of) - FOLDS  # every fold learns from both kinds
        }
    fitted_on = {
        "data": str(data),
        "split": split,
        "languages": [src_lang, tgt_lang],
        "model": translator.describe().get("path"),
        "reverse_model": None if reverse is None else reverse.describe().get("path"),
        "decoding": {
            "beam": config.beam,
            "alpha": config.alpha,
            "lenpen": config.lenpen,
            "early_stop": config.early_stop,
        },
        "metric": f"sentence chrF ({chrf.get_signature()})",
        "dev": dev,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    return Calibrator(threshold, fitted, fitted_on)


def cross_validated(
    names: list[str], rows: Sequence[dict[str, float]], chrf: Sequence[float], threshold: float
) -> list[float]:
    """Each row's probability of chrF >= `threshold` by a head fitted on the other folds (rows dealt to FOLDS folds
    in turn): what the dev figures are made of, so that no sentence rates itself."""
    acceptable = [s >= threshold for s in chrf]
    out = [0.0] * len(rows)
    for fold in range(FOLDS):
        train = [i for i in range(len(rows)) if i % FOLDS != fold]
        head = fit_head(names, [rows[i] for i in train], [acceptable[i] for i in train])
        for i in range(fold, len(rows), FOLDS):
            out[i] = head.probability(rows[i])
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (ties share their mean rank): Pearson's of the ranks."""
    import numpy as np

    def ranks(x: Sequence[float]) -> Any:
        values, inverse, counts = np.unique(np.asarray(x, dtype=np.float64), return_inverse=True, return_counts=True)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return (first + (counts - 1) / 2.0)[inverse]  # the mean of the ranks first .. first + count - 1

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])
