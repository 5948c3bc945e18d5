"""Typed, validated settings whose defaults are the paper's numbers (Vaswani et al. 2017).

Every config is a frozen dataclass checked on creation: a bad value raises an MtkitError
that names the field and what it accepts. The resolved ModelConfig travels inside every
checkpoint, so `translate` and `average` never take architecture flags.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# The decoding settings live in mtkit/config_decode.py; re-exported here ("X as X"), where callers import them from.
from mtkit.config_decode import EARLY_STOP_CHOICES as EARLY_STOP_CHOICES
from mtkit.config_decode import LENPEN_CHOICES as LENPEN_CHOICES
from mtkit.config_decode import DecodeConfig as DecodeConfig
from mtkit.config_decode import EngineConfig as EngineConfig
from mtkit.config_decode import SamplingConfig as SamplingConfig

# The field machinery lives in mtkit/config_fields.py; its public names are re-exported here ("X as X"), where
# callers import them from.
from mtkit.config_fields import ConfigError as ConfigError
from mtkit.config_fields import check_choices, check_field, check_positive, check_probability, choice
from mtkit.config_fields import config_diff as config_diff
from mtkit.config_fields import config_from_dict as config_from_dict
from mtkit.config_fields import option as option
from mtkit.config_fields import parse_overrides as parse_overrides
from mtkit.errors import MtkitError
from mtkit.precision import AUTO_RULE

# Precision's one word lives in mtkit/precision.py; re-exported here, where callers import the choices from.
from mtkit.precision import DECODE_PRECISION_CHOICES as DECODE_PRECISION_CHOICES
from mtkit.precision import PRECISION_CHOICES as PRECISION_CHOICES

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # fixed SentencePiece ids (docs/architecture.md, "Conventions")

SHARE_CHOICES = ("all", "decoder", "none")
COMPILE_CHOICES = ("on", "off", "auto")  # a YAML --config file reads on/off as booleans: __post_init__ takes those
LENGTH_BUCKET_CHOICES = ("auto", "none", "ladder", "x8")
ACTIVATION_CHOICES = ("relu", "swish")  # Eq. (2)'s ReLU; swish (SiLU) is what OPUS-MT's Marian models use

DEFAULT_BATCH_TOKENS = 4096  # decoding: source tokens per batch, padding included
DEFAULT_CHUNK_LINES = 1000  # decoding: lines read ahead and sorted together (`--buffer-size`)
EXPORT_FORMATS = ("ctranslate2", "huggingface")
EXPORT_QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16")


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
    dropout: float = option(0.1, "P_drop: on sub-layer outputs and embedding + position sums (5.4).")
    attention_dropout: float = 0.0  # not in the paper; fairseq and tensor2tensor offer it
    activation_dropout: float = 0.0  # inside the feed-forward block; not in the paper
    max_positions: int = 1024
    share_embeddings: str = choice("all", SHARE_CHOICES)  # "all": src, tgt, output share one matrix (3.4)
    pre_norm: bool = False  # the paper is post-norm; pre-norm is an extra, never the default
    activation: str = option(
        "relu",
        "The feed-forward activation of Eq. (2): relu (the paper's) or swish (x sigmoid(x), as OPUS-MT models have).",
        ACTIVATION_CHOICES,
    )
    output_bias: bool = False  # a fixed bias on the logits (Marian's final_logits_bias, a buffer); not in the paper
    # At the length limit EOS gets probability 1, as Transformers' `forced_eos_token_id` makes it (set for OPUS-MT
    # models whose config.json asks for it); otherwise the search allows only EOS there but scores it as the model does.
    forced_eos: bool = False

    def __post_init__(self) -> None:
        check_choices(self)
        check_positive(
            self, "vocab_size", "d_model", "d_ff", "heads", "encoder_layers", "decoder_layers", "max_positions"
        )
        if self.tgt_vocab_size is not None:
            check_positive(self, "tgt_vocab_size")
        check_probability(self, "dropout", "attention_dropout", "activation_dropout")
        check_field(
            self.d_model % self.heads == 0, type(self), "d_model", f"divisible by heads={self.heads}", self.d_model
        )
        check_field(
            self.d_model % 2 == 0, type(self), "d_model", "even (sinusoidal positions pair sin and cos)", self.d_model
        )
        check_field(
            self.share_embeddings != "all" or self.target_vocab_size == self.vocab_size,
            type(self),
            "share_embeddings",
            "'decoder' or 'none' when source and target vocabularies differ",
            self.share_embeddings,
        )

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    @property
    def d_k(self) -> int:
        return self.d_model // self.heads


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of section 5 (5.3 optimizer, 5.4 regularization) and the run's cadence."""

    max_tokens: int | str = option(
        4096,
        "Tokens per batch and side, padding included; auto: on a GPU the most that fit, probed at start "
        "(mtkit/train/probe.py), on a CPU the preset's value.",
    )
    max_tokens_fallback: int = 4096  # what --max-tokens auto is where nothing is probed: the preset's max_tokens
    update_freq: int = option(
        1, "Batches accumulated per update on each process (given: wins over the preset's ~25k tokens per update)."
    )
    # > 0: when --update-freq is not given, update_freq = ceil(update_tokens / (max_tokens x ranks)),
    # so an update holds about this many tokens per side whatever the world size (5.1: ~25k).
    update_tokens: int = 0
    lr_scale: float = option(1.0, "Factor on the paper's learning-rate schedule.")
    warmup: int = option(4000, "Warmup updates of the schedule.")
    label_smoothing: float = option(0.1, "Label smoothing epsilon.")
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    max_steps: int = option(100_000, "Stop after this many updates.")
    max_epochs: int = option(0, "Stop after this many epochs (0: no limit).")
    clip_norm: float = option(0.0, "Clip the gradient norm to this (0: off, as in the paper).")
    seed: int = option(1, "Seed for weights, dropout and batch order.")
    precision: str = option(
        "auto", f"auto, fp32, bf16 (autocast) or fp16 (with a loss scaler). {AUTO_RULE}", PRECISION_CHOICES
    )
    compile: str = option(
        "auto",
        "torch.compile the model and the loss: auto (off until measured faster: eager on a CUDA GPU for now, "
        "under torchrun and on a CPU; a failed compilation goes on eagerly), on (stops if compiling fails) or off.",
        COMPILE_CHOICES,
    )
    length_buckets: str = option(
        "auto",
        "Batch shapes: auto (ladder when compiling, else none), none (each batch as long as its longest "
        "pair), ladder (lengths 8, 10, ..., 32, 40, 48, ... about 2^(1/4) apart: ~12 shapes an epoch on "
        "Multi30k) or x8 (multiples of 8).",
        LENGTH_BUCKET_CHOICES,
    )
    pair_temperature: float = option(
        5.0,
        "Multilingual data: language pair k is sampled with probability proportional to its share of the "
        "sentences to the power 1/T (1: by size; 5: the multilingual literature's, as in fairseq's examples).",
    )
    valid_every: int = option(1000, "Updates between validations.")
    patience: int = option(0, "Stop after this many validations without a new best (0: never).")
    valid_bleu: int = option(
        0,
        "Also translate the first N dev sentences greedily at each validation and pick "
        "checkpoint_best.pt by their sacreBLEU (0: off; best by validation loss).",
    )
    max_minutes: float = option(
        0.0,
        "Stop after this many minutes of training wall-clock (validation and saving "
        "included; a resumed run continues its budget; 0: no budget).",
    )
    lr_cooldown: float = option(
        0.0,
        "Take the learning rate linearly down to 0 over this last fraction of the budget, "
        "--max-minutes or --max-steps, whichever runs out first (e.g. 0.2; 0: off, the paper's "
        "schedule). With --max-minutes the rate follows the wall-clock; a patience or epoch stop "
        "does not wait for it.",
    )
    save_every_steps: int = option(0, "Save a checkpoint every this many updates (0: off).")
    save_every_minutes: float = option(10.0, "Save a checkpoint every this many minutes (0: off; the paper: 10).")
    keep_last: int = option(5, "Keep the newest N numbered checkpoints (the paper averages the last 5 / 20).")
    log_every: int = option(100, "Updates between log lines (also the only host syncs for metrics).")
    tensorboard: bool = option(
        False,
        "Also write every metrics.jsonl value, with its wall time, as TensorBoard "
        "scalars under RUN/tb/ (needs the tensorboard extra: pip install "
        "'mtkit\\[tensorboard]').",
    )
    max_nonfinite: int = 10  # non-finite losses in a row that stop the run

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, str) and self.max_tokens.isdigit():  # the command line's, or YAML's "4096"
            object.__setattr__(self, "max_tokens", int(self.max_tokens))
        ok = self.max_tokens == "auto" or (type(self.max_tokens) is int and self.max_tokens > 0)
        check_field(ok, type(self), "max_tokens", "a positive integer or auto", self.max_tokens)
        check_positive(
            self,
            "max_tokens_fallback",
            "update_freq",
            "warmup",
            "max_steps",
            "valid_every",
            "keep_last",
            "log_every",
            "max_nonfinite",
        )
        for name in ("update_tokens", "max_epochs", "patience", "save_every_steps", "valid_bleu"):
            value = getattr(self, name)
            check_field(isinstance(value, int) and value >= 0, type(self), name, "0 (off) or a positive integer", value)
        check_probability(self, "label_smoothing")
        check_field(self.lr_scale > 0, type(self), "lr_scale", "positive", self.lr_scale)
        check_field(self.pair_temperature > 0, type(self), "pair_temperature", "positive", self.pair_temperature)
        check_field(self.clip_norm >= 0, type(self), "clip_norm", "0 (off) or positive", self.clip_norm)
        check_field(
            self.save_every_minutes >= 0,
            type(self),
            "save_every_minutes",
            "0 (off) or positive",
            self.save_every_minutes,
        )
        check_field(self.max_minutes >= 0, type(self), "max_minutes", "0 (no budget) or positive", self.max_minutes)
        check_field(0 <= self.lr_cooldown <= 1, type(self), "lr_cooldown", "a fraction in [0, 1]", self.lr_cooldown)
        if isinstance(self.compile, bool):  # `compile: off` in a --config file (YAML 1.1 booleans)
            object.__setattr__(self, "compile", "on" if self.compile else "off")
        check_choices(self)  # precision, compile, length_buckets: named as fields, as the others are
        check_field(
            len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas),
            type(self),
            "adam_betas",
            "two numbers in [0, 1)",
            self.adam_betas,
        )

    def for_world(self, world_size: int) -> TrainConfig:
        """Resolve `update_tokens` into `update_freq` for this many ranks (section 5.1's ~25k tokens), once
        max_tokens is a number: a run calls it once, last of its settings (mtkit/train/settings.py)."""
        if self.update_tokens <= 0 or not isinstance(self.max_tokens, int):
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
        ModelConfig(d_model=64, d_ff=128, heads=4, encoder_layers=2, decoder_layers=2, max_positions=256),
        TrainConfig(
            max_tokens=1024,
            warmup=200,
            lr_scale=2.0,
            max_steps=2000,
            valid_every=200,
            log_every=10,
            save_every_minutes=0.0,
            save_every_steps=500,
        ),
        "2+2 layers, 64/128, 4 heads: for tests and smoke runs",
    ),
    "small": Preset(
        "small",
        ModelConfig(
            d_model=256, d_ff=1024, heads=4, encoder_layers=3, decoder_layers=3, dropout=0.1, max_positions=512
        ),
        # Measured by recipes/multi30k-en-de (37.35 BLEU in 25 CPU minutes): batches of 2,048 tokens
        # run faster per token than 4,096 on 2 cores, and a 2e-3 peak after 400 updates suits ~2k updates.
        TrainConfig(
            max_tokens=2048, warmup=400, lr_scale=0.64, max_steps=20_000, valid_every=200, log_every=50, patience=10
        ),
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
    # Students (`mtkit distill`, docs/distill.md): a deep encoder and a shallow decoder (Kasai et al. 2021), as
    # Bergamot's tiny students are (6 encoder layers, 2 decoder layers, 256 wide): the encoder runs once a
    # sentence, the decoder once a token, so decoder layers are what a greedy search pays for. Pre-norm: post-norm,
    # this shape collapsed on Multi30k's distilled data with the schedule that trains `small` (2e-3 after 400
    # updates): by 680 updates its decoder ignored the source (dev greedy BLEU 2.9, `small` 20.5 at 600), as deep
    # post-norm stacks do without a long warmup (Wang et al. 2019, Xiong et al. 2020). CTranslate2 runs pre-norm.
    "student-tiny": Preset(
        "student-tiny",
        ModelConfig(
            d_model=256, d_ff=1024, heads=4, encoder_layers=6, decoder_layers=2, max_positions=512, pre_norm=True
        ),
        TrainConfig(
            max_tokens=2048, warmup=400, lr_scale=0.64, max_steps=20_000, valid_every=200, log_every=50, patience=10
        ),
        "student: 6+2 layers, 256/1024, 4 heads, pre-norm; trained on `mtkit distill` data, greedy by default",
    ),
    "student-fast": Preset(
        "student-fast",
        ModelConfig(
            d_model=256, d_ff=1024, heads=4, encoder_layers=6, decoder_layers=1, max_positions=512, pre_norm=True
        ),
        TrainConfig(
            max_tokens=2048, warmup=400, lr_scale=0.64, max_steps=20_000, valid_every=200, log_every=50, patience=10
        ),
        "student: 6+1 layers, 256/1024, 4 heads, pre-norm: one decoder layer, the fastest search",
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
class ExportConfig:
    """What `mtkit export` writes (mtkit/export/): the target format and how the weights are stored.

    Here, not in mtkit/export/, so that the command line can declare its options without importing torch.
    """

    format: str = option("ctranslate2", "Target format.", EXPORT_FORMATS)
    quantization: str = option(
        "float32",
        "Weight type in the exported model (ctranslate2: any, converted on load if a device cannot run it; "
        "huggingface: float32 or float16).",
        EXPORT_QUANTIZATIONS,
    )

    def __post_init__(self) -> None:
        check_choices(self)
