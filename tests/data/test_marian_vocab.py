"""The renumbering between Marian's ids and mtkit's (mtkit/data/marian_vocab.py), on vocabularies as data."""

from __future__ import annotations

import pytest

from mtkit.config import BOS, EOS, PAD, UNK
from mtkit.data.marian_vocab import IdMap, split_language_code
from mtkit.errors import MtkitError


@pytest.mark.parametrize(
    "pieces",
    [
        ["</s>", "<unk>", "a", "b", "c", "d", "<pad>"],  # OPUS-MT's order: pad last
        ["<pad>", "</s>", "<unk>", "a", "b"],  # special ids anywhere
        ["</s>", "<unk>", "<pad>"],  # nothing but the specials
        ["</s>", "<unk>", *(f"p{i}" for i in range(40)), "<pad>"],
    ],
)
def test_every_marian_id_has_one_mtkit_id_and_back(pieces):
    ids = IdMap.build(pieces)
    marian = {p: i for i, p in enumerate(pieces)}
    assert len(ids.marian_of) == len(pieces) + 1  # one added row: mtkit's BOS
    assert ids.marian_of[PAD] == ids.marian_of[BOS] == marian["<pad>"]
    assert (ids.marian_of[UNK], ids.marian_of[EOS]) == (marian["<unk>"], marian["</s>"])
    assert sorted(m for i, m in enumerate(ids.marian_of) if i != BOS) == list(range(len(pieces)))
    assert [ids.marian_of[ids.mtkit_of[m]] for m in range(len(pieces))] == list(range(len(pieces)))
    assert all(ids.mtkit_of[m] == m for m in range(len(pieces)) if m > EOS and pieces[m] not in ("<pad>",))


def test_a_vocabulary_without_its_special_pieces_is_one_sentence():
    with pytest.raises(MtkitError, match="vocab.json has no <pad>"):
        IdMap.build(["</s>", "<unk>", "a"])


@pytest.mark.parametrize(
    "text, split",
    [
        (">>fra<< A dog.", ([">>fra<<"], " A dog.")),
        (">>ces<<Two cats.", ([">>ces<<"], "Two cats.")),
        ("A >>fra<< dog.", ([], "A >>fra<< dog.")),  # only at the start, as MarianTokenizer
        (">>unfinished", ([], ">>unfinished")),
    ],
)
def test_a_leading_language_token_is_cut_off_as_marian_tokenizer_does(text, split):
    assert split_language_code(text) == split
