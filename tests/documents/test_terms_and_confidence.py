"""A glossary and a confidence in documents: every format's terms enforced in its segments with the structure kept
(`mtkit translate -i FILE --glossary`), a term across an inline tag or a placeholder, each segment rated and the
document summarised (`--confidence --confidence-report FILE`, `translate_document_with_report`) with the translated
file exactly as without, and the combinations that cannot work refused in one sentence."""

from __future__ import annotations

import json
import random
import re

import pytest

from mtkit.decode.confidence import Confidence, summary
from mtkit.decode.glossary import Glossary
from mtkit.decode.loading import prepare as open_model
from mtkit.documents import FORMATS, translate_document, translate_document_with_report
from tests.support.cli import error_line
from tests.support.documents import MAKERS, WORDS, same_structure

EXTENSION = {"paragraphs": "txt", "html": "html", "markdown": "md", "srt": "srt", "vtt": "vtt", "po": "po",
             "xliff": "xlf", "docx": "docx"}  # fmt: skip
FAST = ("--beam", "1", "--max-len-b", "4", "--threads", "1")


def occurrences(text: str, term: str) -> int:
    """How often `term` is in `text`: the decoder guarantees its pieces, not what a random model glues after them."""
    return text.count(term)


def whole(text: str, term: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(term)}(?!\w)", text))


def terms_for(data: bytes, format: str) -> str:
    """A glossary for a generated document: two of its words, and two that follow each other in it (a multi-word
    term), each given a target the tiny test model never writes on its own."""
    text = (docx_text(data) if format == "docx" else data.decode("utf-8")).lower()
    known = "|".join(sorted(set(WORDS), key=len, reverse=True))
    pair = re.search(rf"(?<![\w{{%$(.])({known}) ({known})(?![\w}}])", text)
    assert pair is not None, text
    single = [w for w in sorted(set(WORDS), key=lambda w: -whole(text, w)) if w not in pair.groups()][:2]
    return f"{pair.group(0)}\tsmallen treeen\n{single[0]}\tparken\n{single[1]}\tballen\n"


def docx_text(data: bytes) -> str:
    import io

    import docx

    document = docx.Document(io.BytesIO(data))
    cells = [c.text for t in document.tables for row in t.rows for c in row.cells]
    return "\n".join([p.text for p in document.paragraphs] + cells)


@pytest.mark.parametrize("format", list(FORMATS))
def test_every_format_enforces_the_terms_rates_its_segments_and_keeps_its_structure(cli, cli_model, tmp_path, format):
    source = tmp_path / f"in.{EXTENSION[format]}"
    source.write_bytes(MAKERS[format](random.Random(f"terms-{format}")))
    terms = terms_for(source.read_bytes(), format)
    (tmp_path / "terms.tsv").write_text(terms, encoding="utf-8")
    out, report = tmp_path / f"out.{EXTENSION[format]}", tmp_path / "report.json"
    chosen = ("--format", "paragraphs") if format == "paragraphs" else ()
    done = cli("translate", "-m", cli_model, "-i", source, "-o", out, "--glossary", tmp_path / "terms.tsv",
               "--confidence", "--confidence-report", report, *FAST, *chosen)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not same_structure(source.read_bytes(), out.read_bytes(), format)
    record = json.loads(report.read_text(encoding="utf-8"))
    segments = record["segments"]
    assert record["format"] == format and [s["index"] for s in segments] == list(range(1, len(segments) + 1))
    glossary = Glossary.parse(terms)
    wanted = {target: 0 for _, target in glossary.entries}
    for segment in segments:  # each segment holds each term it must, as often as its source does
        for target in set(glossary.targets(segment["source"])):
            need = glossary.targets(segment["source"]).count(target)
            assert occurrences(segment["translation"], target) >= need, (segment, target)
            wanted[target] += need
    assert all(wanted.values()), (wanted, terms)  # every term occurred, so every term was enforced somewhere
    written = docx_text(out.read_bytes()) if format == "docx" else out.read_text(encoding="utf-8")
    for target in ("parken", "ballen"):  # one-word targets: the file holds them whatever markup lands beside
        assert occurrences(written, target) >= wanted[target], (target, written)
    rated = [s["confidence"] for s in segments]
    assert all(0.0 <= c <= 1.0 for c in rated) and record["summary"] == summary(rated)
    said = [line for line in done.stderr.splitlines() if "expected acceptable" in line]
    assert len(said) == 1 and f"of {len(segments)} segments" in said[0], done.stderr


def contents(data: bytes, format: str) -> object:
    """A file's bytes; a .docx package's, its parts' (a ZIP entry carries the time it was written)."""
    if format != "docx":
        return data
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as package:
        return {name: package.read(name) for name in package.namelist()}


@pytest.fixture(scope="module")
def translator(cli_model):
    return open_model(cli_model, "cpu", beam=1, max_len_b=4)


