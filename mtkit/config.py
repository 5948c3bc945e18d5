"""Typed, validated settings whose defaults are the paper's numbers (Vaswani et al. 2017).

Every config is a frozen dataclass checked on creation: a bad value raises an MtkitError
that names the field and what it accepts. The resolved ModelConfig travels inside every
checkpoint, so `translate` and `average` never take architecture flags.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

from mtkit.errors import MtkitError

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # fixed SentencePiece ids (DESIGN.md, "Data on disk")

SHARE_CHOICES = ("all", "decoder", "none")
PRECISION_CHOICES = ("fp32", "bf16", "fp16")
LENPEN_CHOICES = ("gnmt", "fairseq", "none")

C = TypeVar("C")


def _check(ok: bool, cls: type, name: str, expected: str, value: Any) -> None:
    if not ok:
        raise MtkitError(f"{cls.__name__}.{name} must be {expected}, got {value!r}.")


def _positive(cfg: Any, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        _check(isinstance(value, int) and value > 0, type(cfg), name, "a positive integer", value)


def _probability(cfg: Any, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and 0.0 <= value < 1.0, type(cfg), name,
               "a number in [0, 1)", value)


def config_from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
    """Rebuild a config from JSON-like data, naming every unknown field at once."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise MtkitError(
            f"unknown {cls.__name__} field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(known))}."
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**values)


def config_diff(a: Any, b: Any) -> list[str]:
    """Human-readable list of fields whose values differ between two configs of one type."""
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return [f"{k}: {da.get(k)!r} != {db.get(k)!r}" for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)]


