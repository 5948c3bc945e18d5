"""Lexically constrained beam search: every output contains each of its sentence's target terms, a term a whole
sequence of tokens, by dynamic beam allocation (Post & Vilar 2018), vectorized over the batch (Hu et al. 2019).

Each live hypothesis carries its constraint state: which terms it has produced (`met`), and the term it is in the
middle of with how many of its tokens it has produced (`term`, `progress`); its bank is the number of term tokens
produced so far. At every step the candidates are the 2k best extensions of the sentence's beams (the plain
search's), each beam's best token, the next token of the term it is in, and the first token of every term it has
not produced. They are sorted by bank and score and dealt round-robin over the banks, the most advanced bank first
(DBA's allocation: a hypothesis that has produced more terms keeps a place even when it scores less than one that
has produced fewer), and the search keeps the first k that do not end. A hypothesis may end only once it has
produced every term; one that reaches its length limit without them dies, and a sentence left with no output at
all (rare: its terms do not fit in its length limit) is decoded without its terms. A term abandoned halfway (another
token than its next one) counts for nothing; the same term twice in a sentence must be produced twice.

`beam.beams` calls `Constraints` at its numbered steps; `with_terms` sends the sentences of a batch that have
terms through it, and gives the others what the plain search gives them, so they decode exactly as without a
glossary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import EOS, PAD, DecodeConfig
from mtkit.decode.beam import SearchResult, top_k
from mtkit.decode.glossary import Terms

NEG_INF = -math.inf
MIN_BEAM = 4  # a sentence with terms is searched with at least this beam (a greedy student's too): see `with_terms`


def pack_terms(terms: Sequence[Sequence[Sequence[int]]], device: torch.device) -> Tensor:
    """Each sentence's terms as token ids (n, J, L), PAD-padded: J terms at most, L tokens a term at most."""
    J = max((len(t) for t in terms), default=0)
    L = max((len(term) for t in terms for term in t), default=0)
    out = torch.full((len(terms), max(J, 1), max(L, 1)), PAD, dtype=torch.long)
    for s, sentence in enumerate(terms):
        for j, term in enumerate(sentence):
            out[s, j, : len(term)] = torch.tensor(term, dtype=torch.long)
    return out.to(device)


