"""Batched beam search with a length penalty (paper section 6.1); beam 1 is greedy search.

Hypotheses are ranked by log P(Y|X) / lp(|Y|), where |Y| counts the end-of-sentence token
(as tensor2tensor and fairseq count it). All work happens on tensors over the flattened
(sentences x beams) rows; sentences leave the batch as soon as they are done, and the
key/value cache shrinks with them. The search asks a `Step` for log-probabilities and tells it
which rows to keep; it never sees a model's cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import BOS, EOS, PAD, DecodeConfig
from mtkit.decode.ensemble import Ensemble, StepFactory, make_step
from mtkit.decode.lengths import length_penalty as length_penalty
from mtkit.decode.lengths import max_output_length
from mtkit.decode.prefix import force_prefix
from mtkit.decode.step import Step
from mtkit.model.transformer import Transformer

NEG_INF = -math.inf


def max_output_lengths(src_lengths: Tensor, config: DecodeConfig, max_positions: int) -> Tensor:
    """Each sentence's `max_output_length` (mtkit/decode/lengths.py, the rule's one definition), as a tensor."""
    limits = [max_output_length(n, config, max_positions) for n in src_lengths.tolist()]
    return torch.tensor(limits, dtype=torch.long, device=src_lengths.device)


def top_candidates(logp: Tensor, lprobs: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]:
    """The `count` best one-token extensions of each sentence's beams, best first.

    logp (n, k): log-probabilities of the live hypotheses; lprobs (n, k, V): of the next token
    (overwritten with the sums).
    Returns (scores, beam, token), each (n, count). All live hypotheses have the same length,
    so ranking by log-probability is ranking by the length-penalised score.
    """
    n, k, V = lprobs.shape
    # In place: lprobs is the step's scratch, and a (n, k, V) temporary per step costs a fresh allocation.
    scores, flat = top_k(lprobs.add_(logp.unsqueeze(-1)).view(n, k * V), min(count, k * V))
    if flat.size(1) < count:  # fewer pairs than asked for (one row of a tiny vocabulary): pad with -inf
        scores = F.pad(scores, (0, count - flat.size(1)), value=NEG_INF)
        flat = F.pad(flat, (0, count - flat.size(1)), value=PAD)
    return scores, torch.div(flat, V, rounding_mode="floor"), flat % V


def top_k(x: Tensor, count: int, group: int = 16) -> tuple[Tensor, Tensor]:
    """x.topk(count, dim=1) for a 2-D x, the same values, in two cheaper passes on the CPU.

    The columns are dealt into groups of `group` (column c into group c mod W / group, W = x's
    width), and only the `count` groups with the largest maxima are searched: an element outside
    them is at most its own group's maximum, which is at most the count-th largest maximum, and each
    of those `count` groups holds an element at least that large. A maximum over groups is one
    vectorised pass; torch.topk over the whole row is not (docs/benchmarks.md, "Figures behind the code's choices": this
    module).
    Equal values may come in another order than torch.topk's. Other devices, and widths that do
    not split into groups of `group` or have fewer groups than `count`, keep torch.topk.
    """
    n, W = x.shape
    groups = W // group
    if x.device.type != "cpu" or W % group or groups < count or groups < 64:
        values, indices = x.topk(count, dim=1)
        return values, indices
    best = x.view(n, group, groups).amax(1).topk(count, dim=1).indices  # (n, count) the groups to search
    columns = (best.unsqueeze(-1) + groups * torch.arange(group, device=x.device)).view(n, -1)
    values, pick = x.gather(1, columns).topk(count, dim=1)
    return values, columns.gather(1, pick)


def keep_slots(parent: Tensor) -> Tensor:
    """Where each of a sentence's k new hypotheses goes, so that as many as can keep their parent's slot.

    parent (n, k): the slot (beam) each new hypothesis extends. A parent's best child takes the
    parent's slot, so its key/value cache row stays where it is; the other children fill, best
    first, the slots of parents that left no child. Returns (n, k): the hypothesis for each slot.
    In the Multi30k recipe's beam-4 search 71% of hypotheses keep their slot, so the in-place
    cache reorder (mtkit/model/transformer.py) copies 29% of the rows instead of all of them.
    """
    n, k = parent.shape
    slots = torch.arange(k, device=parent.device)
    earlier = torch.ones(k, k, dtype=torch.bool, device=parent.device).tril(-1)  # [i, j]: j before i
    first = ~((parent.unsqueeze(2) == parent.unsqueeze(1)) & earlier).any(2)  # (n, k) no better sibling
    taken = (parent.unsqueeze(2) == slots).any(1)  # (n, k) slots a first child keeps
    free = (taken.long() * k + slots).argsort(dim=1)  # free slots first, in order
    rank = ((~first).long().cumsum(1) - 1).clamp(min=0)  # a later child's place among the later children
    slot = torch.where(first, parent, free.gather(1, rank))
    return torch.empty_like(parent).scatter_(1, slot, slots.expand(n, k))


def keep_places(keep: Tensor) -> Tensor:
    """The kept sentences (keep (n,) bool) in their new order: a kept sentence stays at its place
    when that place remains, and the last ones move into the places of those that left, so that
    the cache copies only the rows that move."""
    count = int(keep.sum())
    order = torch.arange(count, device=keep.device)
    holes = (~keep[:count]).nonzero().squeeze(1)
    order[holes] = keep[count:].nonzero().squeeze(1) + count
    return order


@dataclass(frozen=True)
class Hypothesis:
    """One finished output: ids without BOS/EOS, and log P(Y|X) / lp(|Y|)."""

    tokens: list[int]
    score: float


@dataclass(frozen=True)
class SearchResult:
    """Per sentence, its best hypotheses (at most `nbest`, best first) and the decoder steps it took."""

    hypotheses: list[list[Hypothesis]]
    steps: list[int]


@dataclass
class _Finished:
    """The best `nbest` finished hypotheses of every sentence, kept as padded tensors."""

    score: Tensor  # (B, K), -inf where empty
    tokens: Tensor  # (B, K, W)
    length: Tensor  # (B, K)
    count: Tensor  # (B,) endings found so far, kept or not (the patience rule counts them)

    def add(self, sentences: Tensor, score: Tensor, tokens: Tensor) -> None:
        """Merge new endings (score (n, c), tokens (n, c, t)) of `sentences` into their best K."""
        K, W = self.score.size(1), self.tokens.size(2)
        n, c, t = tokens.shape
        all_score = torch.cat([self.score[sentences], score], dim=1)  # (n, K + c)
        all_tokens = torch.cat([self.tokens[sentences], F.pad(tokens, (0, W - t))], dim=1)  # (n, K + c, W)
        all_length = torch.cat([self.length[sentences], self.length.new_full((n, c), t)], dim=1)
        best_score, pick = all_score.topk(K, dim=1)  # (n, K)
        self.score[sentences] = best_score
        self.tokens[sentences] = all_tokens.gather(1, pick.unsqueeze(-1).expand(-1, -1, W))
        self.length[sentences] = all_length.gather(1, pick)
        self.count[sentences] += score.isfinite().sum(1)

    def hypotheses(self) -> list[list[Hypothesis]]:
        score, tokens, length = self.score.tolist(), self.tokens.tolist(), self.length.tolist()
        return [
            [
                Hypothesis(tokens[b][j][: length[b][j]], score[b][j])
                for j in range(len(score[b]))
                if score[b][j] > NEG_INF
            ]
            for b in range(len(score))
        ]


class Constrained(Protocol):
    """What the search asks of lexical constraints (mtkit/decode/constraints.py) at its numbered steps."""

    def block_endings(self, lprobs: Tensor) -> None: ...
    def candidates(self, logp: Tensor, lprobs: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]: ...
    def survivors(self, cand: Tensor, ends: Tensor, k: int) -> tuple[Tensor, Tensor]: ...
    def choose(self, pick: Tensor) -> None: ...
    def keep(self, sentences: Tensor) -> None: ...


@torch.inference_mode()
def beam_search(
    model: Transformer | Ensemble,
    src: Tensor,
    config: DecodeConfig = DecodeConfig(),
    prefix: Tensor | None = None,
    steps: StepFactory = make_step,
    constraints: Constrained | None = None,
) -> SearchResult:
    """Translate a batch of source ids (B, S) = ids + [EOS], right-padded with 0, with one model or an ensemble.

    `prefix` (B, P), PAD-padded: tokens each output must begin with (mtkit/decode/prefix.py). `steps`: how the
    search's `Step` is made (mtkit's `make_step`; a benchmark may hand another, such as a compiled one).
    `constraints`: terms each output must contain (mtkit/decode/constraints.py), searched by the general loop.
    """
    if src.size(0) == 0:
        return SearchResult([], [])
    limit = max_output_lengths(src.ne(PAD).sum(1) - 1, config, model.cfg.max_positions)  # (B,)
    # Room for the usual output length; the cache doubles in the rare case that needs more.
    capacity = min(int(limit.max()) + 1, 2 * src.size(1) + 8)
    return search(steps(model, src, 1, capacity), src, config, prefix, constraints)


def search(
    step: Step, src: Tensor, config: DecodeConfig, prefix: Tensor | None = None, constraints: Constrained | None = None
) -> SearchResult:
    """Beam search over anything that gives next-token log-probabilities (`Step`).

    When a sentence stops (config.early_stop): "exact" as soon as no live hypothesis can beat
    its nbest-th finished one (the result is then the same as with "none", which runs every
    sentence to its length limit); "patience" once `beam` hypotheses have ended (fairseq's and
    CTranslate2's rule: usually fewer steps, and a later, better ending can be missed). Beam 1 is greedy:
    with no alternatives kept, its first ending ends it. `prefix` (B, P): see `beam_search`.
    """
    if src.size(0) == 0:
        return SearchResult([], [])
    if config.beam == 1 and constraints is None:
        return greedy(step, src, config, prefix)
    return beams(step, src, config, prefix, constraints)


def beams(
    step: Step, src: Tensor, config: DecodeConfig, prefix: Tensor | None = None, constraints: Constrained | None = None
) -> SearchResult:
    """`search`'s general loop: any beam (beam 1 too, as the reference `greedy` is tested against); with
    `constraints`, dynamic beam allocation decides the candidates (steps 3, 4 and 6) and follows the hypotheses."""
    B, k, K, device = src.size(0), config.beam, config.nbest, src.device
    limit = max_output_lengths(src.ne(PAD).sum(1) - 1, config, step.max_positions)  # (B,)
    steps = int(limit.max()) + 1
    dtype = step.dtype
    finished = _Finished(
        torch.full((B, K), NEG_INF, dtype=dtype, device=device),
        src.new_zeros(B, K, steps),
        src.new_zeros(B, K),
        src.new_zeros(B),
    )
    done_at = [0] * B
    # 1. Each sentence is encoded once (by the step) and starts from one row; after the first
    #    token, each of its k beams is a row.
    alive = torch.arange(B, device=device)  # (n,) the sentences still searching, in the step's order
    tokens = src.new_zeros(B, 1, 0)  # (n, r, t) live hypotheses, BOS left out
    logp = None  # (n, r) their log-probabilities, once the rows per sentence (r) are known
    last = src.new_full((B,), BOS)
    never = torch.tensor([PAD, BOS], device=device)  # tokens no hypothesis may emit
    for t in range(steps):  # t tokens emitted so far
        n = alive.numel()
        # 2. One decoder step for every live hypothesis.
        lprobs = step.log_probs(last)
        lprobs = lprobs.view(n, lprobs.size(0) // n, -1).index_fill_(2, never, NEG_INF)  # (n, r, V)
        if logp is None:  # a step made with r copies of each sentence: only the first counts
            logp = torch.full(lprobs.shape[:2], NEG_INF, dtype=dtype, device=device)
            logp[:, 0] = 0.0
            tokens = tokens.expand(-1, lprobs.size(1), -1)
        # 3. A sentence at its length limit may only end (with probability 1 for a model that forces it there).
        at_limit = limit[alive] <= t
        if bool(at_limit.any()):
            only_end(lprobs, at_limit, step.forced_eos)
        if constraints is not None:  # a hypothesis ends only once it holds every term
            constraints.block_endings(lprobs)
        if prefix is not None:  # a sentence still within its prefix may only emit the prefix's next token
            lprobs = force_prefix(lprobs, prefix[alive], t)
        # 4. The 2k best extensions: at most k of them end, so k always remain to go on (constrained: DBA's 2k).
        if constraints is None:
            cand, beam, token = top_candidates(logp, lprobs, 2 * k)  # (n, 2k) each
        else:
            cand, beam, token = constraints.candidates(logp, lprobs, 2 * k)
        ends = token.eq(EOS)
        # 5. Endings that rank among the top k finish, scored with the length penalty of |Y| = t + 1.
        ending = ends[:, :k] & torch.isfinite(cand[:, :k])
        if bool(ending.any()):
            score = (cand[:, :k] / length_penalty(t + 1.0, config.alpha, config.lenpen)).masked_fill(~ending, NEG_INF)
            ended = tokens.gather(1, beam[:, :k, None].expand(-1, -1, t))  # (n, k, t)
            finished.add(alive, score, ended)
        # 6. The k best extensions that do not end are the new live hypotheses; each goes to a
        #    slot (a row of the step) that keeps as many of them as can in their parent's row.
        if constraints is None:
            logp, pick = cand.masked_fill(ends, NEG_INF).topk(k, dim=1)  # (n, k)
        else:  # the first k in the order of allocation
            logp, pick = constraints.survivors(cand, ends, k)
        beam, token = beam.gather(1, pick), token.gather(1, pick)
        if k > 1 and tokens.size(1) == k:  # not on the first step, whose one row per sentence fans out
            order = keep_slots(beam)
            logp, beam, token = logp.gather(1, order), beam.gather(1, order), token.gather(1, order)
            if constraints is not None:
                pick = pick.gather(1, order)
        if constraints is not None:
            constraints.choose(pick)
        tokens = torch.cat([tokens.gather(1, beam[..., None].expand(-1, -1, t)), token[..., None]], dim=2)
        rows = (torch.arange(n, device=device) * lprobs.size(1))[:, None] + beam  # (n, k) rows of the step
        # 7. Done: nothing left alive, or (greedy) an ending, or the stop rule says so.
        done = ~torch.isfinite(logp).any(1) | stop(config, finished, alive, logp, limit, t)
        # 8. Done sentences leave the batch, the last ones taking their places; the step follows the hypotheses.
        sentences = None
        if bool(done.any()):
            for b in alive[done].tolist():
                done_at[b] = t + 1
            keep = ~done
            if not bool(keep.any()):
                break
            sentences = keep_places(keep)
            if constraints is not None:
                constraints.keep(sentences)
            alive, tokens, logp, rows, token = (
                alive[sentences],
                tokens[sentences],
                logp[sentences],
                rows[sentences],
                token[sentences],
            )
        step.reorder(rows.reshape(-1), sentences)
        last = token.reshape(-1)
    return SearchResult(finished.hypotheses(), done_at)


def greedy(step: Step, src: Tensor, config: DecodeConfig, prefix: Tensor | None = None) -> SearchResult:
    """Beam 1, the same outputs, scores and steps as `search`'s general loop, with less work around each step.

    Why a loop of its own: with one row per sentence there are no beams to rank, gather or keep in their
    slots, so a step is the model's step, an argmax and one check for endings. The tokens go into one
    (B, limit) tensor instead of being gathered and concatenated every step; the rows at their length limit
    are looked at only once the shortest limit is reached; the step is reordered only when a sentence
    leaves (a `Step` keeps its rows as they are when not told otherwise). The step has one row per sentence, as
    `beam_search` and the shortlist make it. It takes about half the operations around each decoder step
    (the same row). A step that has a `run` (a `StaticStep` given one: `--compile`) takes a lone sentence's steps
    itself, several in one call (its loop compiled, no Python between them), with the same sums in the same order,
    except at the length limit and under a forced prefix.
    """
    B, device, dtype = src.size(0), src.device, step.dtype
    limit = max_output_lengths(src.ne(PAD).sum(1) - 1, config, step.max_positions)  # (B,)
    steps = int(limit.max()) + 1
    out = src.new_zeros(B, steps)  # out[b, t]: sentence b's token t
    alive = torch.arange(B, device=device)  # (n,) the sentences still searching, in the step's order
    live_limit, soonest = limit, int(limit.min())  # the alive sentences' limits, and the smallest of them
    logp = torch.zeros(B, dtype=dtype, device=device)  # (n,) log P of each live output so far
    last = src.new_full((B,), BOS)
    never = torch.tensor([PAD, BOS], device=device)  # tokens no hypothesis may emit
    scores = [NEG_INF] * B  # each sentence's length-penalised score, -inf for one that ended without an output
    done_at = [0] * B
    run = getattr(step, "run", None) if prefix is None and B == 1 else None  # a step's own loop (a compiled one)
    t = 0  # tokens emitted so far
    while t < steps:
        ran = run(last, logp, soonest) if run is not None and t < soonest else None
        if ran is not None and ran[0].numel():  # steps up to an ending, the shortest limit or the window's end
            tokens, logp = ran
            out[0, t : t + tokens.numel()] = tokens
            t, token = t + tokens.numel(), tokens[-1:]
        else:
            lprobs = step.log_probs(last).index_fill_(1, never, NEG_INF)  # (n, V)
            if t >= soonest:  # some sentence is at its length limit: it may only end
                only_end(lprobs, live_limit <= t, step.forced_eos)
            if prefix is not None:
                lprobs = force_prefix(lprobs, prefix[alive], t)
            top, token = lprobs.max(dim=1)  # (n,) each
            logp = logp + top
            out[alive, t] = token
            t += 1
        ended = token.eq(EOS) | ~torch.isfinite(logp)
        if not bool(ended.any()):
            last = token
            continue
        # Sentences that end leave the batch (those with a finite score keep their output); the last ones take
        # their places, as in `search`.
        penalty = length_penalty(float(t), config.alpha, config.lenpen)
        for b, score in zip(alive[ended].tolist(), (logp[ended] / penalty).tolist()):
            done_at[b], scores[b] = t, score
        keep = ~ended
        if not bool(keep.any()):
            break
        sentences = keep_places(keep)
        alive, logp, last, live_limit = alive[sentences], logp[sentences], token[sentences], live_limit[sentences]
        soonest = int(live_limit.min())
        step.reorder(sentences, sentences)
    tokens = out.tolist()  # a sentence's output: the tokens before its EOS, t = done_at - 1 of them
    hypotheses = [[Hypothesis(tokens[b][: done_at[b] - 1], scores[b])] if scores[b] > NEG_INF else [] for b in range(B)]
    return SearchResult(hypotheses, done_at)


def only_end(lprobs: Tensor, at_limit: Tensor, forced_eos: bool) -> None:
    """In place: the rows of sentences at their length limit (at_limit (n,), lprobs (n, ..., V)) may only end, with
    probability 1 for a model that forces EOS there (ModelConfig.forced_eos)."""
    lprobs[at_limit, ..., :EOS] = NEG_INF
    lprobs[at_limit, ..., EOS + 1 :] = NEG_INF
    if forced_eos:
        lprobs[at_limit, ..., EOS] = 0.0


def stop(config: DecodeConfig, finished: _Finished, alive: Tensor, logp: Tensor, limit: Tensor, t: int) -> Tensor:
    """Which live sentences (n,) are done after t + 1 tokens, by config.early_stop (beam 1: its first ending).

    exact: later tokens only lower log P, so the best a live hypothesis can still score is its
    log P over the largest penalty any length left to it allows (|Y| in [t + 2, limit + 1]).
    """
    K = finished.score.size(1)
    if config.beam == 1:
        return torch.isfinite(finished.score[alive, 0])
    if config.early_stop == "patience":
        return finished.count[alive] >= config.beam
    if config.early_stop == "none":
        return torch.zeros_like(alive, dtype=torch.bool)
    best = logp.max(dim=1).values
    lp_max = torch.maximum(
        length_penalty(limit[alive].to(best.dtype) + 1.0, config.alpha, config.lenpen),
        length_penalty(torch.full_like(best, t + 2.0), config.alpha, config.lenpen),
    )
    return finished.score[alive, K - 1] >= best / lp_max
