"""Markup kept intact: tags out, text translated, tags back around their words, always well-formed.

Sources are read as a browser reads them and written back in the specification's serialized form
(mtkit/decode/htmltree.py): attributes quoted, elements a browser closes closed."""

from __future__ import annotations

import random

import pytest

from mtkit.decode.markup import Document, Unit, start_tags, strip_tags, translate_fragments, well_formed


def identity(doc: Document) -> str:
    return doc.render([u.render(u.text, list(range(len(u.words)))) for u in doc.units])


def reversed_order(doc: Document) -> str:
    """Each unit's words in reverse, each linked to its own source word: tags must follow their words."""
    return doc.render([u.render(" ".join(reversed(u.words)), list(reversed(range(len(u.words))))) for u in doc.units])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("A <b>man</b> rides a <i>red</i> bike.", "A <b>man</b> rides a <i>red</i> bike."),
        (
            '<p>Go <a href="/x?a=1&amp;b=2">home</a>.</p><p>Now</p>',
            '<p>Go <a href="/x?a=1&amp;b=2">home.</a></p><p>Now</p>',
        ),
        ("Tom &amp; Jerry &lt;3", "Tom &amp; Jerry &lt;3"),
        ("a<br>b<br/>c", "a<br>b<br>c"),
        ("x <img src=a.png> y", 'x <img src="a.png"> y'),
        ("A <b>man <i>runs</b> fast", "A <b>man <i>runs</i></b> <i>fast</i>"),  # misnested: as a browser mends it
        ("<p>caf&eacute; <q cite='x\"y'>ok</q>&nbsp;", '<p>café <q cite="x&quot;y">ok</q>&nbsp;</p>'),
        ("<pre>\n\nkept</pre>", "<pre>\n\nkept</pre>"),  # a parser drops one newline after <pre>: written back
        ("stray </i> end", "stray end"),  # an end tag with nothing open: dropped
        ("<script>if (a<b) x()</script>Hi", "<script>if (a<b) x()</script>Hi"),  # script text is not translated
        ("<!-- note --><p>Hi</p>", "<!-- note --><p>Hi</p>"),
        ("<b></b>", "<b></b>"),
        ("", ""),
    ],
)
def test_identity_translation_gives_the_source_back(source, expected):
    doc = Document(source)
    out = identity(doc)
    assert out == expected
    assert well_formed(out) and start_tags(out) == start_tags(source)


def test_units_break_at_block_elements_and_words_glue_across_inline_tags():
    doc = Document("<p>A <b>big</b> dog.</p><ul><li>One</li><li>t<i>w</i>o</li></ul>")
    assert [u.text for u in doc.units] == ["A big dog.", "One", "two"]
    assert [bool(u.spans) for u in doc.units] == [True, False, True]
    assert strip_tags("<p>A <b>big</b> dog.</p>") == "A big dog."


def test_tags_follow_their_words_when_the_order_changes():
    out = reversed_order(Document("A <b>man</b> rides a <i>red</i> bike."))
    assert out == "bike. <i>red</i> a rides <b>man</b> A"


def test_nested_tags_stay_nested_and_siblings_do_not_overlap_when_links_collide():
    doc = Document("<a href=x>one <b>two</b></a> <i>three</i> four")
    (unit,) = doc.units
    # every target word linked to source word 1 ("two"): all elements crowd onto one word
    out = doc.render([unit.render("w1 w2 w3", [1, 1, 1])])
    assert well_formed(out) and start_tags(out) == start_tags("<a href=x>one <b>two</b></a> <i>three</i> four")


def test_without_links_tags_are_placed_proportionally():
    unit = Document("A <b>man</b> rides").units[0]
    assert unit.render("Ein Mann fährt") == "Ein <b>Mann</b> fährt"
    assert unit.render("Ein Mann fährt", [None, None, None]) == "Ein <b>Mann</b> fährt"  # no link at all: the same


@pytest.mark.parametrize("seed", range(40))
def test_random_markup_and_random_links_always_well_formed_with_the_same_tags(seed):
    rng = random.Random(seed)
    names = ["b", "i", "a href=x", "span class=c", "em", "p", "div", "img", "br", "u"]
    parts = []
    for _ in range(rng.randint(1, 25)):
        kind = rng.random()
        name = rng.choice(names)
        if kind < 0.3:
            parts.append(f"<{name}>")
        elif kind < 0.5:
            parts.append(f"</{name.split()[0]}>")
        elif kind < 0.55:
            parts.append("&amp; &lt; &#233;")
        else:
            parts.append(" ".join(rng.choice(["a", "dog", "runs.", "red", "x"]) for _ in range(rng.randint(0, 4))))
        parts.append(rng.choice(["", " "]))
    source = "".join(parts)
    doc = Document(source)
    outputs = []
    for u in doc.units:
        n = rng.randint(1, 6)
        links = [rng.choice([None, *range(len(u.words))]) for _ in range(n)]
        outputs.append(u.render(" ".join(f"t{j}" for j in range(n)), links))
    out = doc.render(outputs)
    assert well_formed(out), (source, out)
    assert start_tags(out) == start_tags(source), (source, out)


def test_a_unit_without_tags_is_its_translation_escaped():
    assert Unit(["a"], [], " ", "\n").render("x < y") == " x &lt; y\n"


def test_translate_fragments_with_a_model(trained_model):
    from mtkit.decode.loading import load_translator

    translator = load_translator(trained_model, device="cpu")
    lines = ["<p>a <b>b c</b> d</p>", "plain words here", "<i>x</i>"]
    out = list(translate_fragments(translator, lines))
    assert len(out) == 3
    for source, text in zip(lines, out):
        assert well_formed(text) and start_tags(text) == start_tags(source)
    assert out[1] == translator.translate(["plain words here"])[0]


def test_translate_format_html_on_the_command_line(trained_model):
    from tests.support.cli import run_cli

    lines = ["<p>a <b>b c</b> d</p>", "x &amp; <i>y</i> <img src=z.png>"]
    result = run_cli("translate", "-m", str(trained_model), "--format", "html-lines", input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert len(out) == 2
    for source, text in zip(lines, out):
        assert well_formed(text) and start_tags(text) == start_tags(source)
    bad = run_cli("translate", "-m", str(trained_model), "--format", "xml", input="a\n")
    assert bad.returncode != 0 and "--format takes auto, text, html-lines or paragraphs, html" in bad.stderr
    both = run_cli("translate", "-m", str(trained_model), "--format", "html-lines", "--scores", input="a\n")
    assert both.returncode != 0 and "--format html-lines translates its text once" in both.stderr