def test_a_term_across_an_inline_tag_or_a_placeholder_keeps_them_byte_for_byte(translator):
    """Terms are matched on the words the model sees: an inline tag and a placeholder are taken out of them, so a
    term matches across both, and both come back byte for byte; a term whose source holds a placeholder never
    applies (the model never sees it)."""
    glossary = Glossary.of({"big dog": "smallen treeen", "runs in": "ballen", "{name} sits": "parken"})
    page = b'<p>A <b class="x">big</b> dog runs {name} in the house.</p><p>The girl {name} sits.</p>\n'
    done = translate_document_with_report(page, "html", translator, glossary=glossary)
    first, second = done.segments
    assert first.source == "A big dog runs in the house." and second.source == "The girl sits."
    assert occurrences(first.translation, "smallen treeen") == 1 and occurrences(first.translation, "ballen") == 1
    html = done.data.decode()
    assert html.count('<b class="x">') == html.count("</b>") == 1 and html.count("{name}") == 2, html
    assert not same_structure(page, done.data, "html")
    plain = translate_document_with_report(page, "html", translator)
    assert second.translation == plain.segments[1].translation and "parken" not in second.translation
    xliff = (
        b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" '
        b'datatype="plaintext" original="x"><body><trans-unit id="1"><source>A <g id="1">big</g> dog runs '
        b'<x id="2"/> in %s.</source></trans-unit></body></file></xliff>'
    )
    done = translate_document_with_report(xliff, "xliff", translator, glossary=glossary)
    assert occurrences(done.segments[0].translation, "smallen treeen") == 1, done.segments
    target = re.search(rb"<target>(.*)</target>", done.data).group(1).decode()  # type: ignore[union-attr]
    assert len(re.findall(r'<g id="1"/?>', target)) == target.count('<x id="2"/>') == 1, target  # <g/>: no words
    assert target.count("%s") == 1 and "smallen" in target and not same_structure(xliff, done.data, "xliff")


@pytest.mark.parametrize("format", list(FORMATS))
def test_a_confidence_rates_each_segment_and_leaves_the_file_as_without(translator, format):
    data = MAKERS[format](random.Random(f"rated-{format}"))
    rate = Confidence.load(translator)
    done = translate_document_with_report(data, format, translator, confidence=rate)
    assert contents(done.data, format) == contents(translate_document(data, format, translator), format)
    texts = [s.source for s in done.segments]
    alone = list(translator.translate_stream(texts, confidence=rate))
    assert [s.translation for s in done.segments] == [t.text for t in alone]
    assert [s.confidence for s in done.segments] == [t.confidence for t in alone]
    assert done.summary == summary([t.confidence for t in alone]) and done.summary["segments"] == len(texts) > 0
    record = done.record()
    assert record["summary"] == done.summary and record["segments"][0]["source"] == texts[0]
    unrated = translate_document_with_report(data, format, translator)
    assert unrated.summary is None and all(s.confidence is None for s in unrated.segments)


def test_what_cannot_work_with_a_document_is_one_sentence(cli, cli_model, tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<p>A dog runs.</p>\n", encoding="utf-8")
    (tmp_path / "terms.tsv").write_text("dog\tparken\n", encoding="utf-8")
    report = ("--confidence-report", tmp_path / "r.json")
    for args, said in [
        (("-i", page, *report), "--confidence-report applies only with --confidence"),
        (("--confidence", *report), "--confidence-report is for a document"),
        (("-i", page, "--confidence", "--confidence-report", "-"), "would both go to stdout"),
        (("-i", page, "-o", tmp_path / "r.json", "--confidence", *report), "names the output file"),
        (("-i", page, "--confidence", "--format", "html-lines"), "drop --format html-lines"),
    ]:
        line = error_line(cli("translate", "-m", cli_model, *FAST, *args, input="A dog.\n"))
        assert said in line, (args, line)
    assert not (tmp_path / "r.json").exists()
    lines = cli("translate", "-m", cli_model, *FAST, "--format", "html-lines", "--glossary", tmp_path / "terms.tsv",
                input="<p>A <i>dog</i> runs.</p>\n")  # fmt: skip
    assert lines.returncode == 0 and "parken" in lines.stdout and lines.stdout.count("<i>") == 1, lines.stderr
    pytest.importorskip("ctranslate2")
    exported = tmp_path / "ct2"
    assert cli("export", cli_model, "--format", "ctranslate2", "-o", exported).returncode == 0
    args = ("-m", exported, "-i", page, "-o", tmp_path / "out.html", "--glossary", tmp_path / "terms.tsv")
    line = error_line(cli("translate", *args, *FAST))
    assert "cannot enforce a glossary" in line and "mtkit model file" in line, line
    assert not (tmp_path / "out.html").exists()
