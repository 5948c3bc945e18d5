"""The trainer's data: opened and checked against the model, its language pairs, the batch plans, and each epoch's
batches on this rank.

A data directory is a mix of language pairs (fairseq's TranslationMultiSimpleEpochTask, which the trainer calls
without asking what it is): a bilingual directory is a mix of one pair over all its lines, a multilingual one
(mtkit/data/multilingual.py) lists its pairs and their lines. Either way one batch plan (the pairs mixed by
temperature: mtkit/data/pair_sampling.py, which for one pair is the plain plan of every sentence), one set of dev
batches and one --valid-bleu sample per pair, and one validation (mtkit/train/validation.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.batching import BatchPlan, bucket_lengths, epoch_batches, epoch_order, plan_batches, shard_all
from mtkit.data.buckets import bucketed
from mtkit.data.dataset import DataDir, ParallelSplit, open_data
from mtkit.data.multilingual import pairs_of
from mtkit.data.pair_sampling import pair_counts, pair_plan
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.score import DEFAULT_TOKENIZE, check_tokenize, default_tokenize
from mtkit.train import distributed as dist

CHECKED_SPLITS = ("train", "valid")  # the splits whose batches and scores a resumed run depends on
logger = logging.getLogger(__name__)

BleuSample = tuple[list[str], list[str]]  # --valid-bleu's raw dev sources and references of one pair


@dataclass(frozen=True)
class Pair:
    """One language pair of the data: its name (`en-de`) and its lines [a, b) in train and in valid."""

    name: str
    train: tuple[int, int]
    valid: tuple[int, int]
    tokenize: str = DEFAULT_TOKENIZE  # sacreBLEU's tokenizer for its target language, as `mtkit score` picks it


@dataclass(frozen=True)
class TrainingData:
    """A data directory checked against the model: what the trainer reads, and what its checkpoints record."""

    dir: DataDir
    vocab: bytes  # spm.model's bytes, saved in every checkpoint so that a model can always be decoded
    spm: Vocab
    corpus: dict[str, dict[str, str]]  # `corpus_of`: what a resumed run must have been trained on
    train: ParallelSplit
    valid: ParallelSplit
    pairs: tuple[Pair, ...]  # one for a bilingual directory
    bleu_samples: tuple[BleuSample, ...]  # one per pair with --valid-bleu; none without


def open_training_data(path: Path, model_cfg: ModelConfig, valid_bleu: int = 0) -> TrainingData:
    """The data directory, refused in one sentence when it does not fit the model (or lacks --valid-bleu's text)."""
    data = open_data(path)
    spm = data.tokenizer()  # mtkit's SentencePiece model, or an OPUS-MT model's (`mtkit bpe --from`)
    vocab = spm.proto
    check_vocab(data, spm, model_cfg)
    train, valid = data.split("train"), data.split("valid")
    pairs = pairs_in(data, train, valid)
    samples = bleu_samples(data, pairs, valid_bleu) if valid_bleu else ()
    if valid_bleu:
        for pair in pairs:  # a missing MeCab is said now, not at the first validation
            check_tokenize(pair.tokenize)
    check_token_ids(data, (train, valid), model_cfg)
    return TrainingData(data, vocab, spm, corpus_of(data), train, valid, pairs, samples)


def pairs_in(data: DataDir, train: ParallelSplit, valid: ParallelSplit) -> tuple[Pair, ...]:
    """The pairs a multilingual directory lists (bpe.json's `pairs`); a bilingual directory's one, every line."""
    entries = pairs_of(data.info)
    if not entries:
        name, tokenize = f"{data.src_lang}-{data.tgt_lang}", default_tokenize(data.tgt_lang)
        return (Pair(name, (0, len(train)), (0, len(valid)), tokenize),)
    return tuple(
        Pair(
            f"{e['src']}-{e['tgt']}",
            tuple(e["lines"]["train"]),  # type: ignore[arg-type]
            tuple(e["lines"]["valid"]),  # type: ignore[arg-type]
            default_tokenize(e["tgt"]),
        )
        for e in entries
    )


def corpus_of(data: DataDir) -> dict[str, dict[str, str]]:
    """bpe.json's sha256 of each raw input file, for the splits a resumed run depends on."""
    splits = data.info.get("splits", {})
    return {split: dict(splits[split].get("inputs", {})) for split in CHECKED_SPLITS if split in splits}


def bleu_samples(data: DataDir, pairs: tuple[Pair, ...], n: int) -> tuple[BleuSample, ...]:
    """Each pair's first n raw dev pairs (sources with their language token, as `mtkit translate` reads them):
    sacreBLEU scores detokenized text against the real references."""
    paths = [data.path / "raw" / f"valid.{lang}" for lang in (data.src_lang, data.tgt_lang)]
    for path in paths:
        if not path.is_file():
            raise MtkitError(f"--valid-bleu needs the raw dev text {path} that `mtkit prepare` writes.")

    def head(path: Path, a: int, b: int) -> list[str]:
        with open(path, encoding="utf-8", newline="\n") as f:  # a CR inside a line stays in it: pairs stay aligned
            return [line.rstrip("\n") for line in itertools.islice(f, a, min(b, a + n))]

    return tuple((head(paths[0], *pair.valid), head(paths[1], *pair.valid)) for pair in pairs)


@dataclass(frozen=True)
class Epoch:
    """This rank's batches of one epoch, and every rank's summed token counts at each local batch index."""

    batches: list[np.ndarray]
    tgt_tokens: np.ndarray  # (per_rank,)
    real_and_padded: np.ndarray  # (per_rank, 2): src + tgt tokens, real and padded


def plan_data(
    data: TrainingData, cfg: TrainConfig, world: dist.World, max_positions: int
) -> tuple[BatchPlan, list[list[np.ndarray]]]:
    """The training batch plan (the pairs mixed by --pair-temperature), and this rank's share of each pair's
    validation batches."""
    kind = cfg.length_buckets  # resolved by then (mtkit/train/compile.py): none, ladder or x8
    max_tokens = int(cfg.max_tokens)  # resolved by then (mtkit/train/probe.py)
    buckets = None if kind == "none" else bucket_lengths(kind, min(max_tokens, max_positions))
    train, valid, ranges = data.train, data.valid, [p.train for p in data.pairs]
    temperature = cfg.pair_temperature
    train_plan = pair_plan(
        train.src_sizes, train.tgt_sizes, ranges, temperature, max_tokens, cfg.seed, max_positions, buckets
    )
    if len(train_plan) < world.size:
        raise MtkitError(
            f"the training data makes {len(train_plan)} batch(es) of --max-tokens {cfg.max_tokens}, "
            f"fewer than the {world.size} processes; lower --max-tokens or use fewer processes."
        )
    if len(data.pairs) > 1:
        counts = pair_counts(train_plan, ranges)
        logger.info(
            "language pairs mixed by temperature %g (sentences an epoch): %s",
            temperature,
            ", ".join(f"{p.name} {n} ({n / max(sum(counts), 1):.1%})" for p, n in zip(data.pairs, counts)),
        )
    valid_batches = []
    for pair in data.pairs:
        a, b = pair.valid
        one = plan_batches(valid.src_sizes[a:b], valid.tgt_sizes[a:b], max_tokens, cfg.seed, max_positions, buckets)
        valid_batches.append([batch + a for batch in shard_all(one, world.rank, world.size)])
    return train_plan, valid_batches


def bucket_data(data: TrainingData, cfg: TrainConfig, max_positions: int) -> TrainingData:
    """`data` whose batches come padded to their bucket's shape (mtkit/data/buckets.py), where cfg buckets them."""
    if cfg.length_buckets == "none":
        return data
    train, valid = bucketed((data.train, data.valid), cfg.length_buckets, cfg.max_tokens, max_positions)
    return dataclasses.replace(data, train=train, valid=valid)


def epoch_of(plan: BatchPlan, number: int, world: dist.World) -> Epoch:
    order = epoch_order(plan, number, world.size)  # (per_rank, W): every rank's batch at each local index
    real = (plan.src_tokens + plan.tgt_tokens)[order].sum(1)
    padded = (plan.src_padded + plan.tgt_padded)[order].sum(1)
    return Epoch(
        epoch_batches(plan, number, world.rank, world.size),
        plan.tgt_tokens[order].sum(1),
        np.stack([real, padded], axis=1),
    )


def check_vocab(data: DataDir, vocab: Vocab, model_cfg: ModelConfig) -> None:
    if len(vocab) != data.vocab_size:
        raise MtkitError(
            f"{data.spm_path} has {len(vocab)} pieces but {data.path}/bpe.json says vocab_size "
            f"{data.vocab_size}; rebuild the data with `mtkit bpe`."
        )
    if model_cfg.vocab_size != data.vocab_size or model_cfg.target_vocab_size != data.vocab_size:
        raise MtkitError(
            f"the model's vocab_size {model_cfg.vocab_size} does not match the data's vocabulary of "
            f"{data.vocab_size} pieces ({data.path}/bpe.json); drop the vocab_size override."
        )


def check_token_ids(data: DataDir, splits: tuple[ParallelSplit, ...], model_cfg: ModelConfig) -> None:
    for split in splits:
        if split.max_id() >= model_cfg.vocab_size:
            raise MtkitError(
                f"{data.path}/bin/{split.name} holds token id {split.max_id()}, but the vocabulary "
                f"has {model_cfg.vocab_size} entries; rebuild the data with `mtkit bpe`."
            )
