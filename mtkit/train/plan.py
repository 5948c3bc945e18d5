"""The trainer's data: checks that it fits the model, the batch plans, and each epoch's batches on this rank."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.batching import BatchPlan, bucket_lengths, epoch_batches, epoch_order, plan_batches, shard_all
from mtkit.data.dataset import DataDir, ParallelSplit
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.train import distributed as dist


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
