"""Word links from the last layer's cross-attention: one per target word, the reverse task's reversal found."""

from __future__ import annotations

from mtkit.decode.loading import load_translator
from tests.support.corpora import short_pairs


def test_links_follow_the_toy_tasks_reversal(trained_model):
    """The toy model learned to reverse its input: target word j comes from source word n-1-j."""
    translator = load_translator(trained_model, device="cpu")
    pairs = [(s.split(), t.split()) for s, t in short_pairs(80, seed=11)]
    links = translator.align(pairs)
    assert links is not None and [len(row) for row in links] == [len(t) for _, t in pairs]
    hits = total = 0
    for (source, _), row in zip(pairs, links):
        assert all(i is not None and 0 <= i < len(source) for i in row)
        hits += sum(i == len(source) - 1 - j for j, i in enumerate(row))
        total += len(row)
    assert hits / total > 0.6, hits / total  # 0.74 measured; the target shifted by one token: 0.34


def test_the_search_is_untouched_and_no_hook_is_left(trained_model):
    translator = load_translator(trained_model, device="cpu")
    lines = [s for s, _ in short_pairs(20, seed=3)][:5]
    before = translator.translate(lines)
    translator.align([(s.split(), t.split()) for s, t in zip(lines, before)])
    model = translator.engine.model
    assert not any(m._forward_hooks for m in model.modules())
    assert translator.translate(lines) == before


def test_an_empty_side_or_an_engine_without_attention_gives_no_links(trained_model):
    translator = load_translator(trained_model, device="cpu")
    assert translator.align([([], ["a"]), (["a"], [])]) == [[None], []]

    class NoAttention:  # CTranslate2's engine: `Engine.align` says it cannot
        def align(self, vocab: object, pairs: object, target_lang: str = "") -> None:
            return None

    translator.engine = NoAttention()  # type: ignore[assignment]
    assert translator.align([(["a"], ["b"])]) is None