class Constraints:
    """The constraint state of every live hypothesis of a search over `terms` (n, J, L) (`pack_terms`), and the
    steps of DBA the search loop calls: `block_endings`, `candidates`, `survivors`, `choose`, `keep`."""

    def __init__(self, terms: Tensor, joining: Tensor | None = None):
        """`joining`: ids of the tokens that would continue a word (a piece without a word's start): none may come
        right after a term, so that a term stays the word written, not the start of a longer one."""
        self.terms = terms  # (n, J, L)
        self.joining = joining
        self.lengths = terms.ne(PAD).sum(2)  # (n, J), 0 for padding
        self.total = self.lengths.sum(1)  # (n,) term tokens a finished output must hold
        n, J, _ = terms.shape
        self.met = torch.zeros(n, 1, J, dtype=torch.bool, device=terms.device)  # (n, r, J)
        self.term = torch.full((n, 1), -1, dtype=torch.long, device=terms.device)  # (n, r) the term in progress
        self.progress = torch.zeros(n, 1, dtype=torch.long, device=terms.device)  # (n, r) its tokens produced
        self.fresh = torch.zeros(n, 1, dtype=torch.bool, device=terms.device)  # (n, r) a term just ended
        self.pending: tuple[Tensor, Tensor, Tensor, Tensor] | None = None  # the last candidates' states

    def banks(self, met: Tensor, progress: Tensor) -> Tensor:
        """Term tokens produced: the lengths of the terms met and the progress in the current one."""
        return (met * self.lengths.unsqueeze(1)).sum(2) + progress

    def block_endings(self, lprobs: Tensor) -> None:
        """In place: rows (lprobs (n, r, V)) that have not produced every term may not end (at their length limit,
        where ending is all they may do, they die: `with_terms` decodes a sentence left without an output plainly);
        a row whose last token ended a term may not continue its word."""
        short = self.banks(self.met, self.progress) < self.total.unsqueeze(1)  # (n, r)
        lprobs[..., EOS].masked_fill_(short, NEG_INF)
        if self.joining is not None and bool(self.fresh.any()):
            flat = lprobs.view(-1, lprobs.size(2))
            flat[self.fresh.view(-1).nonzero(), self.joining.unsqueeze(0)] = NEG_INF

    def candidates(self, logp: Tensor, lprobs: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]:
        """DBA's `count` candidates (scores, beam, token), each (n, count), in the order of allocation.

        logp (n, r): the live hypotheses' log-probabilities; lprobs (n, r, V): the next token's (overwritten with
        the sums, as `beam.top_candidates` does).
        """
        n, r, V = lprobs.shape
        total = lprobs.add_(logp.unsqueeze(-1))  # (n, r, V)
        rows = torch.arange(r, device=logp.device).expand(n, r)
        # 1. The plain search's candidates, each beam's best token, each beam's next term token, the first
        #    token of each term a beam has not produced.
        best, flat = top_k(total.view(n, r * V), min(count, r * V))
        top, top_token = total.max(2)  # (n, r)
        doing = self.term.clamp(min=0)  # (n, r)
        next_token = self.terms.gather(1, doing.unsqueeze(-1).expand(-1, -1, self.terms.size(2)))  # (n, r, L)
        next_token = next_token.gather(2, self.progress.clamp(max=self.terms.size(2) - 1).unsqueeze(-1)).squeeze(2)
        next_token = next_token.masked_fill(self.term < 0, PAD)  # (n, r)
        firsts = self.terms[:, :, 0].unsqueeze(1).expand(-1, r, -1)  # (n, r, J)
        open_terms = ~self.met & self.lengths.gt(0).unsqueeze(1)  # (n, r, J)
        start_scores = total.gather(2, firsts).masked_fill(~open_terms, NEG_INF)
        J = firsts.size(2)
        scores = torch.cat(
            [best, top, total.gather(2, next_token.unsqueeze(-1)).squeeze(2), start_scores.view(n, -1)], 1
        )
        scores[:, best.size(1) + r : best.size(1) + 2 * r].masked_fill_(self.term < 0, NEG_INF)
        beam = torch.cat([torch.div(flat, V, rounding_mode="floor"), rows, rows, rows.repeat_interleave(J, 1)], 1)
        token = torch.cat([flat % V, top_token, next_token, firsts.reshape(n, -1)], 1)  # (n, M)
        # 2. Each candidate's state after its token, and its bank.
        met, term, progress, fresh = self.advance(beam, token, next_token)
        bank = self.banks(met, progress)  # (n, M)
        # 3. A (beam, token) pair found twice counts once (its state is the same); what cannot be (-inf) goes last.
        key = beam * V + token
        earlier = torch.ones(key.size(1), key.size(1), dtype=torch.bool, device=key.device).tril(-1)
        earlier = earlier & torch.isfinite(scores).unsqueeze(1)  # [m, m']: m' before m and possible
        scores = scores.masked_fill(((key.unsqueeze(2) == key.unsqueeze(1)) & earlier).any(2), NEG_INF)
        # 4. Sorted by bank (most advanced first), then score; dealt round-robin over the banks.
        order = scores.argsort(dim=1, descending=True, stable=True)
        order = order.gather(1, bank.gather(1, order).argsort(dim=1, descending=True, stable=True))
        sorted_bank = bank.gather(1, order)
        levels = int(self.total.max()) + 2
        one_hot = F.one_hot(sorted_bank, levels)  # (n, M, levels)
        rank = (one_hot.cumsum(1) * one_hot).sum(2) - 1  # place within its bank
        stripe = rank * levels + (levels - 1 - sorted_bank)
        stripe = stripe.masked_fill(~torch.isfinite(scores.gather(1, order)), levels * (key.size(1) + 1))
        order = order.gather(1, stripe.argsort(dim=1, stable=True))[:, :count]  # (n, count)
        self.pending = (
            met.gather(1, order.unsqueeze(-1).expand(-1, -1, J)),
            term.gather(1, order),
            progress.gather(1, order),
            fresh.gather(1, order),
        )
        return scores.gather(1, order), beam.gather(1, order), token.gather(1, order)

    def advance(self, beam: Tensor, token: Tensor, next_token: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The state (met (n, M, J), term (n, M), progress (n, M), a term just ended (n, M)) of each candidate: its
        beam's state after its token."""
        J = self.met.size(2)
        met = self.met.gather(1, beam.unsqueeze(-1).expand(-1, -1, J))
        term, progress = self.term.gather(1, beam), self.progress.gather(1, beam)
        going_on = (term >= 0) & (token == next_token.gather(1, beam))
        term, progress = term.masked_fill(~going_on, -1), torch.where(going_on, progress + 1, 0)
        starts = (self.terms[:, :, 0].unsqueeze(1) == token.unsqueeze(2)) & ~met & self.lengths.gt(0).unsqueeze(1)
        starts &= ~going_on.unsqueeze(2)
        starting = starts.any(2)
        term = torch.where(starting, starts.long().argmax(2), term)  # the first term that starts so
        progress = progress.masked_fill(starting, 1)
        done = (term >= 0) & (progress == self.lengths.gather(1, term.clamp(min=0)))
        met = met | (F.one_hot(term.clamp(min=0), J).bool() & done.unsqueeze(2))
        return met, term.masked_fill(done, -1), progress.masked_fill(done, 0), done

    @staticmethod
    def survivors(cand: Tensor, ends: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """The first k candidates that do not end, in allocation order: (their scores, their places) (n, k)."""
        pick = (ends | ~torch.isfinite(cand)).long().argsort(dim=1, stable=True)[:, :k]
        return cand.gather(1, pick).masked_fill(ends.gather(1, pick), NEG_INF), pick

    def choose(self, pick: Tensor) -> None:
        """The new live hypotheses are candidates `pick` (n, k) of the last `candidates`."""
        assert self.pending is not None
        met, term, progress, fresh = self.pending
        self.met = met.gather(1, pick.unsqueeze(-1).expand(-1, -1, met.size(2)))
        self.term, self.progress, self.fresh = term.gather(1, pick), progress.gather(1, pick), fresh.gather(1, pick)

    def keep(self, sentences: Tensor) -> None:
        """Only `sentences` go on (the search's order)."""
        self.terms, self.lengths, self.total = self.terms[sentences], self.lengths[sentences], self.total[sentences]
        self.met, self.term, self.progress = self.met[sentences], self.term[sentences], self.progress[sentences]
        self.fresh = self.fresh[sentences]


Search = Callable[..., SearchResult]


def with_terms(
    search: Search, ids: list[list[int]], prefixes: list[list[int]], terms: Terms, config: DecodeConfig
) -> SearchResult:
    """A batch whose sentences have `terms` (mtkit/decode/glossary.py's `Terms`), searched by `search` (ids,
    prefixes, config, terms=None): those with terms under constraints, with a beam of MIN_BEAM at least.

    The sentences without a term get what the batch gives them without a glossary, bit for bit: where a batch
    holds both kinds it is first searched whole without constraints (a sentence's output can depend on the others
    of its batch: int8 quantizes a batch's activations with one scale, a shortlist searches the batch's rows).
    """
    free = [i for i, t in enumerate(terms.sentences) if not t]
    held = [i for i, t in enumerate(terms.sentences) if t]
    hypotheses: list = [None] * len(ids)
    steps = [0] * len(ids)
    if free:
        found = search(ids, prefixes, config)
        for i in free:
            hypotheses[i], steps[i] = found.hypotheses[i], found.steps[i]
    if held:
        wide = dataclasses.replace(config, beam=max(config.beam, MIN_BEAM, config.nbest))
        found = search([ids[i] for i in held], [prefixes[i] for i in held], wide, terms.of(held))
        for i, h, s in zip(held, found.hypotheses, found.steps):
            hypotheses[i], steps[i] = h[: config.nbest], s
    lost = [i for i in held if not hypotheses[i]]  # no output holds the terms within the length limit
    if lost:
        found = search([ids[i] for i in lost], [prefixes[i] for i in lost], config)
        for i, h, s in zip(lost, found.hypotheses, found.steps):
            hypotheses[i], steps[i] = h, steps[i] + s
    return SearchResult(hypotheses, steps)
