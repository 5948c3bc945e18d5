"""Validation during training: loss and perplexity on the dev set, summed over every rank,
and with `--valid-bleu N` the sacreBLEU of greedy translations of the first N dev sentences.

`is_better` and `score_of` say which measure picks checkpoint_best.pt: BLEU when it is
measured (the paper selects and reports by BLEU), validation NLL otherwise.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import torch

from mtkit.data.dataset import DataDir, ParallelSplit
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from mtkit.train.distributed import World, all_reduce_sum
from mtkit.train.forward import batch_loss
from mtkit.train.precision import Precision


@torch.no_grad()
def validate(
    model: torch.nn.Module,
    split: ParallelSplit,
    batches: list[np.ndarray],
    world: World,
    precision: Precision,
    smoothing: float,
) -> dict[str, float]:
    """Mean label-smoothed loss, NLL and perplexity per target token over this rank's share, summed over ranks.

    `model` is the bare module (not DDP): evaluation needs no gradient synchronisation, and
    ranks may hold different numbers of batches here.
    """
    was_training = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=world.device)  # loss, nll, tokens
    try:
        for indices in batches:
            loss, nll, tokens = batch_loss(model, split, indices, precision, smoothing, world.device)
            sums[0] += loss.double()
            sums[1] += nll.double()
            sums[2] += tokens
    finally:
        model.train(was_training)
    loss_sum, nll_sum, tokens = all_reduce_sum(sums, world).tolist()
    tokens = max(tokens, 1.0)
    nll = nll_sum / tokens
    return {"loss": loss_sum / tokens, "nll": nll, "ppl": math.exp(min(nll, 100.0)), "tokens": int(tokens)}


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


def greedy_bleu(
    model: torch.nn.Module, vocab: Vocab, sources: list[str], references: list[str], device: torch.device
) -> float:
    """sacreBLEU of greedy (beam 1) translations, through the same Translator as `mtkit translate`."""
    from sacrebleu.metrics import BLEU

    from mtkit.decode.translator import Translator

    was_training = model.training
    try:
        hypotheses = Translator(model.eval(), vocab, device).translate(sources, beam=1)
    finally:
        model.train(was_training)
    return BLEU().corpus_score(hypotheses, [references]).score


def score_of(metrics: dict[str, float]) -> float:
    """The number checkpoint_best.pt minimises: -BLEU when measured, else validation NLL."""
    return -metrics["bleu"] if "bleu" in metrics else metrics["nll"]


def is_better(metrics: dict[str, float], best: float) -> bool:
    return score_of(metrics) < best
