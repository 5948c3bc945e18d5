"""A multilingual model, a line with no language token and no --target-lang: one warning, not silence.

The line was translated into whichever language the model made of it, which nobody chose, and
nothing said so. Now `translate` and `serve` warn once a process, naming the model's languages and
--target-lang; the line is still translated (docs/multilingual.md says why it is not refused).
"""

from __future__ import annotations

import logging

import pytest

from mtkit.data.vocab import Vocab, train_bpe
from mtkit.decode import encode
from tests.support.cli import run_cli
from tests.support.spm import BYTE_PIECES

TEXT = ["a man runs", "the dog sits"] * 20


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(encode, "_WARNED_UNTAGGED", set())


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no target-language token" in r.getMessage()]


def test_untagged_lines_without_target_lang_warn_once_naming_the_languages(caplog):
    """fault: a multilingual model, lines with no language token and no --target-lang; expected: one warning
    naming the model's languages and --target-lang, the lines still encoded."""
    vocab = Vocab.from_bytes(train_bpe(TEXT, BYTE_PIECES + 40, (">>de<<", ">>fr<<")))
    with caplog.at_level(logging.WARNING, logger=encode.__name__):
        assert encode.source_ids(vocab, ["a man runs"], 1, 100)
        encode.source_ids(vocab, ["the dog sits", "a dog"], 2, 100)
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert "it knows de, fr" in said[0] and "--target-lang" in said[0]


def test_tagged_lines_a_target_lang_or_a_bilingual_model_say_nothing(caplog):
    multi = Vocab.from_bytes(train_bpe(TEXT, BYTE_PIECES + 40, (">>de<<", ">>fr<<")))
    bilingual = Vocab.from_bytes(train_bpe(TEXT, BYTE_PIECES + 40))
    with caplog.at_level(logging.WARNING, logger=encode.__name__):
        encode.source_ids(multi, [">>fr<< a man runs"], 1, 100)
        encode.source_ids(multi, ["a man runs"], 1, 100, target_lang="de")
        encode.source_ids(bilingual, ["a man runs"], 1, 100)
    assert _warnings(caplog) == []


def test_translate_with_an_opus_mt_multilingual_model_warns_once(opus_multilingual_dir):
    done = run_cli("translate", "-m", opus_multilingual_dir, "--max-len-b", "0", input="a dog\na cat\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("no target-language token and no --target-lang") == 1, done.stderr
    assert "deu" in done.stderr and "fra" in done.stderr
