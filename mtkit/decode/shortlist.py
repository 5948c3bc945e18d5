"""A lexical shortlist at decoding time: the output layer restricted to a batch's likely target pieces.

A model file may carry a shortlist (`mtkit shortlist`, mtkit/shortlist.py; learnt by mtkit/data/shortlist.py):
for each source piece its K most likely target pieces, and the N most frequent target pieces. A batch is
then searched over the union of its source pieces' candidates, the frequent pieces, its prefixes' pieces and the
four special ids, as Marian's and CTranslate2's shortlists do (Schwenk et al. 2007; Bergamot's students): the
output layer and its softmax, most of a small decoder's step, shrink from the vocabulary to a few hundred rows.

The search itself is unchanged: the output layer restricts itself (`rows(ids)` of mtkit/model/linear.py and
mtkit/runtime/int8.py, as Sockeye's output layer takes `vocab_slice_ids`), and `ShortlistStep` wraps whatever
step the search was given (one model, an ensemble), so the search runs over column numbers of the restricted
layer (`Restriction` turns them into token ids and back), with the special ids kept first so that EOS, BOS and
PAD keep their numbers. An ensemble searches the union of its members' shortlists.

A shortlisted translation can differ from the full one where the full one would use a piece outside the
candidates, or where a near tie between two pieces turns (each is normalised over fewer pieces);
docs/distill.md says how often, in BLEU and in lines.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import torch
from torch import Tensor

from mtkit.config import EOS, PAD
from mtkit.decode.beam import Hypothesis, SearchResult
from mtkit.decode.ensemble import StepFactory
from mtkit.decode.step import Step
from mtkit.errors import MtkitError

SPECIAL = EOS + 1  # pad, unk, bos, eos: always kept, at their own column numbers


@dataclass(frozen=True)
class Shortlist:
    """`candidates` (source vocabulary, K): each source piece's target pieces, best first, -1 padded;
    `frequent` (N,): the most frequent target pieces."""

    candidates: Tensor
    frequent: Tensor

    @classmethod
    def of(cls, ckpt: Mapping[str, Any], path: object) -> Shortlist | None:
        """The shortlist a loaded model file carries, or None; refused in one sentence when it was learnt for
        another vocabulary than the file's (a shortlist grafted from another model: its ids name other pieces)."""
        record = ckpt.get("shortlist")
        if record is None:
            return None
        size = int((ckpt.get("model_config") or {}).get("tgt_vocab_size") or ckpt["model_config"]["vocab_size"])
        shortlist = cls.from_record(record, size, path)
        learnt = (record.get("learned_from") or {}).get("spm_sha256")
        mine = hashlib.sha256(ckpt.get("vocab") or b"").hexdigest()
        if learnt != mine:
            said = f"sha256 {str(learnt)[:12]}" if learnt else "one it does not name"
            raise MtkitError(
                f"{path} carries a shortlist learnt for another vocabulary ({said}, this model's is sha256 "
                f"{mine[:12]}); make it again from this model with `mtkit shortlist`."
            )
        return shortlist

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

    @classmethod
    def union(cls, shortlists: Sequence[Shortlist | None]) -> Shortlist | None:
        """An ensemble's shortlist: every member's candidates and frequent pieces; None unless each carries one
        (a member without one was never restricted, so its ensemble is not either)."""
        if not shortlists or any(s is None for s in shortlists):
            return None
        found = [s for s in shortlists if s is not None]
        if len(found) == 1:
            return found[0]
        sources = max(s.candidates.size(0) for s in found)
        candidates = [
            torch.nn.functional.pad(s.candidates, (0, 0, 0, sources - s.candidates.size(0)), value=-1) for s in found
        ]
        return cls(torch.cat(candidates, dim=1), torch.unique(torch.cat([s.frequent for s in found])))

    def rows(self, ids: list[list[int]], prefixes: list[list[int]], device: torch.device) -> Tensor:
        """The batch's rows of the output layer: the special ids first (in order), then the others, sorted."""
        source = [i for sentence in ids for i in sentence if 0 <= i < self.candidates.size(0)]
        found = self.candidates[torch.tensor(source, dtype=torch.long)].flatten() if source else self.frequent[:0]
        found = found[found >= 0]
        forced = torch.tensor([i for p in prefixes for i in p], dtype=torch.long)
        others = torch.unique(torch.cat([found, self.frequent, forced]))
        return torch.cat([torch.arange(SPECIAL), others[others >= SPECIAL]]).to(device)


class ShortlistStep:
    """A `Step` over a restricted output layer, wrapping any other (one model, an ensemble): the search's column
    numbers in, the model's token ids underneath."""

    def __init__(self, step: Step, ids: Tensor):
        self.step = step
        self.max_positions, self.forced_eos, self.dtype = step.max_positions, step.forced_eos, step.dtype
        self.restrict(ids)

    def restrict(self, ids: Tensor) -> None:
        self.step.restrict(ids)
        self.ids = ids

    def log_probs(self, last: Tensor) -> Tensor:
        return self.step.log_probs(self.ids[last])

    def run(self, last: Tensor, logp: Tensor, stop: int) -> tuple[Tensor, Tensor] | None:
        """The wrapped step's greedy steps of one sentence (`StaticStep.run`), where it has them: columns in and out."""
        run = getattr(self.step, "run", None)
        return None if run is None else run(self.ids[last], logp, stop, self.ids)  # type: ignore[no-any-return]

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        self.step.reorder(rows, sentences)

    def select(self, rows: Tensor) -> None:
        self.step.select(rows)


@dataclass(frozen=True)
class Restriction:
    """A batch searched over the output rows `ids` (`Shortlist.rows`): the steps that score only them, and the
    search's column numbers to and from token ids. The search itself is any search that takes `steps=`."""

    ids: Tensor

    def steps(self, make: StepFactory) -> StepFactory:
        """The Steps `make` builds, each wrapped to score only `ids`."""
        return lambda model, src, rows, capacity: ShortlistStep(make(model, src, rows, capacity), self.ids)

    @overload
    def columns(self, tokens: Tensor) -> Tensor: ...
    @overload
    def columns(self, tokens: None) -> None: ...
    def columns(self, tokens: Tensor | None) -> Tensor | None:
        """Token ids (any shape; PAD stays PAD) -> their column numbers; each must be one of `ids` (or PAD)."""
        if tokens is None:
            return None
        size = max(int(self.ids.max()), int(tokens.max()) if tokens.numel() else 0) + 1
        column = torch.full((size,), PAD, dtype=torch.long, device=self.ids.device)
        column[self.ids] = torch.arange(self.ids.numel(), device=self.ids.device)
        return column[tokens]

    def tokens(self, result: SearchResult) -> SearchResult:
        """A search's result over column numbers, in token ids."""
        ids = self.ids.tolist()
        return SearchResult(
            [[Hypothesis([ids[t] for t in h.tokens], h.score) for h in hyps] for hyps in result.hypotheses],
            result.steps,
        )
