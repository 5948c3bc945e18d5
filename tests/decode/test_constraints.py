"""Lexically constrained beam search (dynamic beam allocation): every output holds each of its sentence's terms, whole
and in order of its tokens; sentences without a term decode as without constraints; DBA's allocation by banks."""

from __future__ import annotations

import math

import pytest
import torch

from mtkit.config import EOS, PAD, DecodeConfig
from mtkit.decode.beam import beam_search
from mtkit.decode.constraints import MIN_BEAM, Constraints, pack_terms
from mtkit.decode.ensemble import Ensemble
from mtkit.decode.glossary import Terms
from mtkit.decode.torch_engine import TorchEngine
from tests.support.models import batch, random_model, sources

V = 40


def holds(output: list[int], term: list[int]) -> int:
    """How many times `term` occurs in `output` as a contiguous run, non-overlapping."""
    count, i = 0, 0
    while i + len(term) <= len(output):
        if output[i : i + len(term)] == term:
            count, i = count + 1, i + len(term)
        else:
            i += 1
    return count


@pytest.fixture(scope="module")
def model():
    return random_model(V, seed=11)


TERMS = [[[7, 8, 9]], [[12], [20, 21]], [], [[30, 31, 32, 33], [5]], [[14], [14]]]


@pytest.mark.parametrize("beam", [2, 4, 6])
def test_every_output_holds_every_term_of_its_sentence(model, beam):
    src = batch(sources(len(TERMS), V, seed=3))
    config = DecodeConfig(beam=beam, nbest=2, max_len_b=20)
    found = beam_search(model, src, config, constraints=Constraints(pack_terms(TERMS, src.device)))
    for terms, hypotheses in zip(TERMS, found.hypotheses):
        assert hypotheses
        for h in hypotheses:
            for term in terms:  # the same term twice must be there twice
                assert holds(h.tokens, term) >= terms.count(term), (terms, h.tokens)
            assert EOS not in h.tokens and PAD not in h.tokens


def test_scores_are_the_models_own_and_a_sentence_without_terms_is_unconstrained(model):
    src = batch(sources(3, V, seed=5))
    config = DecodeConfig(beam=4, max_len_b=10)
    plain = beam_search(model, src, config)
    free = beam_search(model, src, config, constraints=Constraints(pack_terms([[], [], []], src.device)))
    assert [[h.tokens for h in s] for s in free.hypotheses] == [[h.tokens for h in s] for s in plain.hypotheses]
    for mine, theirs in zip(free.hypotheses, plain.hypotheses):
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)


def test_allocation_deals_the_beam_round_robin_over_banks_most_advanced_first():
    """One sentence, two live beams: beam 0 has produced the first token of the term (bank 1), beam 1 nothing. The
    candidates go bank 2, bank 1, bank 0, then the second of each, whatever their scores (beam 0 starting the term
    again is bank 1's second, before bank 0's second)."""
    terms = torch.tensor([[[5, 6, 7]]])  # one term, three tokens
    c = Constraints(terms)
    c.met = torch.zeros(1, 2, 1, dtype=torch.bool)
    c.term, c.progress = torch.tensor([[0, -1]]), torch.tensor([[1, 0]])
    lprobs = torch.full((1, 2, 10), -20.0)
    lprobs[0, 0, 6] = -3.0  # beam 0 goes on with the term: bank 2
    lprobs[0, 0, 9] = -0.5  # beam 0 leaves the term: bank 0
    lprobs[0, 1, 5] = -2.0  # beam 1 starts the term: bank 1
    lprobs[0, 1, 8] = -0.1  # beam 1 goes elsewhere: bank 0
    logp = torch.tensor([[-1.0, -1.0]])
    scores, beam, token = c.candidates(logp, lprobs.clone(), 4)
    assert list(zip(beam[0].tolist(), token[0].tolist())) == [(0, 6), (1, 5), (1, 8), (0, 5)]
    assert scores[0].tolist() == pytest.approx([-4.0, -3.0, -1.1, -21.0])
    pick = Constraints.survivors(scores, token.eq(EOS), 2)[1]
    c.choose(pick)
    assert c.term.tolist() == [[0, 0]] and c.progress.tolist() == [[2, 1]]


def test_a_hypothesis_ends_only_once_it_holds_every_term():
    c = Constraints(torch.tensor([[[5, 6]]]))
    lprobs = torch.zeros(1, 1, 10)
    c.block_endings(lprobs)
    assert lprobs[0, 0, EOS] == -math.inf
    c.met = torch.ones(1, 1, 1, dtype=torch.bool)
    lprobs = torch.zeros(1, 1, 10)
    c.block_endings(lprobs)
    assert lprobs[0, 0, EOS] == 0.0


def test_the_engine_decodes_sentences_without_terms_as_without_a_glossary(model):
    """Beside sentences with terms, a sentence without one decodes by the plain search (the same output), and a
    greedy setting gives a sentence with terms the beam it needs."""
    engine = TorchEngine(model)
    ids = sources(4, V, seed=8)
    prefixes = [[] for _ in ids]
    terms = [[], [[7, 8]], [], [[20], [22, 23]]]
    for beam in (1, 4):
        config = DecodeConfig(beam=beam, max_len_b=10)
        plain = engine.search(ids, prefixes, config, None)
        held = engine.search(ids, prefixes, config, None, Terms(terms))
        assert held[0] == plain[0] and held[2] == plain[2]
        for i in (1, 3):
            assert all(holds(held[i][0][0], term) for term in terms[i]), held[i]
    assert MIN_BEAM > 1


def test_terms_hold_for_an_ensemble_and_an_int8_model(model):
    from mtkit.runtime.int8 import quantize_int8

    other = random_model(V, seed=12)
    src = batch(sources(len(TERMS), V, seed=4))
    config = DecodeConfig(beam=4, max_len_b=12)
    int8 = quantize_int8(random_model(V, seed=11))
    for decoder in (Ensemble([model, other]), int8):
        found = beam_search(decoder, src, config, constraints=Constraints(pack_terms(TERMS, src.device)))
        for terms, hypotheses in zip(TERMS, found.hypotheses):
            assert all(holds(hypotheses[0].tokens, term) >= terms.count(term) for term in terms)
