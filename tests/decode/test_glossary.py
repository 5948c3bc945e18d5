"""A glossary: its file checked line by line, its terms matched on the source (any case, whole words, multi-word,
longest first) and enforced by `mtkit translate --glossary` and `translate(lines, glossary=...)`; sentences without a
term decode as without a glossary; a shortlist searches the terms' pieces; CTranslate2 is refused."""

from __future__ import annotations

import re

import pytest

import mtkit
from mtkit.decode.glossary import Glossary
from mtkit.decode.loading import prepare as open_model
from mtkit.errors import MtkitError
from tests.support.cli import error_line, run_cli

TERMS = "dog\tparken\nbig dog\tsmallen treeen\nin the house\tballen\n"


def test_terms_match_on_word_boundaries_any_case_longest_first():
    g = Glossary.parse("dog\tHund\nbig dog\tRiesenhund\nNew York\tNeu York\nC++\tCplusplus\n猫\tKatze\n")
    line = "A BIG   dog and a dog in new york, a doggy, hotdog, C++ and 我的猫"
    assert g.find(line) == [
        ("BIG   dog", "Riesenhund"),
        ("dog", "Hund"),
        ("new york", "Neu York"),
        ("C++", "Cplusplus"),
        ("猫", "Katze"),
    ]
    assert g.targets("dogs and a dog") == ["Hund"]
    assert Glossary.parse("man\tHerr\n").targets("a woman and a man, Man!") == ["Herr", "Herr"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("dog Hund\n", "line 1, has no TAB between its source and target"),
        ("dog\tHund\ncat\tKatze\tx\n", "line 2, has more than one TAB"),
        ("dog\t \n", "line 1: the target term is empty"),
        ("\tHund\n", "line 1: the source term is empty"),
        ("dog\tHund\n\nDOG\tHündchen\n", "line 3: the source term 'DOG' is already line 1"),
        ("dog\tHu\u200bnd\n", "line 1: the target term holds a control character"),
    ],
)
def test_a_bad_glossary_is_one_sentence_naming_the_line(text, said):
    with pytest.raises(MtkitError, match=re.escape(said)):
        Glossary.parse(text, name="terms.tsv")


def test_csv_and_entries_in_hand_make_the_same_glossary(tmp_path):
    (tmp_path / "g.csv").write_text('"big, bad dog",Wolf\ncat,Katze\n', encoding="utf-8")
    assert Glossary.read(tmp_path / "g.csv") == Glossary.of({"big, bad dog": "Wolf", "cat": "Katze"})
    (tmp_path / "bad.csv").write_text("a,b,c\n", encoding="utf-8")
    with pytest.raises(MtkitError, match="line 1, has 3 fields"):
        Glossary.read(tmp_path / "bad.csv")
    with pytest.raises(MtkitError, match="entry 2 is not a"):
        Glossary.of([("a", "b"), ("c",)])
    assert mtkit.Glossary is Glossary


def words(line: str, term: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(term)}(?!\w)", line))


def test_translate_enforces_the_terms_and_leaves_other_lines_alone(cli_model, tmp_path):
    (tmp_path / "terms.tsv").write_text(TERMS, encoding="utf-8")
    lines = ["a big dog runs in the house", "the man plays", "dog and dog", "green water", "Dog in the HOUSE"]
    text = "".join(line + "\n" for line in lines)
    plain = run_cli("translate", "-m", cli_model, "--beam", "2", input=text)
    held = run_cli("translate", "-m", cli_model, "--beam", "2", "--glossary", tmp_path / "terms.tsv", input=text)
    assert plain.returncode == held.returncode == 0, held.stderr
    out, before = held.stdout.splitlines(), plain.stdout.splitlines()
    assert words(out[0], "smallen treeen") >= 1 and words(out[0], "ballen") >= 1
    assert words(out[2], "parken") >= 2  # each occurrence is a term to produce
    assert words(out[4], "parken") >= 1 and words(out[4], "ballen") >= 1
    assert out[1] == before[1] and out[3] == before[3]  # no term: as without a glossary
    assert out != before
    # The Python API gives the same; with the model's shortlist on, the terms' pieces join the candidates.
    translator = open_model(cli_model, "cpu")
    glossary = Glossary.read(tmp_path / "terms.tsv")
    assert translator.translate(lines, beam=2, glossary=glossary) == out


