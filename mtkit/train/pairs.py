"""Training on a multilingual data directory (mtkit/data/multilingual.py): the language pairs mixed by
temperature in the batch plan (mtkit/data/pair_sampling.py), and the dev set scored pair by pair.

The trainer asks this module two things through two hooks: the batch plan, and the validation. Each
validation logs the dev loss, NLL and perplexity of every pair (`loss.en-de`, ...) beside those of the
whole dev set, and with `--valid-bleu N` the greedy sacreBLEU of each pair's first N dev sentences
(`bleu.en-de`); `bleu` is then their mean, which picks checkpoint_best.pt, so that no direction counts
more than another because its dev set is larger.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtkit.config import TrainConfig
from mtkit.data.batching import BatchPlan, bucket_lengths, plan_batches, shard_all
from mtkit.data.multilingual import SRC, TGT, pairs_of
from mtkit.data.pair_sampling import pair_counts, pair_plan
from mtkit.errors import MtkitError
from mtkit.score import DEFAULT_TOKENIZE, check_tokenize, default_tokenize
from mtkit.train.distributed import World, all_reduce_sum
from mtkit.train.plan import TrainingData
from mtkit.train.precision import Precision
from mtkit.train.signals import StopRequests, agreed_signal
from mtkit.train.validation import Validation, greedy_bleu, loss_metrics, loss_sums

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    """One direction of a multilingual directory: its name (`en-de`) and its lines in train and valid."""

    name: str
    train: tuple[int, int]
    valid: tuple[int, int]
    tokenize: str = DEFAULT_TOKENIZE  # sacreBLEU's tokenizer for its target language

    @classmethod
    def of(cls, entry: dict[str, Any]) -> Pair:
        lines = entry["lines"]
        name, tokenize = f"{entry['src']}-{entry['tgt']}", default_tokenize(entry["tgt"])
        return cls(name, tuple(lines["train"]), tuple(lines["valid"]), tokenize)  # type: ignore[arg-type]


class PairTraining:
    """The batch plan that mixes the pairs, and a validation with the same signature as `validation.validate`."""

    def __init__(
        self,
        pairs: list[Pair],
        plan: BatchPlan,
        valid_batches: list[list[np.ndarray]],
        bleu_samples: list[tuple[list[str], list[str]]],
    ):
        self.pairs, self.plan, self.valid_batches, self.bleu_samples = pairs, plan, valid_batches, bleu_samples

    def validate(
        self,
        model: torch.nn.Module,
        data: TrainingData,
        batches: list[np.ndarray],  # the whole dev set's: unused, each pair has its own
        world: World,
        precision: Precision,
        smoothing: float,
        requests: StopRequests | None = None,
    ) -> Validation:
        stop: Callable[[], bool] = (lambda: bool(requests.received)) if requests is not None else (lambda: False)

        def flags() -> list[float]:
            return requests.flags() if requests is not None else [0.0, 0.0]

        sums = [loss_sums(model, data.valid, b, precision, smoothing, world.device, stop) for b in self.valid_batches]
        totals = all_reduce_sum(torch.cat((*sums, sums[0].new_tensor(flags()))), world).tolist()
        if stopped := agreed_signal(totals[3 * len(sums) :]):
            return Validation({}, stopped)
        per_pair = [totals[3 * i : 3 * i + 3] for i in range(len(sums))]
        metrics: dict[str, Any] = loss_metrics(*(sum(column) for column in zip(*per_pair)))
        for pair, (loss, nll, tokens) in zip(self.pairs, per_pair):
            for key, value in loss_metrics(loss, nll, tokens).items():
                if key != "tokens":
                    metrics[f"{key}.{pair.name}"] = value
        if self.bleu_samples:  # rank 0 translates; the sum hands the scores to every rank
            scores = [
                (
                    greedy_bleu(model, data.spm, *sample, world.device, stop, tokenize=pair.tokenize)
                    if world.is_main
                    else 0.0
                )
                or 0.0
                for pair, sample in zip(self.pairs, self.bleu_samples)
            ]
            summed = torch.tensor([*scores, *flags()], dtype=torch.float64, device=world.device)
            totals = all_reduce_sum(summed, world).tolist()
            if stopped := agreed_signal(totals[len(scores) :]):
                return Validation({}, stopped)
            metrics["bleu"] = sum(totals[: len(scores)]) / len(scores)
            metrics.update({f"bleu.{pair.name}": value for pair, value in zip(self.pairs, totals)})
        return Validation(metrics)


def setup(data: TrainingData, cfg: TrainConfig, world: World, max_positions: int) -> PairTraining | None:
    """The pairs' plan and dev batches when `data` is multilingual; None when it holds one pair."""
    entries = pairs_of(data.dir.info)
    if not entries:
        return None
    pairs = [Pair.of(e) for e in entries]
    if cfg.valid_bleu:
        for pair in pairs:  # a missing MeCab is said now, not at the first validation
            check_tokenize(pair.tokenize)
    buckets = (
        None if cfg.length_buckets == "none" else bucket_lengths(cfg.length_buckets, min(cfg.max_tokens, max_positions))
    )
    train, valid = data.train, data.valid
    plan = pair_plan(
        train.src_sizes,
        train.tgt_sizes,
        [p.train for p in pairs],
        cfg.pair_temperature,
        cfg.max_tokens,
        cfg.seed,
        max_positions,
        buckets,
    )
    if len(plan) < world.size:
        raise MtkitError(f"the training data makes {len(plan)} batch(es), fewer than the {world.size} processes.")
    counts = pair_counts(plan, [p.train for p in pairs])
    logger.info(
        "language pairs mixed by temperature %g (sentences an epoch): %s",
        cfg.pair_temperature,
        ", ".join(f"{p.name} {n} ({n / max(sum(counts), 1):.1%})" for p, n in zip(pairs, counts)),
    )
    valid_batches = []
    for pair in pairs:
        a, b = pair.valid
        one = plan_batches(valid.src_sizes[a:b], valid.tgt_sizes[a:b], cfg.max_tokens, cfg.seed, max_positions, buckets)
        valid_batches.append([batch + a for batch in shard_all(one, world.rank, world.size)])
    samples = (
        [_bleu_sample(data.dir.path / "raw", pair.valid, cfg.valid_bleu) for pair in pairs] if cfg.valid_bleu else []
    )
    return PairTraining(pairs, plan, valid_batches, samples)


def _bleu_sample(raw: Path, lines: tuple[int, int], n: int) -> tuple[list[str], list[str]]:
    """The first n dev pairs of one direction: sources with their token, as `mtkit translate` reads them."""
    a, b = lines

    def head(path: Path) -> list[str]:
        if not path.is_file():
            raise MtkitError(f"--valid-bleu needs the raw dev text {path} that `mtkit bpe ... --out` writes.")
        with open(path, encoding="utf-8", newline="\n") as f:
            return [line.rstrip("\n") for line in itertools.islice(f, a, min(b, a + n))]

    return head(raw / f"valid.{SRC}"), head(raw / f"valid.{TGT}")
