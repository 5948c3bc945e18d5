"""Every format's documents keep their structure through a translation: a few hundred generated files, each
translated by stand-in models that keep, reverse, drop or add words (markup-like ones included), and
checked: tags, cues and timings, paragraphs and their lines, msgids, inline codes, runs, Markdown's blocks,
link targets and code, and every placeholder byte for byte (tests/support/documents.py)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from mtkit.config import DecodeConfig
from mtkit.documents import FORMATS, translate_document
from tests.support.documents import MAKERS, same_structure


class StandIn:
    """A translator whose translation of a text is `change(words)`, aligned word for word where it can say."""

    defaults = DecodeConfig()

    def __init__(self, name: str) -> None:
        self.name = name

    def change(self, words: list[str]) -> list[str]:
        if self.name == "reverse":
            return words[::-1]
        if self.name == "drop":
            return [w for k, w in enumerate(words) if k % 3 != 1] or words[:1]
        if self.name == "noisy":  # a model that writes markup-like characters of its own
            return [*words[:2], "*", "|", "<b>", "#", "`x`", "[y](z)", "_", *words[2:]]
        if self.name == "controls":  # byte-fallback pieces that decode to control characters and line breaks
            return [*words[:1], "a\x01b", "c\x00", "d\ne", "f\u2028g", "\x1b[0m", *words[1:]]
        return words

    def translate_stream(self, texts, config, batch_tokens, target_lang="", **options):
        for text in texts:
            yield SimpleNamespace(text=" ".join(self.change(text.split())), confidence=None)

    def align(self, pairs, target_lang=""):
        if self.name == "reverse":
            return [[len(s) - 1 - j if len(s) == len(t) else None for j in range(len(t))] for s, t in pairs]
        if self.name == "same":
            return [list(range(len(t))) for _, t in pairs]
        return None  # no attention (CTranslate2): placed proportionally


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("model", ["same", "reverse", "drop", "noisy", "controls"])
def test_generated_documents_keep_their_structure(format, model):
    rng = random.Random(f"{format}-{model}")
    for k in range(12):
        source = MAKERS[format](rng)
        out = translate_document(source, format, StandIn(model))  # type: ignore[arg-type]
        assert not same_structure(source, out, format), (k, source, out, same_structure(source, out, format))


@pytest.mark.parametrize("format", ["paragraphs", "markdown", "srt", "vtt"])
def test_the_words_kept_as_they_are_give_the_file_back_byte_for_byte(format):
    rng = random.Random(format)
    for _ in range(12):
        source = MAKERS[format](rng)
        if format == "markdown":
            source = source.replace(b"_", b"")  # a translation's own underscores come back escaped
        assert translate_document(source, format, StandIn("same")) == source  # type: ignore[arg-type]


def test_a_unit_whose_one_element_holds_every_word_is_placed_without_the_alignment_pass():
    """A .docx paragraph of one run, or `<p><b>...</b></p>`: the element holds the whole translation, so the unit
    is not sent to the model's alignment (a pass as long as a forced decode); with words outside it, an element
    inside it or a placeholder, it is."""
    import io

    import docx

    from mtkit.documents import read

    document = docx.Document()
    document.add_paragraph("A man rides a bike.")
    document.add_paragraph("A man ").add_run("rides").bold = True
    buffer = io.BytesIO()
    document.save(buffer)
    word = read(buffer.getvalue(), "docx")
    assert word.pairs(["Ein Mann fährt Rad."] * 2) == [(["A", "man", "rides"], ["Ein", "Mann", "fährt", "Rad."])]
    page = read(b"<p><b>A big dog.</b></p><p><b>A <i>big</i> dog.</b></p><p><b>A</b> dog {x}.</p>", "html")
    found = ["Ein großer Hund."] * 3
    assert [source for source, _ in page.pairs(found)] == [["A", "big", "dog."], ["A", "dog", "."]]
    out = page.render(found, [[0, 1, 2], [0, 1, 2, 2]]).decode()
    assert out.startswith("<p><b>Ein großer Hund.</b></p>") and out.count("<b>") == 3 and "{x}" in out, out
