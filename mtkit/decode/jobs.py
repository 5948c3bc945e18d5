"""The jobs of mtkit/decode/translator.py: one batch's work each, a module-level function called with the translator
as its first argument, run by `Translator._run` here or in a worker against the translator it inherited (a job
reaches its worker pickled, its function by name: mtkit/decode/pool.py).
"""

from __future__ import annotations

from typing import Protocol

from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.decode.engine import Engine
from mtkit.decode.glossary import Terms


class Holder(Protocol):
    """What a job reads of the translator: its engine and its vocabulary."""

    engine: Engine
    vocab: Tokenizer


# A batch's search: each sentence's hypotheses, best first, as (text, score), and its best output's length in tokens.
Searched = tuple[list[list[tuple[str, float]]], list[int]]


def search_batch(
    translator: Holder,
    *,
    ids: list[list[int]],
    prefixes: list[list[int]],
    config: DecodeConfig,
    sampling: SamplingConfig | None,
    terms: Terms | None = None,
) -> Searched:
    """Each sentence's hypotheses, best first, as (text, score): beam search, or sampling with `sampling`; each
    output holding its sentence's glossary `terms`. With them, the length in tokens of each sentence's best output
    (0 for none), which says whether it ran to its length limit without encoding its text again."""
    found = translator.engine.search(ids, prefixes, config, sampling, *([terms] if terms else []))
    texts = [[(translator.vocab.decode(tokens), score) for tokens, score in hypotheses] for hypotheses in found]
    return texts, [len(hypotheses[0][0]) if hypotheses else 0 for hypotheses in found]


def score_pairs(translator: Holder, *, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]:
    """(log P(target + EOS | source), target length + 1) of each pair of the batch."""
    return translator.engine.score(src, tgt)
