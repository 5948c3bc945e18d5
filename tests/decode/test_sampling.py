"""Sampling: top-k 1 is greedy, frequencies follow the (reshaped) softmax, seeds make it reproducible per sentence."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from mtkit.config import EOS, DecodeConfig, SamplingConfig
from mtkit.decode.beam import beam_search
from mtkit.decode.sampling import draw, draw_samples, sample, sampling_weights
from mtkit.decode.scoring import score_batch
from tests.support.models import batch, sources


class FirstTokenStep:
    """A hand-built model, as the `Step` a search sees: the first step's logits are given; then EOS, surely."""

    max_positions, dtype = 64, torch.float64

    def __init__(self, logits: list[float]):
        self.first, self.t = torch.tensor(logits, dtype=torch.float64), 0

    def log_probs(self, last):
        logits = self.first.expand(last.numel(), -1).clone()
        if self.t > 0:
            logits.fill_(-40.0)
            logits[:, EOS] = 40.0
        self.t += 1
        return logits.log_softmax(-1)

    def reorder(self, rows, sentences=None):
        pass

    def select(self, rows):
        pass


LOGITS = [0.0, 0.0, 0.0, -1.0, 1.5, 0.5, -0.5, 1.0, 0.2]  # PAD, UNK, BOS, EOS, 4..8


def expected_first(config: SamplingConfig) -> torch.Tensor:
    """The distribution the first token should follow, by hand: PAD/BOS removed, /T, top-k, top-p."""
    p = torch.tensor(LOGITS, dtype=torch.float64) / config.temperature
    p[[0, 2]] = -math.inf
    p = torch.softmax(p, 0)
    order = p.argsort(descending=True).tolist()
    kept, mass = [], 0.0
    for rank, token in enumerate(order):
        if (config.topk and rank >= config.topk) or mass >= config.topp or p[token] == 0:
            break
        kept.append(token)
        mass += float(p[token])
    out = torch.zeros_like(p)
    out[kept] = p[kept]
    return out / out.sum()


def first_tokens(result) -> list[int]:
    return [(h.tokens or [EOS])[0] for h in result.hypotheses[0]]  # an empty output began with EOS


@pytest.mark.parametrize(
    "config",
    [
        SamplingConfig(),
        SamplingConfig(temperature=0.5),
        SamplingConfig(topk=3),
        SamplingConfig(topp=0.6, temperature=2.0),
    ],
    ids=["plain", "T0.5", "k3", "p0.6"],
)
def test_first_token_frequencies_follow_the_softmax(config):
    n = 20_000
    config = dataclasses.replace(config, samples=n, seed=11)
    result = draw_samples(FirstTokenStep(LOGITS), batch([[4, 5, 6]]), DecodeConfig(max_len_b=3), config)
    counts = torch.bincount(torch.tensor(first_tokens(result)), minlength=len(LOGITS))
    freq, p = counts.double() / n, expected_first(config)
    bound = 4.5 * torch.sqrt(p * (1 - p) / n) + 1e-9  # 4.5 standard errors: the seed is fixed, so this never flakes
    assert bool(((freq - p).abs() <= bound).all()), (freq.tolist(), p.tolist())
    assert bool((counts[p == 0] == 0).all())  # filtered-out tokens are never drawn


def test_the_frequency_test_can_fail():
    """The same check against a wrong distribution (no temperature applied) must fail."""
    n, config = 20_000, SamplingConfig(temperature=0.5, samples=20_000, seed=11)
    result = draw_samples(FirstTokenStep(LOGITS), batch([[4]]), DecodeConfig(max_len_b=3), config)
    counts = torch.bincount(torch.tensor(first_tokens(result)), minlength=len(LOGITS))
    wrong = expected_first(SamplingConfig())
    assert not bool(((counts.double() / n - wrong).abs() <= 4.5 * torch.sqrt(wrong * (1 - wrong) / n)).all())


def test_top_p_keeps_the_nucleus_and_draw_inverts_the_cdf():
    logits = torch.tensor([[math.log(0.5), math.log(0.3), math.log(0.15), math.log(0.05)]])
    allowed = torch.ones_like(logits, dtype=torch.bool)
    weights = sampling_weights(logits, allowed, SamplingConfig(topp=0.7))
    assert weights[0].tolist() == pytest.approx([0.5, 0.3, 0.0, 0.0])
    u = torch.tensor([0.0, 0.62, 0.63, 0.99])
    assert draw(weights.expand(4, -1) / 0.8, u).tolist() == [0, 0, 1, 1]  # cdf 0.625, 1.0


def test_top_k_one_is_greedy(make_model):
    V = 24
    model = make_model(V, seed=14, share_embeddings="none").double()
    src = batch(sources(6, V, seed=6))
    config = DecodeConfig(beam=1, lenpen="none", max_len_b=8)
    greedy = beam_search(model, src, config).hypotheses
    sampled = sample(model, src, config, SamplingConfig(topk=1, samples=2, seed=3)).hypotheses
    for g, s in zip(greedy, sampled):
        assert s[0].tokens == s[1].tokens == g[0].tokens
        assert s[0].score == pytest.approx(g[0].score, abs=1e-9)


def test_samples_are_reproducible_batch_independent_and_scored_log_p(make_model):
    V = 30
    model = make_model(V, seed=7).double()
    ids = sources(4, V, seed=8, max_len=10)
    config, sampling = DecodeConfig(max_len_b=5), SamplingConfig(samples=3, seed=5, topp=0.95)
    together = sample(model, batch(ids), config, sampling).hypotheses
    assert together == sample(model, batch(ids), config, sampling).hypotheses  # same seed, same samples
    other = sample(model, batch(ids), config, dataclasses.replace(sampling, seed=6)).hypotheses
    assert [[h.tokens for h in hs] for hs in other] != [[h.tokens for h in hs] for hs in together]
    for sentence, hypotheses in zip(ids, together):
        alone = sample(model, batch([sentence]), config, sampling).hypotheses[0]
        assert [h.tokens for h in alone] == [h.tokens for h in hypotheses]
        first = sample(model, batch([sentence]), config, dataclasses.replace(sampling, samples=1)).hypotheses[0]
        assert first[0].tokens == hypotheses[0].tokens  # sample j does not depend on how many are drawn
        forced = score_batch(model, [sentence] * 3, [h.tokens for h in hypotheses])
        assert [h.score for h in hypotheses] == pytest.approx([lp for lp, _ in forced], abs=1e-9)
    assert len({tuple(h.tokens) for hs in together for h in hs}) > 4  # samples differ from one another


def test_sampling_config_says_what_it_accepts():
    for bad in ({"topk": -1}, {"topp": 0.0}, {"topp": 1.5}, {"temperature": 0.0}, {"samples": 0}):
        with pytest.raises(Exception, match="SamplingConfig"):
            SamplingConfig(**bad)
