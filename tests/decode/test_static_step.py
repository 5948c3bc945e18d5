"""A static cache's step (mtkit/model/static.py, `StaticStep`) decodes what the growing cache's step decodes."""

from __future__ import annotations

import pytest
import torch

from mtkit.config import DecodeConfig
from mtkit.decode.beam import beam_search
from mtkit.decode.constraints import Constraints, pack_terms
from mtkit.decode.ensemble import Ensemble, make_step, static_steps
from mtkit.decode.shortlist import Restriction
from mtkit.decode.step import StaticStep
from mtkit.model.static import WINDOW
from mtkit.runtime.int8 import quantize_int8
from tests.support.models import batch, random_model, sources

V = 40


def outputs(found):
    return [[h.tokens for h in hs] for hs in found.hypotheses], found.steps


def scores(found):
    return [[h.score for h in hs] for hs in found.hypotheses]


@pytest.mark.parametrize(
    "config",
    [
        DecodeConfig(beam=1, max_len_b=40),  # greedy's loop; noise that runs past one window and grows the cache
        DecodeConfig(beam=4, nbest=2, max_len_b=12),
        DecodeConfig(beam=3, early_stop="exact", max_len_b=12),
    ],
)
def test_a_static_step_finds_what_the_growing_cache_finds(config):
    model = random_model(V, seed=3, max_positions=128).double()  # fp64: no near-tie decided by rounding
    src = batch(sources(7, V, seed=4, max_len=9))
    eager, static = (beam_search(model, src, config, steps=s) for s in (make_step, static_steps()))
    assert outputs(static) == outputs(eager)
    for a, b in zip(scores(static), scores(eager)):
        assert a == pytest.approx(b, abs=1e-9)
    assert max(static.steps) > WINDOW  # several windows, and (capacity 2 S + 8 < 40) a grown cache


def test_a_static_step_gives_the_same_log_probabilities_as_the_model_step_through_reorders():
    model = random_model(V, seed=5, max_positions=64).double()
    src = batch(sources(3, V, seed=6, max_len=6))
    reorders = {  # step: (rows, sentences): beams swapped within sentences; sentence 1 leaving; a row repeated
        2: (torch.tensor([1, 1, 3, 2, 5, 4]), None),
        5: (torch.tensor([0, 1, 4, 5]), torch.tensor([0, 2])),
        9: (torch.tensor([1, 0, 3, 3]), None),
    }
    last = torch.full((6,), 5)
    with torch.inference_mode():  # as a search runs them
        eager, static = make_step(model, src, 2, 4), StaticStep(model, src, 2, 4)
        static.cache.history.fill_(float("nan"))  # what fresh memory may hold: the step must not read it
        for t in range(WINDOW + 4):  # past the first window and the first room of 4 positions
            a, b = eager.log_probs(last), static.log_probs(last)
            assert torch.allclose(a, b, atol=1e-10)
            last = a.argmax(-1)
            if t in reorders:
                rows, sentences = reorders[t]
                for step in (eager, static):
                    step.reorder(rows, sentences)
                last = last[rows]


def test_ensembles_prefixes_and_terms_decode_the_same_over_a_static_cache():
    a, b = random_model(V, seed=1, max_positions=64).double(), random_model(V, seed=2, max_positions=64).double()
    src = batch(sources(5, V, seed=9, max_len=8))
    prefix = torch.tensor([[7, 8], [9, 0], [0, 0], [11, 12], [5, 0]])
    config = DecodeConfig(beam=3, max_len_b=10)
    ensemble = Ensemble([a, b])
    found = [beam_search(ensemble, src, config, prefix, steps=s) for s in (make_step, static_steps())]
    assert outputs(found[1]) == outputs(found[0])
    terms = pack_terms([[[13, 14]], [], [[15]], [], [[16, 17]]], src.device)
    joining = torch.zeros(V, dtype=torch.long)
    found = [beam_search(a, src, config, None, s, Constraints(terms, joining)) for s in (make_step, static_steps())]
    assert outputs(found[1]) == outputs(found[0])


def test_an_int8_model_decodes_the_same_over_a_static_cache():
    model = quantize_int8(random_model(V, seed=8, max_positions=64))
    src = batch(sources(4, V, seed=2, max_len=8))
    for config in (DecodeConfig(beam=1, max_len_b=20), DecodeConfig(beam=3, max_len_b=8)):
        found = [beam_search(model, src, config, steps=s) for s in (make_step, static_steps())]
        assert outputs(found[1]) == outputs(found[0])


def test_a_shortlisted_search_decodes_the_same_over_a_static_cache():
    model = random_model(V, seed=4, max_positions=64).double()
    src = batch(sources(4, V, seed=3, max_len=8))
    batch_rows = Restriction(torch.tensor([0, 1, 2, 3, *range(10, 30)]))
    config = DecodeConfig(beam=2, max_len_b=10)
    found = [beam_search(model, src, config, None, batch_rows.steps(s)) for s in (make_step, static_steps())]
    assert outputs(batch_rows.tokens(found[1])) == outputs(batch_rows.tokens(found[0]))
