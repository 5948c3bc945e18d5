"""`mtkit bpe A B --out M --from OPUS_MULTI`: each pair's data starts with the model's own target-language token.

An OPUS-MT multilingual model spells its tokens in ISO 639-3 (`>>deu<<`, `>>fra<<`); bpe wrote
mtkit's `>>de<<` / `>>fr<<`, which that model encodes as `<unk>`: every pair's data began with the
same `<unk>`, and `train --init` fine-tuned with no direction signal. Now the codes are mapped
(mtkit/data/language_codes.py), and a language the model has no token for is one sentence naming those it has.
"""

from __future__ import annotations

import json

import pytest

from mtkit.config import UNK
from mtkit.data.dataset import open_data
from mtkit.data.language_codes import model_token
from mtkit.data.tokenizer import load_tokenizer
from mtkit.errors import MtkitError
from tests.support.cli import run_cli
from tests.support.multilingual import prepared_pair

pytest.importorskip("transformers")
pytest.importorskip("langcodes")


def test_bpe_from_an_opus_mt_multilingual_model_uses_its_iso_639_3_tokens(opus_multilingual_dir, tmp_path):
    """fault: `mtkit bpe en-de en-fr --out M --from OPUS_MULTI` (tokens >>deu<<, >>fra<<); expected: each pair's
    source lines start with the model's own token, encoded as one known piece, never <unk>."""
    pairs = [prepared_pair(tmp_path, "en", tgt, 60) for tgt in ("de", "fr")]
    out = tmp_path / "en-xx"
    done = run_cli("bpe", *pairs, "--out", out, "--from", opus_multilingual_dir)
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "prepare.json").read_text(encoding="utf-8"))
    assert [p["token"] for p in record["pairs"]] == [">>deu<<", ">>fra<<"]
    data = open_data(out)
    vocab = load_tokenizer(data.vocab_bytes())
    first = data.split("train").src[0].tolist()
    assert vocab.language_tokens[">>deu<<"] in first[:2], first[:5]  # after BOS, if the data has one
    assert UNK not in first[:2]


def test_a_language_the_model_has_no_token_for_is_one_sentence_naming_its_tokens(opus_multilingual_dir, tmp_path):
    pairs = [prepared_pair(tmp_path, "en", tgt, 60) for tgt in ("de", "fr")] + [prepared_pair(tmp_path, "de", "en", 60)]
    done = run_cli("bpe", *pairs, "--out", tmp_path / "xx", "--from", opus_multilingual_dir)
    assert done.returncode == 1, done.stderr
    assert "for the target language en; its tokens are >>ces<<, >>deu<<, >>fra<<" in done.stderr
    assert not (tmp_path / "xx").exists()


def test_codes_are_mapped_both_ways_and_by_script():
    tokens = [">>deu<<", ">>fra<<", ">>zho_Hans<<", ">>en<<"]
    assert model_token("de", tokens, "M") == ">>deu<<"
    assert model_token("fra", tokens, "M") == ">>fra<<"
    assert model_token("eng", tokens, "M") == ">>en<<"
    assert model_token("zh", tokens, "M") == ">>zho_Hans<<"
    with pytest.raises(MtkitError, match="M has none for the target language cs; its tokens are"):
        model_token("cs", tokens, "M")
    with pytest.raises(MtkitError, match="no target-language tokens"):
        model_token("de", [], "M")
