"""Sampling outputs from the model instead of searching for the best one (back-translation, Edunov et al. 2018).

Each output is drawn token by token from the model's next-token distribution, reshaped by a
temperature, then cut to the top-k tokens, then to the top-p nucleus (Holtzman et al. 2020).
A sample's randomness comes from its own stream of uniforms, seeded by (seed, the source's
subword ids, the sample's index): a sentence gets the same samples alone or in any batch, and
sample j of N is sample j of any other N. A token is drawn by inverting the cumulative
distribution at that sample's uniform for the step. Scores are the model's own log P(Y|X)
(temperature 1, nothing cut, EOS included), the figure `--score-only` gives for the same pair.
"""

from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import BOS, EOS, PAD, DecodeConfig, SamplingConfig
from mtkit.decode.beam import Hypothesis, SearchResult, max_output_lengths
from mtkit.decode.ensemble import Ensemble, make_step
from mtkit.decode.prefix import force_prefix
from mtkit.decode.step import Step
from mtkit.model.transformer import Transformer

NEG_INF = -math.inf


def stream_seed(seed: int, source: list[int], sample: int) -> int:
    """A 63-bit seed from the user's seed, the source ids and the sample index (stable across runs and machines)."""
    text = f"{seed}|{sample}|{','.join(map(str, source))}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def uniforms(sources: list[list[int]], samples: int, seed: int, lengths: list[int], steps: int) -> Tensor:
    """(B * samples, steps) uniforms in [0, 1): row b * samples + j is sample j of sentence b.

    Each row draws exactly its own sentence's `lengths[b]` numbers, so what it gets never depends
    on the other sentences of the batch; the rest of the row is never read.
    """
    out = torch.zeros(len(sources) * samples, steps, dtype=torch.float64)
    for b, source in enumerate(sources):
        for j in range(samples):
            g = torch.Generator().manual_seed(stream_seed(seed, source, j))
            out[b * samples + j, : lengths[b]] = torch.rand(lengths[b], generator=g, dtype=torch.float64)
    return out


def sampling_weights(logits: Tensor, allowed: Tensor, config: SamplingConfig) -> Tensor:
    """Probabilities (n, V) to draw from: temperature, then top-k, then top-p; 0 where not allowed.

    `logits` may be log-probabilities: a constant per row changes nothing.
    """
    scores = (logits.double() / config.temperature).masked_fill(~allowed, NEG_INF)
    if config.topk:
        kth = scores.topk(min(config.topk, scores.size(-1)), dim=-1).values[:, -1:]  # (n, 1)
        scores = scores.masked_fill(scores < kth, NEG_INF)
    probs = F.softmax(scores, dim=-1)
    if config.topp < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        before = sorted_p.cumsum(-1) - sorted_p  # mass of the more probable tokens
        drop = (before >= config.topp).scatter(-1, order, before >= config.topp)  # back to vocabulary order
        probs = probs.masked_fill(drop, 0.0)
    return probs


def draw(weights: Tensor, u: Tensor) -> Tensor:
    """The token (n,) where each row's cumulative weight first exceeds u * total (inverse-CDF sampling)."""
    cdf = weights.cumsum(-1)  # (n, V)
    target = (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1)  # (n, 1)
    return torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp(max=weights.size(-1) - 1)


@torch.inference_mode()
def sample(
    model: Transformer | Ensemble,
    src: Tensor,
    config: DecodeConfig = DecodeConfig(),
    sampling: SamplingConfig = SamplingConfig(),
    prefix: Tensor | None = None,
) -> SearchResult:
    """`sampling.samples` samples of each source of the batch (B, S) = ids + [EOS], right-padded with 0.

    Hypotheses come in sample order (not sorted), each scored log P(Y|X) under the model.
    `prefix` (B, P), PAD-padded: tokens each output must begin with (mtkit/decode/prefix.py).
    """
    if src.size(0) == 0:
        return SearchResult([], [])
    limit = max_output_lengths(src.ne(PAD).sum(1) - 1, config, model.cfg.max_positions)  # (B,)
    capacity = min(int(limit.max()) + 1, 2 * src.size(1) + 8)  # as beam search: the cache grows if needed
    return draw_samples(make_step(model, src, sampling.samples, capacity), src, config, sampling, prefix)


def draw_samples(
    step: Step, src: Tensor, config: DecodeConfig, sampling: SamplingConfig, prefix: Tensor | None = None
) -> SearchResult:
    """Sampling over anything that gives next-token log-probabilities (`Step`), `sampling.samples` rows a sentence."""
    B, N, device = src.size(0), sampling.samples, src.device
    limit = max_output_lengths(src.ne(PAD).sum(1) - 1, config, step.max_positions)  # (B,)
    steps = int(limit.max()) + 1
    sources = [row[row.ne(PAD)][:-1].tolist() for row in src.cpu()]  # the ids that seed each sentence's streams
    noise = uniforms(sources, N, sampling.seed, [int(n) + 1 for n in limit], steps).to(device)
    # 1. Each sentence is encoded once (by the step); each of its N samples is a row.
    per_row = torch.arange(B, device=device).repeat_interleave(N)  # (B * N,) row -> sentence
    limit, rows = limit[per_row], per_row.numel()
    prefix = None if prefix is None else prefix[per_row]
    alive = torch.arange(rows, device=device)  # the rows still sampling
    tokens = src.new_zeros(rows, steps)
    logp = torch.zeros(rows, dtype=step.dtype, device=device)
    length = src.new_zeros(rows)  # tokens emitted, EOS included
    last = src.new_full((rows,), BOS)
    for t in range(steps):
        # 2. One decoder step for every live sample; the model's own log-probabilities score it.
        lprobs = step.log_probs(last)  # (n, V)
        # 3. What may come next: never PAD or BOS; only EOS at the length limit; the prefix's token within it.
        allowed = torch.ones_like(lprobs, dtype=torch.bool)
        allowed[:, PAD] = allowed[:, BOS] = False
        at_limit = limit[alive] <= t
        allowed[at_limit] = F.one_hot(torch.tensor(EOS, device=device), lprobs.size(-1)).bool()
        if prefix is not None:
            allowed = torch.isfinite(force_prefix(allowed.to(lprobs.dtype).log(), prefix[alive], t))
        # 4. Draw each row's token with its own uniform for this step, and score it.
        token = draw(sampling_weights(lprobs, allowed, sampling), noise[alive, t])  # (n,)
        logp[alive] += lprobs.gather(1, token[:, None]).squeeze(1)
        tokens[alive, t] = token
        # 5. Rows that drew EOS are done and leave the batch; the step keeps the rest.
        ended = token.eq(EOS)
        if bool(ended.any()):
            length[alive[ended]] = t + 1
            keep = (~ended).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            alive, token = alive[keep], token[keep]
            step.select(keep)
        last = token
    return _result(tokens, logp, length, B, N)


def _result(tokens: Tensor, logp: Tensor, length: Tensor, B: int, N: int) -> SearchResult:
    tokens_l, logp_l, length_l = tokens.tolist(), logp.tolist(), length.tolist()
    hypotheses = [
        [Hypothesis(tokens_l[r][: length_l[r] - 1], logp_l[r]) for r in range(b * N, (b + 1) * N)] for b in range(B)
    ]
    steps = [max(length_l[b * N : (b + 1) * N]) for b in range(B)]
    return SearchResult(hypotheses, steps)