def parse_overrides(items: list[str] | tuple[str, ...], cls: type) -> dict[str, Any]:
    """`field=value` strings (e.g. from `--set`) typed by the field's default; the config validates the values."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip().replace("-", "_"), text.strip()
        if not sep or name not in fields:
            raise MtkitError(f"--set {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(sorted(fields))}.")
        default = fields[name].default
        try:
            if isinstance(default, bool):
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                value: Any = text.lower() in ("true", "1", "yes")
            elif isinstance(default, int) or (default is None and text.lower() != "none"):
                value = int(text)
            elif default is None:
                value = None
            elif isinstance(default, float):
                value = float(text)
            else:
                value = text
        except ValueError:
            kind = "true or false" if isinstance(default, bool) else type(default).__name__ if default is not None \
                else "an integer or none"
            raise MtkitError(f"--set {item!r}: {cls.__name__}.{name} must be {kind}.") from None
        out[name] = value
    return out


@dataclass(frozen=True)
class ModelConfig:
    """The architecture (paper section 3, Table 3). Defaults are the `base` model."""

    vocab_size: int = 37000  # joint BPE vocabulary (section 5.1)
    tgt_vocab_size: int | None = None  # None: same as vocab_size (joint vocabulary)
    d_model: int = 512
    d_ff: int = 2048
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1  # P_drop: sub-layer outputs and embedding+position sums (5.4)
    attention_dropout: float = 0.0  # not in the paper; fairseq and tensor2tensor offer it
    activation_dropout: float = 0.0  # inside the feed-forward block; not in the paper
    max_positions: int = 1024
    share_embeddings: str = "all"  # "all": src, tgt, output share one matrix (3.4)
    pre_norm: bool = False  # the paper is post-norm; pre-norm is an extra, never the default

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "d_model", "d_ff", "heads", "encoder_layers",
                  "decoder_layers", "max_positions")
        if self.tgt_vocab_size is not None:
            _positive(self, "tgt_vocab_size")
        _probability(self, "dropout", "attention_dropout", "activation_dropout")
        _check(self.d_model % self.heads == 0, type(self), "d_model",
               f"divisible by heads={self.heads}", self.d_model)
        _check(self.d_model % 2 == 0, type(self), "d_model",
               "even (sinusoidal positions pair sin and cos)", self.d_model)
        _check(self.share_embeddings in SHARE_CHOICES, type(self), "share_embeddings",
               f"one of {', '.join(SHARE_CHOICES)}", self.share_embeddings)
        _check(self.share_embeddings != "all" or self.target_vocab_size == self.vocab_size,
               type(self), "share_embeddings",
               "'decoder' or 'none' when source and target vocabularies differ", self.share_embeddings)

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of section 5 (5.3 optimizer, 5.4 regularization) and the run's cadence."""

    max_tokens: int = 4096  # per batch and side, padding included
    update_freq: int = 1  # batches accumulated per update (per rank)
    # > 0: when --update-freq is not given, update_freq = ceil(update_tokens / (max_tokens x ranks)),
    # so an update holds about this many tokens per side whatever the world size (5.1: ~25k).
    update_tokens: int = 0
    lr_scale: float = 1.0  # factor on top of the paper's schedule
    warmup: int = 4000
    label_smoothing: float = 0.1
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    max_steps: int = 100_000
    max_epochs: int = 0  # 0: no limit
    clip_norm: float = 0.0  # 0: off, as in the paper
    seed: int = 1
    precision: str = "fp32"
    valid_every: int = 1000  # updates between validations
    patience: int = 0  # validations without a new best before stopping; 0: never stop early
    valid_bleu: int = 0  # dev sentences translated greedily for sacreBLEU at each validation; 0: off
    max_minutes: float = 0.0  # wall-clock budget of the training loop (resumes add up); 0: none
    save_every_steps: int = 0  # 0: off
    save_every_minutes: float = 10.0  # the paper's cadence; 0: off
    keep_last: int = 5  # newest checkpoint_<step>.pt kept (the paper averages the last 5 / 20)
    log_every: int = 100  # updates between log lines (also the only host syncs for metrics)
    max_nonfinite: int = 10  # non-finite losses in a row that stop the run

    def __post_init__(self) -> None:
        _positive(self, "max_tokens", "update_freq", "warmup", "max_steps", "valid_every", "keep_last",
                  "log_every", "max_nonfinite")
        for name in ("update_tokens", "max_epochs", "patience", "save_every_steps", "valid_bleu"):
            value = getattr(self, name)
            _check(isinstance(value, int) and value >= 0, type(self), name, "0 (off) or a positive integer", value)
        _probability(self, "label_smoothing")
        _check(self.lr_scale > 0, type(self), "lr_scale", "positive", self.lr_scale)
        _check(self.clip_norm >= 0, type(self), "clip_norm", "0 (off) or positive", self.clip_norm)
        _check(self.save_every_minutes >= 0, type(self), "save_every_minutes", "0 (off) or positive",
               self.save_every_minutes)
        _check(self.max_minutes >= 0, type(self), "max_minutes", "0 (no budget) or positive", self.max_minutes)
        _check(self.precision in PRECISION_CHOICES, type(self), "precision",
               f"one of {', '.join(PRECISION_CHOICES)}", self.precision)
        _check(len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas), type(self),
               "adam_betas", "two numbers in [0, 1)", self.adam_betas)

    def for_world(self, world_size: int) -> "TrainConfig":
        """Resolve `update_tokens` into `update_freq` for this many ranks (section 5.1's ~25k tokens)."""
        if self.update_tokens <= 0:
            return self
        per_update = self.max_tokens * world_size
        return dataclasses.replace(self, update_freq=max(1, -(-self.update_tokens // per_update)), update_tokens=0)


@dataclass(frozen=True)
class Preset:
    """A named starting point: an architecture plus the training settings that suit it."""

    name: str
    model: ModelConfig
    train: TrainConfig = field(default_factory=TrainConfig)
    about: str = ""


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        "tiny",
        ModelConfig(d_model=64, d_ff=128, heads=4, encoder_layers=2, decoder_layers=2,
                    max_positions=256),
        TrainConfig(max_tokens=1024, warmup=200, lr_scale=2.0, max_steps=2000, valid_every=200,
                    log_every=10, save_every_minutes=0.0, save_every_steps=500),
        "2+2 layers, 64/128, 4 heads: for tests and smoke runs",
    ),
    "small": Preset(
        "small",
        ModelConfig(d_model=256, d_ff=1024, heads=4, encoder_layers=3, decoder_layers=3,
                    dropout=0.1, max_positions=512),
        # Measured by recipes/multi30k-en-de (37.35 BLEU in 25 CPU minutes): batches of 2,048 tokens
        # run faster per token than 4,096 on 2 cores, and a 2e-3 peak after 400 updates suits ~2k updates.
        TrainConfig(max_tokens=2048, warmup=400, lr_scale=0.64, max_steps=20_000, valid_every=200,
                    log_every=50, patience=10),
        "3+3 layers, 256/1024, 4 heads: Multi30k-sized data on a CPU",
    ),
    "base": Preset(
        "base",
        ModelConfig(),
        TrainConfig(max_steps=100_000, update_tokens=25_000),
        "the paper's base model (Table 3): 6+6 layers, 512/2048, 8 heads, 100k steps",
    ),
    "big": Preset(
        "big",
        ModelConfig(d_model=1024, d_ff=4096, heads=16, dropout=0.3),
        TrainConfig(max_steps=300_000, update_tokens=25_000, keep_last=20),
        "the paper's big model (Table 3): 6+6 layers, 1024/4096, 16 heads, dropout 0.3, 300k steps",
    ),
}


def get_preset(name: str) -> Preset:
    """Look a preset up by name; an unknown name lists the valid ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise MtkitError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}.") from None


def model_config(preset: str, vocab_size: int, /, **overrides: Any) -> ModelConfig:
    """The preset's architecture with a vocabulary size and any field overridden (`vocab_size` too)."""
    base = get_preset(preset).model
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise MtkitError(f"unknown model field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(fields))}.")
    return dataclasses.replace(base, **{"vocab_size": vocab_size, **overrides})


@dataclass(frozen=True)
class DecodeConfig:
    """Beam search settings of section 6.1: beam 4, length penalty alpha 0.6, max length input + 50.

    The length penalty is GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, Eq. 14);
    "fairseq" is |Y|^alpha and "none" ranks by the plain sum of log-probabilities. |Y|
    counts the end-of-sentence token, as tensor2tensor and fairseq do. The longest output
    for a source of n subword tokens is floor(max_len_a * n + max_len_b) tokens before EOS.
    """

    beam: int = 4
    alpha: float = 0.6
    lenpen: str = "gnmt"
    max_len_a: float = 1.0
    max_len_b: int = 50
    nbest: int = 1  # hypotheses returned per sentence, best first

    def __post_init__(self) -> None:
        _positive(self, "beam", "nbest")
        _check(self.lenpen in LENPEN_CHOICES, type(self), "lenpen", f"one of {', '.join(LENPEN_CHOICES)}",
               self.lenpen)
        _check(isinstance(self.alpha, (int, float)) and self.alpha >= 0 and self.alpha == self.alpha
               and self.alpha != float("inf"), type(self), "alpha", "a finite number >= 0", self.alpha)
        _check(isinstance(self.max_len_a, (int, float)) and 0 <= self.max_len_a < float("inf"), type(self),
               "max_len_a", "a finite number >= 0", self.max_len_a)
        _check(isinstance(self.max_len_b, int) and self.max_len_b >= 0, type(self), "max_len_b",
               "an integer >= 0", self.max_len_b)
        _check(self.nbest <= self.beam, type(self), "nbest", f"at most beam={self.beam}", self.nbest)
