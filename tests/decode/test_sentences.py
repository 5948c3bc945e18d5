"""Sentences inside a line: split where a sentence ends (and nowhere else), translated, joined back on the line."""

from __future__ import annotations

import pytest

from mtkit.decode.sentences import joiner, source_language, split


@pytest.mark.parametrize(
    ("language", "text", "sentences"),
    [
        ("en", "A man rides a bike. Two dogs play in the snow! Is it cold?", ["A man rides a bike.",
         "Two dogs play in the snow!", "Is it cold?"]),
        ("zh", "我今天很高兴。你呢？我们去公园吧！", ["我今天很高兴。", "你呢？", "我们去公园吧！"]),
        ("ja", "今日は晴れです。明日は雨でしょう！本当ですか？",
         ["今日は晴れです。", "明日は雨でしょう！", "本当ですか？"]),
        ("en", "Dr. Smith met Mr. Jones at 5 p.m. today.", ["Dr. Smith met Mr. Jones at 5 p.m. today."]),
        ("en", "Use tools, e.g. hammers and saws. They help.", ["Use tools, e.g. hammers and saws.", "They help."]),
        ("en", "He lives at No. 5 Baker Street. It is big.", ["He lives at No. 5 Baker Street.", "It is big."]),
        ("en", "The price rose 3.5 percent to 12.75 dollars. Then it fell.",
         ["The price rose 3.5 percent to 12.75 dollars.", "Then it fell."]),
        ("en", "See https://example.com/a.b?c=1. Or mail a.b@example.org. Thanks.",
         ["See https://example.com/a.b?c=1.", "Or mail a.b@example.org.", "Thanks."]),
        ("en", 'He said "Stop. Now." and left. She stayed.', ['He said "Stop. Now." and left.', "She stayed."]),
        ("en", 'She asked: "Are you coming?" He said no.', ['She asked: "Are you coming?"', "He said no."]),
        ("en", "Hello {user.name}. You have {{count}} new messages. Open %(app.name)s. Bye.",
         ["Hello {user.name}.", "You have {{count}} new messages.", "Open %(app.name)s.", "Bye."]),
        ("de", "Das ist z.B. gut. Es ist am 3. Mai passiert.", ["Das ist z.B. gut.", "Es ist am 3. Mai passiert."]),
        ("en", "  a man in a blue shirt  ", ["a man in a blue shirt"]),
        ("en", "   ", []),
    ],
)  # fmt: skip
def test_a_line_is_split_where_its_sentences_end_and_nowhere_else(language, text, sentences):
    assert split(text, language) == sentences


def test_sentences_are_joined_by_a_space_except_into_languages_written_without_one():
    assert [joiner(t) for t in ("de", "fr", ">>en<<", "zh", "ja", ">>zh<<", "zh-Hant", "th", "")] == [
        " ", " ", " ", "", "", "", "", "", " "]  # fmt: skip
    assert [source_language(x) for x in (("en", "de"), ("src", "tgt"), None, ("pt-BR", "en"))] == [
        "en",
        "",
        "",
        "pt-br",
    ]


def test_a_split_line_is_the_translations_of_its_sentences_joined(trained_model):
    """Batched with the others, each sentence is translated as it would be on a line of its own."""
    import mtkit

    translator = mtkit.load_translator(trained_model, device="cpu")
    first, second = "A man walks.", "The dog sits!"
    alone = translator.translate([first, second], split=False)
    together = translator.translate([f"{first} {second}", "h i", ""])
    assert together == [f"{alone[0]} {alone[1]}".strip(), translator.translate(["h i"], split=False)[0], ""]
    whole = translator.translate([f"{first} {second}"], split=False)
    assert len(whole) == 1  # --no-split: one segment, whatever it holds


def test_n_best_of_a_split_line_joins_its_sentences_hypotheses_rank_by_rank(trained_model):
    import mtkit

    translator = mtkit.load_translator(trained_model, device="cpu")
    stream = list(translator.translate_stream(["A man walks. The dog sits."], mtkit.DecodeConfig(beam=3, nbest=3)))
    parts = list(
        translator.translate_stream(["A man walks.", "The dog sits."], mtkit.DecodeConfig(beam=3, nbest=3, split=False))
    )
    assert len(stream) == 1 and stream[0].line == 1
    for rank, (text, score) in enumerate(stream[0].hypotheses):
        (a, sa), (b, sb) = parts[0].hypotheses[rank], parts[1].hypotheses[rank]
        assert text == f"{a} {b}".strip() and score == pytest.approx(sa + sb)


def test_the_command_line_splits_by_default_and_not_with_no_split(cli, trained_model, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("A man walks. The dog sits!\nh i\n")
    split_run = cli("translate", "-m", trained_model, "-i", source, "--device", "cpu")
    whole = cli("translate", "-m", trained_model, "-i", source, "--device", "cpu", "--no-split")
    alone = cli(
        "translate", "-m", trained_model, "--device", "cpu", "--no-split", input="A man walks.\nThe dog sits!\nh i\n"
    )
    assert split_run.returncode == whole.returncode == alone.returncode == 0, split_run.stderr + whole.stderr
    a, b, c = alone.stdout.splitlines()
    assert split_run.stdout.splitlines() == [f"{a} {b}".strip(), c]
    assert len(whole.stdout.splitlines()) == 2


def test_sentences_that_come_back_empty_or_cut_are_counted_on_stderr(cli, cli_model):
    """A random model never ends a sentence: every one reaches the length limit, and each is said; a limit of 0
    tokens gives empty translations, said too."""
    lines = "A man runs. A dog sits.\nthe end\n"
    cut = cli("translate", "-m", cli_model, "--device", "cpu", "--beam", "1", "--max-len-b", "2", input=lines)
    assert cut.returncode == 0, cut.stderr
    assert len(cut.stdout.splitlines()) == 2
    assert "3 of 3 sentences reached the length limit and may be cut" in cut.stderr, cut.stderr
    assert "(lines 1, 2)" in cut.stderr
    empty = cli(
        "translate", "-m", cli_model, "--device", "cpu", "--beam", "1", "--max-len-a", "0", "--max-len-b", "0",
        input=lines,
    )  # fmt: skip
    assert empty.returncode == 0, empty.stderr
    assert "3 of 3 sentences came back empty (lines 1, 2)" in empty.stderr, empty.stderr


def test_a_segment_is_cut_when_its_best_output_reached_the_limit_the_search_had():
    """The count of cut segments reads the search's own lengths (source tokens as the model read them, the best
    output's tokens): a segment at its limit is said, one a token short is not, an empty one is said as empty, and
    a blank source is not a segment."""
    from mtkit.config import DecodeConfig
    from mtkit.decode.sentences import Losses, Pieces

    config = DecodeConfig(beam=1, max_len_a=1.0, max_len_b=2)  # limit: source tokens + 2
    pieces = Pieces(segments=["a b c", "d e", "f", "  "], owner=[0, 1, 2, 3], count=4)
    losses = Losses()
    lengths = {0: (3, 5), 1: (2, 3), 2: (1, 0), 3: (0, 0)}
    pieces.losses(["x y z w v", "x y z", "", ""], lengths, config, positions=64, first=10, into=losses)
    assert (losses.segments, losses.cut, losses.empty) == (3, [10], [12])
