"""A lexical shortlist at decoding time: the output layer restricted to a batch's likely target pieces.

A model file may carry a shortlist (`mtkit shortlist`, mtkit/shortlist.py; learnt by mtkit/data/shortlist.py):
for each source piece its K most likely target pieces, and the N most frequent target pieces. A batch is
then searched over the union of its source pieces' candidates, the frequent pieces, its prefixes' pieces and the
four special ids, as Marian's and CTranslate2's shortlists do (Schwenk et al. 2007; Bergamot's students): the
output layer and its softmax, most of a small decoder's step, shrink from the vocabulary to a few hundred rows.

The search itself is unchanged: it runs over column numbers of the restricted layer (`ShortlistStep` turns them
into token ids for the model and back), with the special ids kept first so that EOS, BOS and PAD keep their
numbers. A shortlisted translation can differ from the full one where the full one would use a piece outside
the candidates, or where a near tie between two pieces turns (each is normalised over fewer pieces);
docs/distill.md says how often, in BLEU and in lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from mtkit.config import EOS, PAD, DecodeConfig
from mtkit.decode.beam import Hypothesis, SearchResult, max_output_lengths, search
from mtkit.decode.step import ModelStep
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer

SPECIAL = EOS + 1  # pad, unk, bos, eos: always kept, at their own column numbers


@dataclass(frozen=True)
class Shortlist:
    """`candidates` (source vocabulary, K): each source piece's target pieces, best first, -1 padded;
    `frequent` (N,): the most frequent target pieces."""

    candidates: Tensor
    frequent: Tensor

    @classmethod
    def of(cls, ckpt: Mapping[str, Any], path: object) -> Shortlist | None:
        """The shortlist a loaded model file carries, or None."""
        if ckpt.get("shortlist") is None:
            return None
        size = int((ckpt.get("model_config") or {}).get("tgt_vocab_size") or ckpt["model_config"]["vocab_size"])
        return cls.from_record(ckpt["shortlist"], size, path)

    @classmethod
    def from_record(cls, record: Any, vocab_size: int, path: object) -> Shortlist:
        """The `shortlist` entry of a model file, checked (an untrusted file: one sentence, not an IndexError)."""
        ok = isinstance(record, Mapping)
        candidates = record.get("candidates") if ok else None
        frequent = record.get("frequent") if ok else None
        tensors = isinstance(candidates, Tensor) and isinstance(frequent, Tensor)
        if not (
            tensors
            and candidates.dim() == 2
            and frequent.dim() == 1
            and not candidates.is_floating_point()
            and not frequent.is_floating_point()
            and bool((candidates < vocab_size).all() and (candidates >= -1).all())
            and bool((frequent < vocab_size).all() and (frequent >= 0).all())
        ):
            raise MtkitError(f"{path} holds a damaged shortlist; make it again with `mtkit shortlist`.")
        return cls(candidates.long(), frequent.long())

    def rows(self, ids: list[list[int]], prefixes: list[list[int]], device: torch.device) -> Tensor:
        """The batch's rows of the output layer: the special ids first (in order), then the others, sorted."""
        source = [i for sentence in ids for i in sentence if 0 <= i < self.candidates.size(0)]
        found = self.candidates[torch.tensor(source, dtype=torch.long)].flatten() if source else self.frequent[:0]
        found = found[found >= 0]
        forced = torch.tensor([i for p in prefixes for i in p], dtype=torch.long)
        others = torch.unique(torch.cat([found, self.frequent, forced]))
        return torch.cat([torch.arange(SPECIAL), others[others >= SPECIAL]]).to(device)


class ShortlistStep:
    """A `Step` over a restricted output layer: the search's column numbers in, the model's token ids underneath."""

    def __init__(self, step: ModelStep, rows: Tensor):
        step.restrict(rows)
        self.step, self.ids = step, rows
        self.max_positions, self.forced_eos, self.dtype = step.max_positions, step.forced_eos, step.dtype

    def log_probs(self, last: Tensor) -> Tensor:
        return self.step.log_probs(self.ids[last])

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        self.step.reorder(rows, sentences)

    def select(self, rows: Tensor) -> None:
        self.step.select(rows)


@torch.inference_mode()
def shortlisted_search(
    model: Transformer, src: Tensor, config: DecodeConfig, prefix: Tensor | None, rows: Tensor
) -> SearchResult:
    """`beam.beam_search` over the output layer's `rows`: the same search, its outputs in token ids."""
    if src.size(0) == 0:
        return SearchResult([], [])
    limit = max_output_lengths(src.ne(PAD).sum(1) - 1, config, model.cfg.max_positions)
    capacity = min(int(limit.max()) + 1, 2 * src.size(1) + 8)  # as beam_search sizes its cache
    column = torch.full((model.cfg.target_vocab_size,), PAD, dtype=torch.long, device=src.device)
    column[rows] = torch.arange(rows.numel(), device=src.device)
    found = search(
        ShortlistStep(ModelStep(model, src, 1, capacity), rows), src, config, None if prefix is None else column[prefix]
    )
    ids = rows.tolist()
    return SearchResult(
        [[Hypothesis([ids[t] for t in h.tokens], h.score) for h in hyps] for hyps in found.hypotheses], found.steps
    )
