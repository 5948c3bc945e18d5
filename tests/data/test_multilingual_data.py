"""`mtkit bpe A B C --out D`: one data directory of several pairs, each source after its target-language token."""

from __future__ import annotations

import json

import pytest

from mtkit.data.bpe import BpeOptions, build
from mtkit.data.dataset import open_data
from mtkit.data.multilingual import gather
from mtkit.data.vocab import Vocab
from mtkit.errors import MtkitError
from tests.support.multilingual import prepared_pair
from tests.support.spm import BYTE_PIECES, train_spm


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    dirs = [
        prepared_pair(root, "en", "de", 300),
        prepared_pair(root, "en", "fr", 100),
        prepared_pair(root, "en", "cs", 50),
    ]
    gather(dirs, root / "en-xx")
    record = build(root / "en-xx", BpeOptions(vocab_size=BYTE_PIECES + 150, threads=1))
    return root, dirs, record


def test_every_source_starts_with_its_pairs_token_as_one_id(multi):
    root, dirs, record = multi
    vocab = Vocab.load(root / "en-xx" / "spm.model")
    assert vocab.language_tokens == {">>de<<": 4, ">>fr<<": 5, ">>cs<<": 6}  # user_defined_symbols, in order
    data = open_data(root / "en-xx")
    assert [(p["src"], p["tgt"], p["lines"]["train"]) for p in data.info["pairs"]] == [
        ("en", "de", [0, 300]),
        ("en", "fr", [300, 400]),
        ("en", "cs", [400, 450]),
    ]
    train = data.split("train")
    for pair, path in zip(data.info["pairs"], dirs):
        a, b = pair["lines"]["train"]
        english = (path / "raw" / "train.en").read_text(encoding="utf-8").splitlines()
        target = (path / "raw" / f"train.{pair['tgt']}").read_text(encoding="utf-8").splitlines()
        for i in (a, b - 1):
            assert list(train.src[i]) == [vocab.language_tokens[pair["token"]], *vocab.sp.encode(english[i - a])]
            assert list(train.tgt[i]) == vocab.sp.encode(target[i - a])
    # The directory is like any other: raw text, readable, with the token written in front.
    assert (root / "en-xx" / "raw" / "valid.src").read_text(encoding="utf-8").startswith(">>de<< ")


def test_the_vocabulary_sample_is_per_language_and_counts_equal_text_once(multi):
    _, _, record = multi
    # Four languages (each pair has English of its own here), each at most sample / 4 sentences: with the
    # default sample, every line of every text.
    assert record["settings"]["sample_by"] == "language"
    assert record["settings"]["user_defined_symbols"] == [">>de<<", ">>fr<<", ">>cs<<"]
    assert record["sample_used"]["sentences"] == (300 + 100 + 50) * 2


def test_equal_english_sides_are_sampled_once_and_a_small_sample_is_shared_evenly(tmp_path):
    from mtkit.data.multilingual import balanced_sentences

    dirs = [prepared_pair(tmp_path, "en", "de", 200, seed=3), prepared_pair(tmp_path, "en", "fr", 200, seed=3)]
    record = gather(dirs, tmp_path / "m")
    taken = [0]
    lines = list(balanced_sentences(tmp_path / "m" / "raw", record["pairs"], 10**6, 1, taken))
    assert taken[0] == len(lines) == 3 * 200  # English once: both pairs hold the same English text
    assert not any(line.startswith(">>") for line in lines)
    taken = [0]
    small = list(balanced_sentences(tmp_path / "m" / "raw", record["pairs"], 30, 1, taken))
    assert len(small) == 30  # 10 of each language
    assert small == list(balanced_sentences(tmp_path / "m" / "raw", record["pairs"], 30, 1, [0]))  # seeded


def test_a_leading_token_is_one_id_only_where_the_model_has_it():
    lines = ["a man runs", "the dog sits"] * 20
    multi = Vocab.from_bytes(_spm(lines, (">>de<<", ">>fr<<")))
    plain = Vocab.from_bytes(_spm(lines, ()))
    assert multi.encode_batch([">>fr<< a man", "  >>de<<a man", "a >>de<< man"]) == [
        [5, *multi.sp.encode("a man")],
        [4, *multi.sp.encode("a man")],
        multi.sp.encode("a >>de<< man"),  # only at the start of a line
    ]
    assert multi.encode(">>xx<< a man") == multi.sp.encode(">>xx<< a man")  # not one of its tokens: text
    assert plain.language_tokens == {} and plain.encode(">>de<< a man") == plain.sp.encode(">>de<< a man")


def _spm(lines, symbols):
    from mtkit.data.vocab import train_bpe

    return train_bpe(lines, BYTE_PIECES + 40, symbols) if symbols else train_spm(lines, BYTE_PIECES + 40)


def test_mistakes_are_one_sentence(tmp_path, cli):
    de = prepared_pair(tmp_path, "en", "de", 30)
    fr = prepared_pair(tmp_path, "en", "fr", 30)
    with pytest.raises(MtkitError, match="the pair en-de is given twice"):
        gather([de, de], tmp_path / "m")
    with pytest.raises(MtkitError, match="is one of the pairs' directories"):
        gather([de, fr], de)
    with pytest.raises(MtkitError, match="holds a corpus of one language pair"):
        gather([de, fr], prepared_pair(tmp_path, "en", "cs", 30))
    for args, said in (
        ((de, fr), "name it with --out DIR"),
        ((de, "--out", tmp_path / "m"), "--out is for several data directories"),
        ((de, tmp_path / "nowhere", "--out", tmp_path / "m"), "holds no valid prepare.json"),
    ):
        r = cli("bpe", *args)
        assert r.returncode != 0 and said in r.stderr and "Traceback" not in r.stderr
    json.loads((de / "prepare.json").read_text())  # untouched
