"""Validation during training: loss and perplexity on the dev set, summed over every rank,
and with `--valid-bleu N` the sacreBLEU of greedy translations of the first N dev sentences.

The dev set is scored pair by pair (mtkit/train/plan.py: a bilingual directory is one pair). With several pairs
each validation also logs the dev loss, NLL and perplexity of every pair (`loss.en-de`, ...) beside those of the
whole dev set, and with --valid-bleu the BLEU of each pair's first N dev sentences (`bleu.en-de`); `bleu` is
their mean, which picks checkpoint_best.pt, so that no direction counts more than another because its dev set
is larger.

A stop request (SIGTERM, Ctrl-C: mtkit/train/signals.py) is read between dev batches and
between translated lines, so a preempted run stops within one batch, not after the whole
validation; the validation then has no score, and every rank learns so from its all-reduce.

`is_better` and `score_of` say which measure picks checkpoint_best.pt: BLEU when it is
measured (the paper selects and reports by BLEU), validation NLL otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mtkit.config import DecodeConfig
from mtkit.data.dataset import ParallelSplit
from mtkit.data.vocab import Vocab
from mtkit.score import DEFAULT_TOKENIZE, bleu_metric
from mtkit.train.distributed import World, all_reduce_sum
from mtkit.train.forward import batch_loss
from mtkit.train.plan import TrainingData
from mtkit.train.precision import Precision
from mtkit.train.signals import SIGNAL_STOPS, StopRequests, agreed_signal

# --valid-bleu's lines translated (and sorted by length) together: a stop request is read after each of them,
# so this bounds the decoding done after one arrives (a few seconds of `big` on a CPU).
BLEU_CHUNK_LINES = 128


@dataclass(frozen=True)
class Validation:
    """One validation as every rank sees it after its all-reduce."""

    metrics: dict[str, Any]  # loss, nll, ppl, tokens, and bleu with --valid-bleu; empty when cut short
    stopped: str = ""  # "SIGTERM" or "SIGINT" when a stop request on any rank cut it short


def validate(
    model: torch.nn.Module,
    data: TrainingData,
    batches: list[list[np.ndarray]],
    world: World,
    precision: Precision,
    smoothing: float,
    requests: StopRequests | None = None,
) -> Validation:
    """Loss on each pair's dev batches (this rank's share, summed over ranks), then rank 0's greedy BLEU of each
    pair's sample with --valid-bleu; per-pair metrics where there are several pairs.

    `model` is the bare module (not DDP): evaluation needs no gradient synchronisation, and
    ranks may hold different numbers of batches here.
    """
    stop = (lambda: bool(requests.received)) if requests is not None else (lambda: False)

    def flags() -> list[float]:
        return requests.flags() if requests is not None else [0.0] * len(SIGNAL_STOPS)

    sums = [loss_sums(model, data.valid, pair, precision, smoothing, world.device, stop) for pair in batches]
    totals = all_reduce_sum(torch.cat((*sums, sums[0].new_tensor(flags()))), world).tolist()
    if stopped := agreed_signal(totals[3 * len(sums) :]):
        return Validation({}, stopped)
    per_pair = [totals[3 * i : 3 * i + 3] for i in range(len(sums))]
    metrics: dict[str, Any] = loss_metrics(*(sum(column) for column in zip(*per_pair)))
    several = len(data.pairs) > 1
    for pair, (loss, nll, tokens) in zip(data.pairs if several else (), per_pair):
        metrics.update({f"{key}.{pair.name}": value for key, value in loss_metrics(loss, nll, tokens).items()})
        del metrics[f"tokens.{pair.name}"]
    if data.bleu_samples:  # rank 0 translates; the sum hands the scores to every rank
        scores = [
            (
                greedy_bleu(model, data.spm, *sample, world.device, stop, tokenize=pair.tokenize)
                if world.is_main
                else 0.0
            )
            or 0.0
            for pair, sample in zip(data.pairs, data.bleu_samples)
        ]
        summed = torch.tensor([*scores, *flags()], dtype=torch.float64, device=world.device)
        totals = all_reduce_sum(summed, world).tolist()
        if stopped := agreed_signal(totals[len(scores) :]):
            return Validation({}, stopped)
        metrics["bleu"] = sum(totals[: len(scores)]) / len(scores)
        if several:
            metrics.update({f"bleu.{pair.name}": value for pair, value in zip(data.pairs, totals)})
    return Validation(metrics)


@torch.no_grad()
def loss_sums(
    model: torch.nn.Module,
    split: ParallelSplit,
    batches: list[np.ndarray],
    precision: Precision,
    smoothing: float,
    device: torch.device,
    stop: Callable[[], bool] = lambda: False,
) -> torch.Tensor:
    """(label-smoothed loss, NLL, target tokens) summed over `batches`, float64; those before `stop()` said yes."""
    was_training = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=device)
    try:
        for indices in batches:
            if stop():
                break
            loss, nll, tokens = batch_loss(model, split, indices, precision, smoothing, device)
            sums[0] += loss.double()
            sums[1] += nll.double()
            sums[2] += tokens
    finally:
        model.train(was_training)
    return sums


def loss_metrics(loss_sum: float, nll_sum: float, tokens: float) -> dict[str, float]:
    """Mean label-smoothed loss, NLL and perplexity per target token."""
    tokens = max(tokens, 1.0)
    nll = nll_sum / tokens
    return {"loss": loss_sum / tokens, "nll": nll, "ppl": math.exp(min(nll, 100.0)), "tokens": int(tokens)}


def greedy_bleu(
    model: torch.nn.Module,
    vocab: Vocab,
    sources: list[str],
    references: list[str],
    device: torch.device,
    stop: Callable[[], bool] = lambda: False,
    tokenize: str = DEFAULT_TOKENIZE,
) -> float | None:
    """sacreBLEU of greedy (beam 1) translations, through the same Translator as `mtkit translate`, with the BLEU
    tokenizer `mtkit score` picks for the target language; None when `stop()` said yes before every line was
    translated."""
    from mtkit.decode.torch_engine import TorchEngine
    from mtkit.decode.translator import Translator

    was_training = model.training
    hypotheses: list[str] = []
    try:
        translator = Translator(TorchEngine(model.eval(), device), vocab)
        config = DecodeConfig(beam=1, split=False)  # a dev line is one segment, as its reference is
        for translation in translator.translate_stream(sources, config, chunk_lines=BLEU_CHUNK_LINES):
            hypotheses.append(translation.text)
            if stop() and len(hypotheses) < len(sources):
                return None
    finally:
        model.train(was_training)
    return bleu_metric(tokenize).corpus_score(hypotheses, [references]).score


def score_of(metrics: dict[str, float]) -> float:
    """The number checkpoint_best.pt minimises: -BLEU when measured, else validation NLL."""
    return -metrics["bleu"] if "bleu" in metrics else metrics["nll"]


def is_better(metrics: dict[str, float], best: float) -> bool:
    return score_of(metrics) < best
