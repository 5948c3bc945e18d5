"""Invariants of the paper's Transformer: size, cache = full pass, no padding leak, causality."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import mtkit
from mtkit.config import BOS, EOS, PAD
from mtkit.errors import MtkitError
from mtkit.model.linear import TiedOutput


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("preset, low, high", [("base", 60e6, 66e6), ("big", 208e6, 218e6)])
def test_parameter_counts_match_the_paper(preset, low, high):
    with torch.device("meta"):  # counts shapes without allocating 0.9 GB for `big`
        model = mtkit.build_model(preset, 37000)
    assert low <= n_params(model) <= high


def test_presets_carry_the_papers_numbers():
    base, big = mtkit.PRESETS["base"].model, mtkit.PRESETS["big"].model
    assert (base.encoder_layers, base.decoder_layers, base.d_model, base.d_ff, base.heads, base.dropout) == (
        6,
        6,
        512,
        2048,
        8,
        0.1,
    )
    assert (big.encoder_layers, big.d_model, big.d_ff, big.heads, big.dropout) == (6, 1024, 4096, 16, 0.3)
    assert mtkit.PRESETS["base"].train.label_smoothing == 0.1 and mtkit.PRESETS["base"].train.warmup == 4000
    assert mtkit.PRESETS["base"].train.adam_betas == (0.9, 0.98) and mtkit.PRESETS["base"].train.adam_eps == 1e-9
    assert (mtkit.PRESETS["base"].train.max_steps, mtkit.PRESETS["big"].train.max_steps) == (100_000, 300_000)


def tiny(seed: int = 0, vocab: int = 40, **overrides) -> mtkit.Transformer:
    torch.manual_seed(seed)
    return mtkit.build_model("tiny", vocab, **overrides).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, EOS, PAD, PAD, PAD], [12, 13, 14, EOS, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 20, 21, 22, 23], [BOS, 24, PAD, PAD, PAD], [BOS, 25, 26, 27, PAD]])
    return src, tgt_in


@pytest.mark.parametrize("pre_norm", [False, True])
def test_step_by_step_decoding_with_cache_equals_the_full_pass(pre_norm):
    model = tiny(pre_norm=pre_norm)
    src, tgt_in = batch()
    with torch.no_grad():
        full = model(src, tgt_in)
        cache = model.init_cache(model.encode(src))
        steps = []
        for t in range(tgt_in.size(1)):
            logits, cache = model.decode_step(tgt_in[:, t : t + 1], cache)
            steps.append(logits)
    assert cache.length == tgt_in.size(1)
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-4


def test_decoding_a_block_after_a_cached_prefix_equals_the_full_pass():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        full = model(src, tgt_in)
        cache = model.init_cache(model.encode(src))
        first, cache = model.decode_step(tgt_in[:, :2], cache)
        rest, cache = model.decode_step(tgt_in[:, 2:], cache)
    assert (torch.cat([first, rest], dim=1) - full).abs().max() < 1e-4


def test_padding_does_not_leak_into_real_positions():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        together = model.encode(src)
        logits = model.decode(tgt_in, together)
        for i, (s_len, t_len) in enumerate([(6, 5), (3, 2), (4, 4)]):
            alone = model.encode(src[i : i + 1, :s_len])
            assert (alone.memory[0] - together.memory[i, :s_len]).abs().max() < 1e-5
            alone_logits = model.decode(tgt_in[i : i + 1, :t_len], alone)
            assert (alone_logits[0] - logits[i, :t_len]).abs().max() < 1e-5


def test_the_decoder_is_causal():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        before = model(src, tgt_in)
        for t in range(1, tgt_in.size(1)):
            changed = tgt_in.clone()
            changed[:, t] = 30
            after = model(src, changed)
            assert (after[:, :t] - before[:, :t]).abs().max() == 0  # earlier positions untouched
            assert (after[0, t:] - before[0, t:]).abs().max() > 0  # and the change is seen from t on


def test_embeddings_are_shared_by_default_and_can_be_untied():
    shared = tiny()
    assert shared.src_embed.table is shared.tgt_embed.table
    assert isinstance(shared.output_proj, TiedOutput) and shared.output_proj.weight is shared.tgt_embed.table.weight
    untied = tiny(vocab=40, tgt_vocab_size=55, share_embeddings="none")
    assert untied.src_embed.table.num_embeddings == 40 and untied.tgt_embed.table.num_embeddings == 55
    src, tgt_in = batch()
    assert untied(src, tgt_in).shape == (3, 5, 55)
    with pytest.raises(MtkitError, match="share_embeddings"):
        tiny(vocab=40, tgt_vocab_size=55)  # "all" needs one joint vocabulary


def test_positions_beyond_the_maximum_are_refused():
    model = tiny()
    too_long = torch.full((1, model.cfg.max_positions + 1), 5)
    with pytest.raises(ValueError, match="max_positions"):
        model.encode(too_long)


def test_same_seed_same_weights():
    a, b = tiny(seed=3), tiny(seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_the_state_dict_keeps_the_keys_of_earlier_checkpoints():
    """Checkpoints written before the tied output became a module (tests/model/state_dict_keys.json, made by the
    code of that time) load as they are: the same keys and shapes, the tied matrix saved once per embedding."""
    expected = json.loads((Path(__file__).parent / "state_dict_keys.json").read_text())
    for variant, keys in expected.items():
        share, pre_norm = variant.split(",")
        model = tiny(share_embeddings=share, pre_norm=pre_norm == "True")
        assert {k: list(v.shape) for k, v in model.state_dict().items()} == keys, variant
        fresh = tiny(seed=1, share_embeddings=share, pre_norm=pre_norm == "True")
        assert not fresh.load_state_dict(model.state_dict(), strict=True).missing_keys
        assert torch.equal(fresh.output_proj.weight, model.output_proj.weight)


def test_a_tied_output_weight_saved_under_its_own_name_is_unexpected():
    model = tiny()
    state = {**model.state_dict(), "output_proj.weight": model.output_proj.weight}
    assert model.load_state_dict(state, strict=False).unexpected_keys == ["output_proj.weight"]
