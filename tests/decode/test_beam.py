"""Beam search: its pieces, and invariants against brute force, greedy, one-by-one and no early stopping."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from mtkit.config import BOS, EOS, PAD, DecodeConfig
from mtkit.decode import beam as beam_module
from mtkit.decode import step as step_module
from mtkit.decode.beam import (
    beam_search,
    keep_places,
    keep_slots,
    length_penalty,
    max_output_lengths,
    top_candidates,
    top_k,
)
from mtkit.decode.ensemble import make_step
from tests.support.models import batch, sources


def sequence_logprob(model, src: torch.Tensor, outputs: list[list[int]]) -> list[float]:
    """log P(Y + [EOS] | X) by teacher forcing without any cache, one source, many outputs."""
    tgt_in = batch([[BOS, *y] for y in outputs])[:, :-1]  # [BOS] + y, padded (the EOS column dropped)
    tgt_in[tgt_in.eq(EOS)] = PAD  # only the appended EOS can be there: padding after shorter outputs
    encoded = model.encode(src.expand(len(outputs), -1))
    lprobs = F.log_softmax(model.decode(tgt_in, encoded).double(), dim=-1)
    return [sum(lprobs[i, t, tok].item() for t, tok in enumerate([*y, EOS])) for i, y in enumerate(outputs)]


def test_length_penalty_is_the_gnmt_formula_and_never_decreases():
    assert length_penalty(1.0, 0.6, "gnmt") == pytest.approx(1.0)  # ((5 + 1) / 6)^alpha
    assert length_penalty(7.0, 0.6, "gnmt") == pytest.approx(2.0**0.6)
    assert length_penalty(9.0, 0.5, "fairseq") == pytest.approx(3.0)
    assert length_penalty(9.0, 0.5, "none") == 1.0
    lengths = torch.arange(1, 200, dtype=torch.float64)
    for kind, alpha in itertools.product(("gnmt", "fairseq", "none"), (0.0, 0.6, 1.0, 2.0)):
        lp = length_penalty(lengths, alpha, kind)
        assert isinstance(lp, torch.Tensor) and lp.shape == lengths.shape
        assert bool((lp[1:] >= lp[:-1]).all()), (kind, alpha)
    with pytest.raises(ValueError):
        length_penalty(3.0, 0.6, "bogus")


def test_max_output_length_is_a_times_source_plus_b_within_the_positions():
    n = torch.tensor([0, 3, 10, 500])
    assert max_output_lengths(n, DecodeConfig(), 1024).tolist() == [50, 53, 60, 550]
    assert max_output_lengths(n, DecodeConfig(max_len_a=1.5, max_len_b=2), 1024).tolist() == [2, 6, 17, 752]
    assert max_output_lengths(n, DecodeConfig(), 256).tolist() == [50, 53, 60, 255]  # BOS needs a position


def test_top_candidates_are_the_best_beam_token_pairs():
    g = torch.Generator().manual_seed(0)
    logp, lprobs = torch.randn(3, 4, generator=g), torch.randn(3, 4, 7, generator=g)
    scores, beam, token = top_candidates(logp, lprobs.clone(), 8)
    for s in range(3):
        everything = sorted(((logp[s, b] + lprobs[s, b, v]).item(), b, v) for b in range(4) for v in range(7))[::-1]
        assert [(b, v) for _, b, v in everything[:8]] == list(zip(beam[s].tolist(), token[s].tolist()))
        assert scores[s].tolist() == pytest.approx([x for x, _, _ in everything[:8]])


@pytest.mark.parametrize("width", [4096, 32000])
def test_top_k_by_groups_finds_what_torch_topk_finds(width):
    g = torch.Generator().manual_seed(width)
    x = torch.randn(6, width, generator=g)
    groups = width // 16
    x[1, ::groups] += 10.0  # row 1: its 16 best in one group (columns c, c + groups, ...)
    x[2, torch.randperm(width, generator=g)[: width - 5]] = -math.inf  # row 2: 5 finite values, 3 -inf in the top 8
    x[3] = x[3].round(decimals=1)  # row 3: many equal values
    values, indices = top_k(x, 8)
    want = x.topk(8, dim=1).values
    assert torch.equal(values, want) and torch.equal(x.gather(1, indices), values)
    assert all(len(set(row)) == 8 for row in indices.tolist())  # 8 different columns, -inf ones included
    assert sorted(indices[1].tolist()) == sorted(x[1].topk(8).indices.tolist())


def test_new_hypotheses_keep_their_parents_slots_where_they_can():
    parent = torch.tensor([[2, 2, 0, 3], [1, 1, 1, 1], [0, 1, 2, 3], [3, 0, 3, 0]])  # best child first
    order = keep_slots(parent)
    assert order.tolist() == [[2, 1, 0, 3], [1, 0, 2, 3], [0, 1, 2, 3], [1, 2, 3, 0]]
    for row, slots in zip(parent, order):
        assert sorted(slots.tolist()) == [0, 1, 2, 3]  # every hypothesis gets exactly one slot
        for slot, hyp in enumerate(slots.tolist()):
            if slot in row.tolist():  # a parent with a child keeps its best child in its slot
                assert hyp == row.tolist().index(slot)


def test_finished_sentences_places_are_taken_by_the_last_ones():
    keep = torch.tensor([True, False, True, False, True, True])
    assert keep_places(keep).tolist() == [0, 4, 2, 5]
    assert keep_places(torch.tensor([True, True, False])).tolist() == [0, 1]
    assert keep_places(torch.tensor([False, True])).tolist() == [1]


def test_reordering_within_sentences_keeps_one_encoder_copy_and_equals_a_full_reorder(make_model):
    model = make_model(20, seed=0)
    src = batch(sources(3, 20, seed=1))
    sentences = torch.arange(3)

    def two_beams(capacity: int):  # a fresh cache each time: a cache is used once
        cache = model.init_cache(model.encode(src), capacity).reorder(sentences.repeat_interleave(2), sentences)
        return model.decode_step(torch.tensor([[BOS], [BOS], [5], [6], [7], [BOS]]), cache)[1]

    rows = torch.tensor([1, 1, 2, 3, 5, 4])  # each sentence's rows stay its own
    shared, full = two_beams(4).reorder(rows, sentences), two_beams(0).reorder(rows)
    assert shared.beams == 2 and full.beams == 1
    assert shared.layers[0].cross_k.size(0) == 3 and full.layers[0].cross_k.size(0) == 6
    tgt = torch.tensor([[9], [10], [11], [12], [13], [14]])
    assert torch.allclose(model.decode_step(tgt, shared)[0], model.decode_step(tgt, full)[0], atol=1e-6)
    left = torch.tensor([0, 2])  # the second sentence leaves
    fewer = two_beams(4).reorder(torch.tensor([1, 0, 5, 5]), left)
    alone = model.init_cache(model.encode(src[left]), 1).reorder(torch.tensor([0, 0, 1, 1]), left.new_tensor([0, 1]))
    _, alone = model.decode_step(torch.tensor([[BOS], [BOS], [7], [BOS]]), alone)
    alone = alone.reorder(torch.tensor([1, 0, 3, 3]), left.new_tensor([0, 1]))  # grows its room from 1
    got, want = model.decode_step(tgt[:4], fewer)[0], model.decode_step(tgt[:4], alone)[0]
    assert fewer.beams == 2 and torch.allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("lenpen,alpha", [("gnmt", 0.6), ("gnmt", 2.0), ("fairseq", 1.0), ("none", 0.0)])
def test_a_wide_beam_finds_the_brute_force_k_best(lenpen, alpha, make_model):
    V, L, K = 8, 3, 5  # UNK and 4..7 can be emitted: 1 + 5 + 25 + 125 outputs of at most L tokens
    config = DecodeConfig(beam=160, nbest=K, alpha=alpha, lenpen=lenpen, max_len_a=0.0, max_len_b=L)  # never prunes
    emittable = [t for t in range(V) if t not in (PAD, BOS, EOS)]
    outputs = [list(y) for n in range(L + 1) for y in itertools.product(emittable, repeat=n)]
    lengths = set()
    for seed in (0, 1):
        model = make_model(V, seed=seed, share_embeddings="none").double()
        with torch.no_grad():  # sharper than at initialisation, so that output lengths matter more
            model.output_proj.weight.mul_(8.0)
        src = batch(sources(8, V, seed=4))
        found = beam_search(model, src, config).hypotheses
        for row in range(src.size(0)):
            logprobs = sequence_logprob(model, src[row : row + 1], outputs)
            scores = [lp / length_penalty(len(y) + 1.0, alpha, lenpen) for lp, y in zip(logprobs, outputs)]
            best = sorted(range(len(outputs)), key=scores.__getitem__, reverse=True)[:K]
            assert [h.tokens for h in found[row]] == [outputs[i] for i in best]
            assert [h.score for h in found[row]] == pytest.approx([scores[i] for i in best], abs=1e-9)
            lengths.update(len(outputs[i]) for i in best)
    assert len(lengths) > 2, "the K best should have several lengths"


def greedy(model, ids: list[int], limit: int) -> list[int]:
    """The plain greedy loop: re-run the decoder on the whole prefix, take the argmax, stop at EOS."""
    src, out = batch([ids]), []
    encoded = model.encode(src)
    while True:
        lprobs = F.log_softmax(model.decode(torch.tensor([[BOS, *out]]), encoded)[0, -1], dim=-1)
        lprobs[[PAD, BOS]] = -math.inf
        token = EOS if len(out) == limit else int(lprobs.argmax())
        if token == EOS:
            return out
        out.append(token)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_beam_one_is_greedy(alpha, make_model):
    V = 24
    model = make_model(V, seed=14, share_embeddings="none").double()  # a model that ends sentences early
    config = DecodeConfig(beam=1, alpha=alpha, max_len_b=12)  # alpha 2 tempts a search to go on after EOS
    ids = sources(12, V, seed=6)
    found = beam_search(model, batch(ids), config).hypotheses
    for sentence, hypotheses in zip(ids, found):
        assert hypotheses[0].tokens == greedy(model, sentence, len(sentence) + 12)


@pytest.mark.parametrize(
    "seed,overrides,config",
    [
        (14, {"share_embeddings": "none"}, DecodeConfig(beam=1, alpha=2.0, max_len_b=12)),  # ends early
        (3, {}, DecodeConfig(beam=1, max_len_a=0.0, max_len_b=7)),  # noise: every sentence runs to its limit
        (3, {"forced_eos": True}, DecodeConfig(beam=1, max_len_a=1.0, max_len_b=2, lenpen="fairseq", alpha=1.0)),
        (14, {"share_embeddings": "none"}, DecodeConfig(beam=1, lenpen="none", max_len_b=9)),
    ],
)
@pytest.mark.parametrize("with_prefix", [False, True])
def test_the_greedy_loop_equals_the_general_loop_at_beam_one(seed, overrides, config, with_prefix, make_model):
    """Tokens, scores (bitwise) and steps of `greedy` are those of the general loop run with beam 1."""
    V = 24
    model = make_model(V, seed=seed, **overrides)
    ids = sources(13, V, seed=5)
    src = batch(ids)
    prefix = None
    if with_prefix:
        from mtkit.decode.prefix import prefix_tensor

        prefix = prefix_tensor([[5, 6][: i % 3] for i in range(len(ids))], torch.device("cpu"))
    capacity = src.size(1) * 2 + 8

    def run(loop):
        return loop(make_step(model, src, 1, capacity), src, config, prefix)

    with torch.inference_mode():
        lean, general = run(beam_module.greedy), run(beam_module.beams)
    assert lean.steps == general.steps
    assert [[(h.tokens, h.score) for h in hs] for hs in lean.hypotheses] == [
        [(h.tokens, h.score) for h in hs] for hs in general.hypotheses
    ]
    assert len({len(hs[0].tokens) for hs in lean.hypotheses}) > 1 or config.max_len_a == 0.0


@pytest.mark.parametrize("beam,nbest", [(4, 1), (5, 3)])
def test_a_batch_gives_what_each_sentence_gives_alone(beam, nbest, make_model):
    V = 30
    model = make_model(V, seed=7).double()
    config = DecodeConfig(beam=beam, nbest=nbest, max_len_b=10)
    ids = sources(10, V, seed=8, max_len=15)
    together = beam_search(model, batch(ids), config).hypotheses
    for sentence, hypotheses in zip(ids, together):
        alone = beam_search(model, batch([sentence]), config).hypotheses[0]
        assert [h.tokens for h in hypotheses] == [h.tokens for h in alone]
        assert [h.score for h in hypotheses] == pytest.approx([h.score for h in alone], abs=1e-9)


@pytest.mark.parametrize(
    "config",
    [
        DecodeConfig(max_len_b=20),
        DecodeConfig(beam=5, nbest=2, max_len_b=20),
        DecodeConfig(alpha=2.0, max_len_b=10),
        DecodeConfig(lenpen="fairseq", alpha=0.3, max_len_b=4),
    ],
    ids=["default", "nbest", "alpha2", "fairseq"],
)
def test_exact_early_stopping_never_changes_the_result(config, make_model):
    V, stopped_early = 16, 0
    for seed in (1, 5):  # random models with a small vocabulary that end sentences early and often
        model = make_model(V, seed=seed, share_embeddings="none").double()
        with torch.no_grad():  # a little sharper than at initialisation: a stop rule that ignores the growth
            model.output_proj.weight.mul_(2.0)  # of the length penalty then changes results (with alpha 2)
        src = batch(sources(40, V, seed=20 + seed, max_len=12))
        early = beam_search(model, src, dataclasses.replace(config, early_stop="exact"))
        full = beam_search(model, src, dataclasses.replace(config, early_stop="none"))
        assert [[h.tokens for h in hs] for hs in early.hypotheses] == [[h.tokens for h in hs] for hs in full.hypotheses]
        for a, b in zip(early.hypotheses, full.hypotheses):  # batches shrink differently: last-bit differences
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9)
        stopped_early += sum(e < f for e, f in zip(early.steps, full.steps))
    assert stopped_early >= 10, "the test needs inputs on which early stopping actually stops early"


def test_hypotheses_are_ranked_and_within_the_length_limit(make_model):
    V = 40
    model = make_model(V, seed=11)
    ids = sources(8, V, seed=12)
    config = DecodeConfig(beam=6, nbest=4, max_len_a=0.5, max_len_b=3)
    result = beam_search(model, batch(ids), config)
    for sentence, hypotheses in zip(ids, result.hypotheses):
        assert 1 <= len(hypotheses) <= 4
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hypotheses}) == len(hypotheses)
        assert all(len(h.tokens) <= int(0.5 * len(sentence) + 3) for h in hypotheses)
        assert all(t not in (PAD, BOS, EOS) for h in hypotheses for t in h.tokens)
    nothing = beam_search(model, batch(ids), DecodeConfig(max_len_a=0.0, max_len_b=0)).hypotheses
    assert all(hs[0].tokens == [] for hs in nothing)


def test_patience_stops_before_the_limit_and_never_beats_the_full_search(make_model):
    V = 16
    model = make_model(V, seed=5, share_embeddings="none").double()
    with torch.no_grad():
        model.output_proj.weight.mul_(2.0)
    src = batch(sources(40, V, seed=25, max_len=12))
    config = DecodeConfig(beam=3, max_len_b=20)
    full = beam_search(model, src, dataclasses.replace(config, early_stop="none"))
    patience = beam_search(model, src, dataclasses.replace(config, early_stop="patience"))
    assert all(p <= f for p, f in zip(patience.steps, full.steps))
    assert any(p < f for p, f in zip(patience.steps, full.steps)), "inputs on which patience stops sooner"
    differ = 0
    for p, f in zip(patience.hypotheses, full.hypotheses):  # the same search up to its stop: fewer endings
        assert p[0].score <= f[0].score + 1e-12
        differ += p[0].tokens != f[0].tokens
    assert differ < len(full.hypotheses)
    with pytest.raises(Exception, match="early_stop"):
        DecodeConfig(early_stop="sometimes")


def test_the_output_layer_in_row_blocks_gives_the_same_log_probabilities(make_model, monkeypatch):
    model = make_model(30, seed=1)
    src = batch([[5, 6, 7], [8, 9, 4]])
    whole = make_step(model, src, 4, 4).log_probs(torch.tensor([BOS] * 8))
    monkeypatch.setattr(step_module, "PROJECT_ROWS", 3)  # 8 rows: blocks of 3, 3 and 2
    blocks = make_step(model, src, 4, 4).log_probs(torch.tensor([BOS] * 8))
    assert torch.allclose(blocks, whole, atol=1e-6)
    assert torch.allclose(whole.exp().sum(-1), torch.ones(8), atol=1e-5)


def test_a_search_over_a_vocabulary_wide_enough_for_grouped_top_k_is_unchanged_by_it(make_model, monkeypatch):
    model = make_model(300, seed=4)  # beam 4 x 300 words = 1,200 columns in 75 groups: top_k takes its grouped path
    src = batch(sources(6, 300, seed=5))
    config = DecodeConfig(beam=4, nbest=4, max_len_b=8)
    grouped = beam_search(model, src, config).hypotheses
    monkeypatch.setattr(beam_module, "top_k", lambda x, count: x.topk(count, dim=1))
    plain = beam_search(model, src, config).hypotheses
    assert [[h.tokens for h in hs] for hs in grouped] == [[h.tokens for h in hs] for hs in plain]
    assert [[h.score for h in hs] for hs in grouped] == [[h.score for h in hs] for hs in plain]
