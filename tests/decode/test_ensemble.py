"""Ensembles: of one model = the model, of a model with itself = the model, of two = between them; one vocabulary."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mtkit.config import BOS, DecodeConfig
from mtkit.decode.beam import beam_search
from mtkit.decode.ensemble import Ensemble, make_step
from mtkit.decode.loading import load_translator
from mtkit.decode.scoring import score_batch
from mtkit.errors import MtkitError
from tests.support.models import batch, random_model, save_run, sources
from tests.support.spm import BYTE_PIECES, pieces, train_spm

V = 30


@pytest.mark.parametrize("copies", [1, 2])
def test_an_ensemble_of_one_model_or_of_a_model_with_itself_is_the_model(copies, make_model):
    model = make_model(V, seed=7).double()
    ids = sources(5, V, seed=8, max_len=10)
    config = DecodeConfig(beam=3, nbest=2, max_len_b=6)
    alone = beam_search(model, batch(ids), config).hypotheses
    together = beam_search(Ensemble([model] * copies), batch(ids), config).hypotheses
    assert [[h.tokens for h in hs] for hs in together] == [[h.tokens for h in hs] for hs in alone]
    for a, b in zip(together, alone):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9)


def test_two_models_give_the_log_of_their_mean_probability_between_theirs(make_model):
    a, b = make_model(V, seed=1).double(), make_model(V, seed=2).double()
    src, tgt_in = batch([[5, 6, 7]]), torch.tensor([[BOS, 9, 4]])
    pa, pb = (F.softmax(m.decode(tgt_in, m.encode(src)), dim=-1) for m in (a, b))  # (1, 3, V) each
    ensemble = Ensemble([a, b])
    both = ensemble.decode(tgt_in, ensemble.encode(src))
    assert torch.allclose(both, torch.log((pa + pb) / 2), atol=1e-12)  # by hand: log of the mean probability
    low, high = torch.minimum(pa, pb).log() - 1e-12, torch.maximum(pa, pb).log() + 1e-12
    assert bool(((both >= low) & (both <= high)).all())
    # A one-token target (EOS alone) by the scorer: log((p_a + p_b) / 2), between log p_a and log p_b.
    [(la, _)], [(lb, _)], [(lab, _)] = (score_batch(m, [[5, 6, 7]], [[]]) for m in (a, b, ensemble))
    assert lab == pytest.approx(math.log((math.exp(la) + math.exp(lb)) / 2), abs=1e-12)
    assert min(la, lb) < lab < max(la, lb)
    # The incremental path (a step, each model with its own cache) agrees with teacher forcing.
    step = make_step(ensemble, src, 2, 4)  # two rows of the one sentence
    first = step.log_probs(tgt_in[0, :1].expand(2))
    step.reorder(torch.tensor([1, 0]))
    second = step.log_probs(tgt_in[0, 1:2].expand(2))
    assert torch.allclose(torch.stack([first[0], second[0]]), both[0, :2], atol=1e-9)


def test_models_with_different_vocabularies_are_refused_in_one_sentence(tmp_path, spm_bytes, cli_model):
    other = train_spm(["a b c d e f g h i j k l m n o p q r s t u v w x y z"] * 50, vocab_size=40 + BYTE_PIECES)
    [path] = save_run(tmp_path, other, {1: random_model(pieces(other), seed=1)})
    with pytest.raises(
        MtkitError,
        match=r"^.* and .* have different vocabularies; an ensemble needs models trained with one vocabulary\.$",
    ):
        load_translator([cli_model, path], device="cpu")
    translator = load_translator([cli_model, cli_model], device="cpu")
    assert translator.translate(["a dog runs"], max_len_b=4) == load_translator(cli_model, device="cpu").translate(
        ["a dog runs"], max_len_b=4
    )