def test_a_greedy_search_gives_a_sentence_with_terms_the_beam_it_needs(cli_model):
    translator = open_model(cli_model, "cpu")
    glossary = Glossary.parse(TERMS)
    lines = ["a big dog runs in the house", "the man plays"]
    out = translator.translate(lines, beam=1, glossary=glossary)
    assert words(out[0], "smallen treeen") >= 1 and words(out[0], "ballen") >= 1
    assert out[1] == translator.translate(lines[1:], beam=1)[0]


def test_a_bad_file_sampling_and_ctranslate2_are_refused_in_one_sentence(cli_model, tmp_path):
    (tmp_path / "bad.tsv").write_text("dog\tparken\ncat parken\n", encoding="utf-8")
    said = error_line(run_cli("translate", "-m", cli_model, "--glossary", tmp_path / "bad.tsv", input="dog\n"))
    assert "line 2, has no TAB" in said and "bad.tsv" in said, said
    (tmp_path / "terms.tsv").write_text(TERMS, encoding="utf-8")
    args = ("--glossary", tmp_path / "terms.tsv")
    said = error_line(run_cli("translate", "-m", cli_model, "--sampling", *args, input="dog\n"))
    assert "enforced by beam search" in said, said
    pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    assert run_cli("export", cli_model, "--format", "ctranslate2", "-o", out).returncode == 0
    said = error_line(run_cli("translate", "-m", out, *args, input="dog\n"))
    assert "cannot enforce a glossary" in said and "mtkit model file" in said, said


def test_opus_mt_models_enforce_terms_bilingual_and_multilingual(opus_dir, opus_multilingual_dir):
    """An OPUS-MT model cuts a term with its target SentencePiece model, as its references are cut."""
    glossary = Glossary.of({"dog": "Hund", "a man": "Herr"})
    lines = ["A dog runs.", "a man and a dog", "Two women sit."]
    bilingual = mtkit.load_translator(opus_dir, device="cpu")
    out = bilingual.translate(lines, beam=2, glossary=glossary)
    assert words(out[0], "Hund") >= 1 and words(out[1], "Hund") >= 1 and words(out[1], "Herr") >= 1, out
    assert out[2] == bilingual.translate(lines[2:], beam=2)[0]
    multilingual = mtkit.load_translator(opus_multilingual_dir, device="cpu")
    out = multilingual.translate(lines[:1], beam=2, target_lang="deu", glossary=glossary)
    assert words(out[0], "Hund") >= 1, out


def test_a_term_ends_its_word_even_where_the_model_would_spell_on_in_bytes(cli_model):
    """After a term, no piece that continues a word: whole pieces, and byte-fallback pieces alike (`<0x72>` spells
    an "r" that would run "treeen" on into "treeenr")."""
    from mtkit.decode.glossary import continues_a_word

    assert continues_a_word("<0x72>") and continues_a_word("<0xC3>") and continues_a_word("en")
    assert not continues_a_word("<0x20>") and not continues_a_word("<0x2E>") and not continues_a_word("\u2581en")
    translator = open_model(cli_model, "cpu")
    lines = ["a big dog runs in the park", "the man plays", "a child plays with the red ball"]
    glossary = Glossary.of({"dog": "Hund", "red ball": "greenen treeen"})
    for beam in (1, 4):
        out = translator.translate(lines, beam=beam, glossary=glossary)
        assert re.search(r"(?<!\w)Hund(?!\w)", out[0]), out[0]
        assert re.search(r"(?<!\w)greenen treeen(?!\w)", out[2]), out[2]
