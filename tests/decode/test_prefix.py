"""A forced target prefix: outputs begin with it, with beam search and with sampling; too long is one sentence."""

from __future__ import annotations

import pytest
import torch

from mtkit.config import PAD, DecodeConfig, SamplingConfig
from mtkit.decode.beam import beam_search
from mtkit.decode.loading import load_translator
from mtkit.decode.prefix import force_prefix, prefix_tensor
from mtkit.decode.sampling import sample
from mtkit.decode.scoring import score_batch
from mtkit.errors import MtkitError
from tests.support.models import batch, sources

V = 30


def test_force_prefix_leaves_only_the_prefix_token_in_rows_that_have_one():
    lprobs = torch.randn(3, 2, 6)
    prefix = torch.tensor([[4, 5], [5, PAD], [PAD, PAD]])
    out = force_prefix(lprobs, prefix, 1)
    assert torch.equal(out[1:], lprobs[1:])  # no token at step 1: unchanged
    assert torch.equal(out[0, :, 5], lprobs[0, :, 5]) and bool(torch.isinf(out[0, :, [0, 1, 2, 3, 4]]).all())
    assert force_prefix(lprobs, prefix, 2) is lprobs and force_prefix(lprobs, None, 0) is lprobs
    assert prefix_tensor([[], []], torch.device("cpu")) is None
    assert prefix_tensor([[7], [], [8, 9]], torch.device("cpu")).tolist() == [[7, 0], [0, 0], [8, 9]]


@pytest.mark.parametrize("search", ["beam4", "greedy", "sampling"])
def test_outputs_begin_with_their_prefix_and_a_batch_gives_what_each_gives_alone(search, make_model):
    model = make_model(V, seed=7).double()
    ids = sources(4, V, seed=8, max_len=8)
    prefixes = [[5, 6, 7], [], [9], [10, 10]]
    config = DecodeConfig(beam=1 if search == "greedy" else 4, lenpen="none", max_len_b=5)

    def run(src_ids, pre):
        prefix = prefix_tensor(pre, torch.device("cpu"))
        if search == "sampling":
            return sample(model, batch(src_ids), config, SamplingConfig(samples=2, seed=1), prefix).hypotheses
        return beam_search(model, batch(src_ids), config, prefix=prefix).hypotheses

    together = run(ids, prefixes)
    for sentence, prefix, hypotheses in zip(ids, prefixes, together):
        assert all(h.tokens[: len(prefix)] == prefix for h in hypotheses)
        alone = run([sentence], [prefix])[0]
        assert [h.tokens for h in alone] == [h.tokens for h in hypotheses]
        forced = score_batch(model, [sentence], [hypotheses[0].tokens])  # the prefix's tokens are scored too
        assert hypotheses[0].score == pytest.approx(forced[0][0], abs=1e-9)


def test_a_prefix_the_search_would_choose_anyway_changes_nothing(make_model):
    model = make_model(V, seed=14, share_embeddings="none").double()
    ids = sources(5, V, seed=6)
    config = DecodeConfig(beam=1, max_len_b=8)
    free = beam_search(model, batch(ids), config).hypotheses
    prefix = prefix_tensor([hs[0].tokens[:2] for hs in free], torch.device("cpu"))
    forced = beam_search(model, batch(ids), config, prefix=prefix).hypotheses
    assert [hs[0].tokens for hs in forced] == [hs[0].tokens for hs in free]


def test_a_prefix_longer_than_the_output_limit_is_one_sentence(cli_model):
    translator = load_translator(cli_model, device="cpu")
    text = translator.translate([("a dog runs", "a man walks in the park")], max_len_a=0.0, max_len_b=40)[0]
    assert text.startswith("a man walks in the park")
    with pytest.raises(MtkitError, match=r"^line 2: the target prefix has \d+ subword tokens, more than the 3 "):
        translator.translate(["a dog", ("a dog runs", "a man walks in the park")], max_len_a=0.0, max_len_b=3)
    assert translator.translate([("", "a man")], max_len_b=3, sampling=SamplingConfig())[0].startswith("a man")
