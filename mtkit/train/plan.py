"""The trainer's data: opened and checked against the model, the batch plans, and each epoch's batches on this rank."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.batching import BatchPlan, bucket_lengths, epoch_batches, epoch_order, plan_batches, shard_all
from mtkit.data.buckets import bucketed
from mtkit.data.dataset import DataDir, ParallelSplit, open_data
from mtkit.data.marian_vocab import load_tokenizer
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.score import DEFAULT_TOKENIZE, check_tokenize, default_tokenize
from mtkit.train import distributed as dist

CHECKED_SPLITS = ("train", "valid")  # the splits whose batches and scores a resumed run depends on


@dataclass(frozen=True)
class TrainingData:
    """A data directory checked against the model: what the trainer reads, and what its checkpoints record."""

    dir: DataDir
    vocab: bytes  # spm.model's bytes, saved in every checkpoint so that a model can always be decoded
    spm: Vocab
    corpus: dict[str, dict[str, str]]  # `corpus_of`: what a resumed run must have been trained on
    train: ParallelSplit
    valid: ParallelSplit
    bleu_sample: tuple[list[str], list[str]] | None  # --valid-bleu's raw dev sources and references
    bleu_tokenize: str = DEFAULT_TOKENIZE  # sacreBLEU's tokenizer for the target language, as `mtkit score` picks it


def open_training_data(path: Path, model_cfg: ModelConfig, valid_bleu: int = 0) -> TrainingData:
    """The data directory, refused in one sentence when it does not fit the model (or lacks --valid-bleu's text)."""
    data = open_data(path)
    vocab = data.vocab_bytes()
    spm = load_tokenizer(vocab)  # mtkit's SentencePiece model, or an OPUS-MT model's (`mtkit bpe --from`)
    check_vocab(data, spm, model_cfg)
    train, valid = data.split("train"), data.split("valid")
    sample = bleu_sample(data, valid_bleu) if valid_bleu else None
    tokenize = default_tokenize(data.tgt_lang)
    if valid_bleu:
        check_tokenize(tokenize)  # a missing MeCab is said now, not at the first validation
    check_token_ids(data, (train, valid), model_cfg)
    return TrainingData(data, vocab, spm, corpus_of(data), train, valid, sample, tokenize)


def corpus_of(data: DataDir) -> dict[str, dict[str, str]]:
    """bpe.json's sha256 of each raw input file, for the splits a resumed run depends on."""
    splits = data.info.get("splits", {})
    return {split: dict(splits[split].get("inputs", {})) for split in CHECKED_SPLITS if split in splits}


def bleu_sample(data: DataDir, n: int) -> tuple[list[str], list[str]]:
    """The first n raw dev pairs: sacreBLEU scores detokenized text against the real references."""
    paths = [data.path / "raw" / f"valid.{lang}" for lang in (data.src_lang, data.tgt_lang)]
    for path in paths:
        if not path.is_file():
            raise MtkitError(f"--valid-bleu needs the raw dev text {path} that `mtkit prepare` writes.")

    def head(path: Path) -> list[str]:
        with open(path, encoding="utf-8", newline="\n") as f:  # a CR inside a line stays in it: pairs stay aligned
            return [line.rstrip("\n") for line in itertools.islice(f, n)]

    return head(paths[0]), head(paths[1])


@dataclass(frozen=True)
class Epoch:
    """This rank's batches of one epoch, and every rank's summed token counts at each local batch index."""

    batches: list[np.ndarray]
    tgt_tokens: np.ndarray  # (per_rank,)
    real_and_padded: np.ndarray  # (per_rank, 2): src + tgt tokens, real and padded


def plan_data(
    train_split: ParallelSplit, valid_split: ParallelSplit, cfg: TrainConfig, world: dist.World, max_positions: int
) -> tuple[BatchPlan, list[np.ndarray]]:
    """The training batch plan, and this rank's share of the validation batches."""
    kind = cfg.length_buckets  # resolved by then (mtkit/train/compile.py): none, ladder or x8
    buckets = None if kind == "none" else bucket_lengths(kind, min(cfg.max_tokens, max_positions))
    train_plan = plan_batches(
        train_split.src_sizes, train_split.tgt_sizes, cfg.max_tokens, cfg.seed, max_positions, buckets
    )
    valid_plan = plan_batches(
        valid_split.src_sizes, valid_split.tgt_sizes, cfg.max_tokens, cfg.seed, max_positions, buckets
    )
    valid_batches = shard_all(valid_plan, world.rank, world.size)
    if len(train_plan) < world.size:
        raise MtkitError(
            f"the training data makes {len(train_plan)} batch(es) of --max-tokens {cfg.max_tokens}, "
            f"fewer than the {world.size} processes; lower --max-tokens or use fewer processes."
        )
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
