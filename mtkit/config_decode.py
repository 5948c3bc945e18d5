"""The decoding settings (section 6.1: beam search, and sampling instead of it), typed and validated like the rest.

One concept: what `translate` and `serve` are asked for about a search (DecodeConfig, SamplingConfig) and how the
engine runs it (EngineConfig). mtkit/config.py holds the training and model settings and re-exports these
("X as X"), so that `from mtkit.config import DecodeConfig` is where callers take every setting from.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtkit.config_fields import check_choices, check_field, check_positive, option
from mtkit.precision import AUTO_RULE, DECODE_PRECISION_CHOICES

LENPEN_CHOICES = ("gnmt", "fairseq", "none")
EARLY_STOP_CHOICES = ("exact", "patience", "none")


@dataclass(frozen=True)
class DecodeConfig:
    """Beam search settings of section 6.1: beam 4, length penalty alpha 0.6, max length input + 50.

    The length penalty is GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, Eq. 14);
    "fairseq" is |Y|^alpha and "none" ranks by the plain sum of log-probabilities. |Y|
    counts the end-of-sentence token, as tensor2tensor and fairseq do. The longest output
    for a source of n subword tokens is floor(max_len_a * n + max_len_b) tokens before EOS.
    """

    beam: int = option(4, "Beam size; 1 is greedy search.")
    alpha: float = option(0.6, "Length penalty exponent (0 ranks by plain log-probability).")
    lenpen: str = option(
        "gnmt", "Length penalty formula: gnmt ((5+|Y|)/6)^alpha, fairseq |Y|^alpha, or none.", LENPEN_CHOICES
    )
    max_len_a: float = option(1.0, "Longest output = a x source tokens + b.")
    max_len_b: int = option(50, "Longest output = a x source tokens + b.")
    nbest: int = option(1, "Write the K best as LINE<TAB>TRANSLATION<TAB>SCORE, K lines per input.")
    early_stop: str = option(
        "patience",
        "patience: stop once `beam` hypotheses end (fairseq, CTranslate2); exact: "
        "once none live can win (the paper; up to 1.4x the time); none: at the length limit.",
        EARLY_STOP_CHOICES,
    )
    shortlist: bool = option(
        False,
        "Restrict the output layer to the model's lexical shortlist (`mtkit shortlist`): each batch's candidate "
        "pieces and the most frequent ones. On by default for a model that carries one; --no-shortlist: all.",
    )
    split: bool = option(
        True,
        "Split each line into sentences, translate them, and join them back on its line (one output line an "
        "input line); --no-split: each line translated whole, as one segment.",
    )

    def __post_init__(self) -> None:
        check_choices(self)
        check_positive(self, "beam", "nbest")
        check_field(
            isinstance(self.alpha, (int, float))
            and self.alpha >= 0
            and self.alpha == self.alpha
            and self.alpha != float("inf"),
            type(self),
            "alpha",
            "a finite number >= 0",
            self.alpha,
        )
        check_field(
            isinstance(self.max_len_a, (int, float)) and 0 <= self.max_len_a < float("inf"),
            type(self),
            "max_len_a",
            "a finite number >= 0",
            self.max_len_a,
        )
        check_field(
            isinstance(self.max_len_b, int) and self.max_len_b >= 0,
            type(self),
            "max_len_b",
            "an integer >= 0",
            self.max_len_b,
        )
        check_field(self.nbest <= self.beam, type(self), "nbest", f"at most beam={self.beam}", self.nbest)


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling instead of beam search (back-translation, Edunov et al. 2018): temperature, then top-k, then top-p.

    Each sample has its own random stream, seeded by (seed, the source's subword ids, the sample's
    index), so a sentence gets the same samples alone or in any batch. `samples` is set by --nbest.
    """

    topk: int = option(0, "With --sampling: draw from the K most probable tokens only (0: all; 1: greedy).")
    topp: float = option(
        1.0,
        "With --sampling: draw from the smallest set of tokens whose probability reaches P (nucleus sampling; 1: all).",
    )
    temperature: float = option(1.0, "With --sampling: divide the logits by T (< 1 sharper, > 1 flatter).")
    seed: int = option(1, "With --sampling: the seed; the same seed gives the same samples.")
    samples: int = 1  # independent samples per sentence (--nbest on the command line)

    def __post_init__(self) -> None:
        check_positive(self, "samples")
        check_field(
            isinstance(self.topk, int) and self.topk >= 0,
            type(self),
            "topk",
            "0 (all) or a positive integer",
            self.topk,
        )
        check_field(
            isinstance(self.topp, (int, float)) and 0.0 < self.topp <= 1.0,
            type(self),
            "topp",
            "a number in (0, 1]",
            self.topp,
        )
        check_field(
            isinstance(self.temperature, (int, float)) and 0.0 < self.temperature < float("inf"),
            type(self),
            "temperature",
            "a finite number > 0",
            self.temperature,
        )
        check_field(isinstance(self.seed, int) and self.seed >= 0, type(self), "seed", "an integer >= 0", self.seed)


# `--compile` of translate and serve: mtkit's decoder step compiled for one-sentence searches (mtkit/decode/compiled.py)
COMPILE = ("off", "on", "auto")


@dataclass(frozen=True)
class EngineConfig:
    """How the engine runs a model for `translate` and `serve` (where it runs is --device): one declaration of
    --precision for both commands."""

    precision: str = option(
        "fp32",
        "fp32, bf16, fp16 (CUDA only), int8 (CPU only: dynamic int8 Linear layers; faster, BLEU within "
        f"a few tenths), or auto. {AUTO_RULE}",
        DECODE_PRECISION_CHOICES,
    )

    def __post_init__(self) -> None:
        check_choices(self)
