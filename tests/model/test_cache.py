"""The decoder's key/value cache: written and reordered in place, copying only what moves, equal to a full pass."""

from __future__ import annotations

import torch

import mtkit
from mtkit.config import BOS, EOS, PAD
from mtkit.model.cache import DecoderCache, _take, append_history, move_rows, moved


def tiny(seed: int = 0, vocab: int = 40) -> mtkit.Transformer:
    torch.manual_seed(seed)
    return mtkit.build_model("tiny", vocab).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, EOS, PAD, PAD, PAD], [12, 13, 14, EOS, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 20, 21, 22, 23], [BOS, 24, PAD, PAD, PAD], [BOS, 25, 26, 27, PAD]])
    return src, tgt_in


def test_reordering_the_cache_follows_the_selected_rows():
    model = tiny()
    src, tgt_in = batch()
    index = torch.tensor([2, 2, 0, 1])
    with torch.no_grad():
        cache = model.init_cache(model.encode(src))
        _, cache = model.decode_step(tgt_in[:, :2], cache)
        reordered, _ = model.decode_step(tgt_in[index, 2:3], cache.reorder(index))
        expected = model(src[index], tgt_in[index, :3])[:, 2:3]
    assert (reordered - expected).abs().max() < 1e-5


def test_the_self_attention_cache_is_written_and_reordered_in_place():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), capacity=3)
        _, cache = model.decode_step(tgt_in[:, :1], cache)
        buffer = cache.layers[0].self_k.data_ptr()
        _, cache = model.decode_step(tgt_in[:, 1:2], cache)
        assert cache.layers[0].self_k.data_ptr() == buffer  # written in place, no torch.cat
        rows = torch.tensor([2, 0, 2])  # row 1 is dropped, row 2 is repeated
        cache = cache.reorder(rows)
        assert cache.layers[0].self_k.data_ptr() == buffer  # reordered in place, no new buffer
        logits, cache = model.decode_step(tgt_in[rows, 2:4], cache)  # grows past its 3 positions
        assert cache.layers[0].self_k.size(0) >= 4
        expected = model(src[rows], tgt_in[rows, :4])[:, 2:4]
    assert (logits - expected).abs().max() < 1e-5


def test_an_in_place_reorder_copies_only_the_rows_that_move(monkeypatch):
    model = tiny()
    src, tgt_in = batch()
    copied = []
    real = torch.Tensor.index_copy_
    monkeypatch.setattr(
        torch.Tensor,
        "index_copy_",
        lambda self, dim, index, source: copied.append(index.tolist()) or real(self, dim, index, source),
    )
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), capacity=4)
        _, cache = model.decode_step(tgt_in[:, :2], cache)
        cache = cache.reorder(torch.tensor([0, 0, 2]))  # rows 0 and 2 stay where they are
        history = cache.history
        assert history is not None and history.size(2) == 3
        # the history as a matrix, one row per (tensor, position, row): row 1 of each of the 2 positions only
        moved_history = [(b * history.size(1) + t) * 3 + 1 for b in range(history.size(0)) for t in range(2)]
        # and, per layer and tensor, row 1's own copy of its sentence's cross-attention keys/values
        assert sorted(copied) == [[1]] * history.size(0) + [moved_history]
        copied.clear()
        cache = cache.reorder(torch.tensor([0, 1, 2]))
        assert not copied  # nothing moves, nothing is copied
        logits, _ = model.decode_step(tgt_in[[0, 0, 2], 2:3], cache)
        expected = model(src[[0, 0, 2]], tgt_in[[0, 0, 2], :3])[:, 2:3]
    assert (logits - expected).abs().max() < 1e-5


def test_appending_writes_in_place_grows_by_doubling_and_teacher_forcing_copies_nothing():
    buffer = torch.zeros(3, 2, 1, 4)  # (C, N, H, d_k)
    new = torch.randn(2, 1, 2, 4)  # (N, H, T, d_k)
    assert append_history(buffer, new, 0) is buffer and torch.equal(buffer[:2], new.permute(2, 0, 1, 3))
    grown = append_history(buffer, new, 2)  # 4 positions do not fit in 3
    assert grown.size(0) == 6 and torch.equal(grown[:2], buffer[:2]) and torch.equal(grown[2:4], buffer[:2])
    empty = torch.zeros(0, 2, 1, 4)
    assert append_history(empty, new, 0).data_ptr() == new.data_ptr()  # a view of the projection


def test_moved_lists_the_entries_that_change_and_none_when_none_do():
    assert moved(torch.tensor([0, 1, 2])) is None
    assert moved(torch.tensor([0, 0, 2, 1])).tolist() == [1, 3]


def test_take_is_an_index_select_done_in_place_where_it_can_be():
    buffer = torch.arange(12.0).view(4, 3)
    index = torch.tensor([2, 0, 2])
    want = buffer.index_select(0, index)
    got = _take(buffer, index, moved(index))
    assert torch.equal(got, want) and got.data_ptr() == buffer.data_ptr()  # sources read before any write
    assert torch.equal(_take(torch.arange(3.0), torch.tensor([0, 1, 2, 2]), None), torch.tensor([0.0, 1, 2, 2]))


def test_moving_rows_equals_indexing_every_layer_and_position():
    history = torch.randn(4, 5, 3, 2, 2)  # (2L, C, R, H, d_k)
    rows = torch.tensor([2, 0, 2])
    want = history.clone()
    want[:, :3] = history[:, :3][:, :, rows]
    move_rows(history, rows, moved(rows), 3)
    assert torch.equal(history, want)


def test_a_cache_starts_with_room_or_as_views_for_teacher_forcing():
    k = torch.randn(2, 1, 5, 4)  # (B, H, S, d_k)
    with torch.no_grad():
        roomy = DecoderCache.start([(k, k), (k, k)], None, 6)
        assert roomy.history is not None and roomy.history.shape == (4, 6, 2, 1, 4) and roomy.length == 0
        assert roomy.layers[1].self_v.data_ptr() == roomy.history[3].data_ptr() and roomy.beams == 1
    forcing = DecoderCache.start([(k, k)], None, 0)
    assert forcing.history is None and forcing.layers[0].self_k.size(0) == 0
