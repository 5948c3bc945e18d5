"""Scoring given pairs: log P(target + EOS | source) equals the teacher-forced sum computed by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mtkit.config import BOS, EOS, DecodeConfig
from mtkit.decode.beam import beam_search
from mtkit.decode.loading import load_translator
from mtkit.decode.scoring import score_batch
from tests.support.models import batch, sources

V = 30


def by_hand(model, source: list[int], target: list[int]) -> float:
    """sum_t log p(y_t | y_<t, X): one decoder run per position, no batching, no cache."""
    encoded = model.encode(torch.tensor([[*source, EOS]]))
    total = 0.0
    for t, token in enumerate([*target, EOS]):
        logits = model.decode(torch.tensor([[BOS, *target[:t]]]), encoded)[0, -1]
        total += F.log_softmax(logits, dim=-1)[token].item()
    return total


def test_a_batch_of_pairs_scores_the_teacher_forced_sum(make_model):
    model = make_model(V, seed=3).double()
    src, tgt = sources(5, V, seed=1), sources(5, V, seed=2)
    tgt[2] = []  # an empty target: log P(EOS | X)
    found = score_batch(model, src, tgt)
    assert [n for _, n in found] == [len(y) + 1 for y in tgt]
    assert [lp for lp, _ in found] == pytest.approx([by_hand(model, x, y) for x, y in zip(src, tgt)], abs=1e-9)


def test_a_beam_hypothesis_scores_what_the_search_said(make_model):
    model = make_model(V, seed=5).double()
    ids = sources(4, V, seed=9)
    found = beam_search(model, batch(ids), DecodeConfig(lenpen="none", max_len_b=5)).hypotheses
    scored = score_batch(model, ids, [hs[0].tokens for hs in found])
    assert [lp for lp, _ in scored] == pytest.approx([hs[0].score for hs in found], abs=1e-9)


def test_the_translator_scores_text_pairs_in_order(cli_model):
    translator = load_translator(cli_model, device="cpu")
    pairs = [("a dog runs in the park", "a man"), ("", "the cat"), ("a cat", "a small red ball on the street")]
    scores = translator.score(pairs, batch_tokens=8)  # small batches: the order must still be the input's
    ids = [(translator.vocab.encode_batch([s])[0], translator.vocab.encode_batch([t])[0]) for s, t in pairs]
    assert [s.line for s in scores] == [1, 2, 3]
    assert [s.length for s in scores] == [len(t) + 1 for _, t in ids]
    model = translator.engine.model
    assert [s.logprob for s in scores] == pytest.approx([by_hand(model, s, t) for s, t in ids], abs=1e-4)
    assert scores[0].average == pytest.approx(scores[0].logprob / scores[0].length)
