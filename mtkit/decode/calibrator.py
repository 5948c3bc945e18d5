"""The confidence calibrator: P(a translation is acceptable | its features) by logistic regression, kept as JSON.

"Acceptable" means a sentence chrF of at least `threshold` against the reference, on the data the calibrator was
fitted on (mtkit/decode/confidence_fit.py, `mtkit calibrate`). A calibrator holds one `Head` per set of features a
decode can give: "forward" (the forward model's own scores, lengths and copies: always there) and "backward" (the
same and a reverse model's score of the source given the translation: when one is given). Each head is a logistic
regression over standardised features: P = sigmoid(bias + sum_i weights_i * (x_i - mean_i) / scale_i).

Why a hand-written fit and not scikit-learn: the model is a dozen weights fitted on a thousand sentences, and
Newton's method for it is fifteen lines of numpy (a dependency already); scikit-learn would bring scipy, joblib and
threadpoolctl to every install for that. Logistic regression fitted by maximum likelihood is calibrated on the data
it was fitted on by construction (the mean prediction equals the observed share, for the bias and for every
feature), which is what the confidence promises; isotonic regression would be as calibrated but only of one score.

The file is JSON, read without executing anything (a model directory may come from anyone), and checked whole: a
file that is not a calibrator is refused in one sentence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mtkit.atomic import write_atomic
from mtkit.errors import MtkitError

FORMAT = 1
FORWARD, BACKWARD = "forward", "backward"
# Acceptable = sentence chrF >= 40 (chrF2, sacreBLEU), chosen on Multi30k's dev set (docs/confidence.md): of the
# thresholds 30-60, 40 and 50 gave the best 5-fold Spearman of the confidence with chrF (0.72); 40 splits the
# small model's dev translations near their median, so both classes have examples to learn from.
DEFAULT_THRESHOLD = 40.0
L2 = 1e-2  # a small ridge on the standardised weights: the forward score and log-probability are close to collinear


@dataclass(frozen=True)
class Head:
    """One logistic regression over named features, each standardised by the fitting data's mean and scale."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float

    def probability(self, values: dict[str, float]) -> float:
        z = self.bias + sum(
            w * (values[name] - m) / s for name, m, s, w in zip(self.features, self.mean, self.scale, self.weights)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@dataclass(frozen=True)
class Calibrator:
    """The heads and what they were fitted for: P(sentence chrF >= threshold) on `fitted_on`'s data."""

    threshold: float
    heads: dict[str, Head]
    fitted_on: dict[str, Any] = field(default_factory=dict)  # data, split, sentences, models, decoding, dev figures

    def head(self, backward: bool) -> Head:
        """The head for a decode with (or without) a reverse model's score."""
        name = BACKWARD if backward else FORWARD
        if name not in self.heads:
            raise MtkitError(
                "this confidence calibrator was fitted without a reverse model: fit it again with --reverse-model, "
                "or drop --reverse-model."
            )
        return self.heads[name]

    def save(self, path: Path) -> None:
        """Written whole or not at all (mtkit/atomic.py)."""
        record = {"format": FORMAT, "what": "mtkit confidence calibrator", **asdict(self)}
        write_atomic(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")

    @staticmethod
    def load(path: Path) -> Calibrator:
        """The calibrator in `path`, or one sentence saying why it is none."""
        try:
            record = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise MtkitError(f"cannot read the confidence calibrator {path}: {exc}") from None
        try:
            return from_record(record)
        except (KeyError, TypeError, ValueError) as exc:
            raise MtkitError(
                f"{path} is not an mtkit confidence calibrator ({exc}); fit one with `mtkit calibrate`."
            ) from None


def from_record(record: Any) -> Calibrator:
    """A Calibrator from its JSON record, every number checked (KeyError/TypeError/ValueError on anything else)."""
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"format {record.get('format') if isinstance(record, dict) else None!r}, not {FORMAT}")
    heads = {}
    for name, h in dict(record["heads"]).items():
        head = Head(
            features=[str(f) for f in h["features"]],
            mean=_numbers(h["mean"]),
            scale=_numbers(h["scale"]),
            weights=_numbers(h["weights"]),
            bias=_numbers([h["bias"]])[0],
        )
        if not (len(head.features) == len(head.mean) == len(head.scale) == len(head.weights)):
            raise ValueError(f"head {name!r} has lists of different lengths")
        if any(s <= 0 for s in head.scale) or not set(head.features) <= set(FEATURES):
            raise ValueError(f"head {name!r} has a scale <= 0 or a feature mtkit does not compute")
        heads[str(name)] = head
    if FORWARD not in heads:
        raise ValueError("no forward head")
    threshold = _numbers([record["threshold"]])[0]
    return Calibrator(threshold, heads, dict(record.get("fitted_on") or {}))


def _numbers(values: Sequence[Any]) -> list[float]:
    out = [float(v) for v in values if not isinstance(v, bool)]
    if len(out) != len(values) or not all(math.isfinite(v) for v in out):
        raise ValueError("a weight is not a finite number")
    return out


# What each feature is (mtkit/decode/confidence.py computes them); the heads name them.
FEATURES = {
    "logprob": "the forward model's log-probability of the translation per token (EOS counted)",
    "score": "the search's score: log-probability over the length penalty",
    "length_ratio": "log((translation pieces + 1) / (source pieces + 1))",
    "length_ratio_sq": "its square: too short and too long both lower the confidence",
    "source_length": "log(source pieces + 1): short captions and long sentences differ in how chrF varies",
    "copied": "the share of the translation's words that are also words of the source",
    "unknown": "the share of the source's pieces the vocabulary does not know",
    "backward": "a reverse model's log-probability of the source given the translation, per token",
}
FORWARD_FEATURES = ["logprob", "score", "length_ratio", "length_ratio_sq", "source_length", "copied", "unknown"]
BACKWARD_FEATURES = [*FORWARD_FEATURES, "backward"]


def fit_head(features: list[str], rows: Sequence[dict[str, float]], acceptable: Sequence[bool]) -> Head:
    """The logistic regression of `acceptable` on `features` of `rows`, by Newton's method with a small ridge."""
    import numpy as np

    X = np.array([[r[f] for f in features] for r in rows], dtype=np.float64)  # (n, d)
    y = np.array(acceptable, dtype=np.float64)  # (n,)
    if len(y) < 2 or y.min() == y.max():
        raise MtkitError(
            "fitting a calibrator needs acceptable and unacceptable translations both; every one of these is "
            f"{'acceptable' if len(y) and y[0] else 'unacceptable'} (change --threshold, or use more sentences)."
        )
    mean, scale = X.mean(0), X.std(0)
    scale[scale == 0] = 1.0  # a constant feature (no unknown pieces at all) gets weight 0 from the ridge
    Z = np.hstack([np.ones((len(X), 1)), (X - mean) / scale])  # (n, 1 + d): the bias's column first
    ridge = np.diag([0.0] + [L2] * len(features))
    w = np.zeros(Z.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(Z @ w)))
        gradient = Z.T @ (p - y) + ridge @ w
        hessian = (Z * (p * (1.0 - p))[:, None]).T @ Z + ridge
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return Head(list(features), mean.tolist(), scale.tolist(), w[1:].tolist(), float(w[0]))
