"""Hostile HTML through markup (`translate --format html`, LibreTranslate's format html): what a browser reads
as text or as an attribute value in the input is text or an attribute value in the output.

Markup once read its input with Python's tolerant `html.parser`, which ends a comment at `-- >` and decodes
a textarea's `&lt;` into `<`, then wrote such text back unescaped: `<!-- a -- > <img src=x onerror=...> -->`,
inert in a browser, came out as a live `<img onerror>`. Each output here is parsed by html5lib, the
WHATWG specification's parser (what a browser does), and must hold the input's elements, attributes and
comments, in order, and no other; the translation itself may say anything, tags included.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from mtkit.decode.htmltree import MAX_DEPTH, tree_tokens
from mtkit.decode.markup import Markup
from mtkit.errors import MtkitError

ATTACK = "<img src=x onerror=alert(1)>"
HOSTILE = [
    "<!-- a -- > <img src=x onerror=alert(1)> -->",
    "<p>a <!-- a -- > <img src=x onerror=alert(1)> --> b</p>",
    "<!--><img src=x onerror=alert(1)>-->",
    "<!---><img src=x onerror=alert(1)>-->",
    "<!-- x --!><b>live</b> <img src=x onerror=alert(1)>",
    "<!-- unclosed <img src=x onerror=alert(1)>",
    "<![CDATA[<img src=x onerror=alert(1)>]]> text",
    "<? <img src=x onerror=alert(1)> ?> text",
    "<!x <img src=x onerror=alert(1)>> text",
    "</ 3 <img src=x onerror=alert(1)>> text",
    "<textarea>&lt;/textarea&gt;&lt;img src=x onerror=alert(1)&gt;</textarea>",
    "<textarea><img src=x onerror=alert(1)></textarea> after",
    "<p>before <textarea>&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;</textarea> after</p>",
    "<title>&lt;/title&gt;&lt;img src=x onerror=alert(1)&gt;</title>",
    "<p>&lt;script&gt;alert(1)&lt;/script&gt; and &lt;img src=x onerror=alert(1)&gt;</p>",
    "<b>&amp;lt;img src=x onerror=alert(1)&amp;gt;</b>",
    "&#60;img src=x onerror=alert(1)&#62; &#x3C;b&#x3E; &LT;i&GT; &lt",
    "<svg><script>&lt;img src=x onerror=alert(1)&gt;</script></svg>",
    "<svg><style>&lt;/style&gt;&lt;img src=x onerror=alert(1)&gt;</style></svg>",
    "<svg><foreignObject><p>hi &lt;b&gt; there</p></foreignObject><a xlink:href=\"#x\">t</a></svg>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
    "<noembed><img src=x onerror=alert(1)></noembed> <noframes><img src=x onerror=alert(1)></noframes>",
    "<xmp>&lt;/xmp&gt;<img src=x onerror=alert(1)></xmp>",
    "<iframe><img src=x onerror=alert(1)></iframe>",
    "<style>p{}</style>a <script>if (a<b) x('</scr'+'ipt>')</script> b",
    "<plaintext><img src=x onerror=alert(1)></plaintext>",
    '<a title="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;">link</a>',
    "<a title='\"><img src=x onerror=alert(1)>'>link</a>",
    "<a title=`x`onmouseover=alert(1)>link</a>",
    '<img alt="&#x3C;img src=x onerror=alert(1)&#x3E;" src=a.png> caption',
    "<a href=1 href=2 HREF=3>dup</a> <b a\"b='c' <c=d>x</b>",
    "<div id=\"a\x00b\">nul\x00 text</div>",
    "<p>a<img src=x onerror=alert(1)//",
    "<table>x &lt;img&gt; <tr><td>&lt;img src=x onerror=alert(1)&gt;</td></tr></table>",
    "<select><template><style><img src=x onerror=alert(1)></style></template></select>",
    "<a>one <a>two</a></a> <p>three <div>four</p> five</div>",
    "<b>man <i>runs</b> fast</i> &nbsp;&nbsp;x",
    "<!DOCTYPE html><html><head><title>&lt;/title&gt;&lt;img src=x onerror=alert(1)&gt;</title></head>"
    "<body><p>Hi <!-- a -- > <img src=x onerror=alert(1)> --> there</p></body></html>",
    "<!DOCTYPE html PUBLIC \"-//W3C//DTD HTML 4.01//EN\" 'x\">y'><p>doc</p>",
]

# Trees a parser builds that do not read back the same (mutation XSS): refused in one sentence.
MUTATING = [
    "<svg></p><style><a id=\"</style><img src=1 onerror=alert(1)>\">",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>",
]


def markup_only(tokens):
    """Elements with their attributes, comments and doctypes, in document order: no text."""
    return [t for t in tokens if t[0] != "text"]


def words(tokens):
    return " ".join("".join(t[1] for t in tokens if t[0] == "text").split())


def run(sources, translate):
    markup = Markup(sources)
    found = [translate(t) for t in markup.texts]
    pairs = markup.pairs(found)
    return markup.render(found, [list(range(len(t))) for _, t in pairs])


@pytest.mark.parametrize("source", HOSTILE)
def test_the_words_kept_as_they_are_give_a_browser_the_same_tree(source):
    """fault: hostile markup, each unit's translation its own words; expected: html5lib reads in the output the
    input's elements, attributes and comments in order, and the same words."""
    (out,) = run([source], lambda text: text)
    assert markup_only(tree_tokens(out)) == markup_only(tree_tokens(source)), out
    assert words(tree_tokens(out)) == words(tree_tokens(source)), out


SAID = [ATTACK, "</textarea><script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "-->"]


@pytest.mark.parametrize("source", HOSTILE)
@pytest.mark.parametrize("said", SAID)
def test_a_translation_that_says_a_tag_stays_text(source, said):
    """fault: a model whose translations are themselves markup; expected: text in the output, no new element."""
    (out,) = run([source], lambda text: f"{text} {said}")
    assert markup_only(tree_tokens(out)) == markup_only(tree_tokens(source)), out
    if Markup([source]).texts:
        assert said in words(tree_tokens(out)), out


@pytest.mark.parametrize("source", MUTATING)
def test_markup_that_would_move_on_a_second_reading_is_refused_in_one_sentence(source):
    """fault: mutation-XSS shapes, whose parsed tree reads back otherwise; expected: one sentence, nothing out."""
    with pytest.raises(MtkitError, match="does not read back as it was read"):
        run([source], lambda text: text)


class StandInService:
    """The server's Service as mtkit/serve/markup.py uses it: each line translated as itself plus `said`."""

    def __init__(self, said: str = "") -> None:
        self.said = said

    async def translate(self, lines, config, client_gone=None, target_lang="", glossary=None):
        return [type("Found", (), {"text": f"{line} {self.said}".strip()}) for line in lines]

    async def align(self, pairs, target_lang=""):
        return [list(range(len(t))) for _, t in pairs]


def test_the_server_renders_the_same_algorithm():
    """fault: the server kept a second copy of markup's steps; expected: its answers are Markup's, for hostile
    sources too."""
    from mtkit.config import DecodeConfig
    from mtkit.serve.markup import translate_html

    served = asyncio.run(translate_html(StandInService(ATTACK), HOSTILE, DecodeConfig(), ""))  # type: ignore[arg-type]
    assert served == run(HOSTILE, lambda text: f"{text} {ATTACK}")
    for source, out in zip(HOSTILE, served):
        assert markup_only(tree_tokens(out)) == markup_only(tree_tokens(source)), out


@pytest.mark.parametrize("tag", ["b", "span", "div", "i><b"])
def test_tags_nested_ten_thousand_deep_are_one_sentence(tag):
    """fault: 10,000 nested tags (a RecursionError traceback before); expected: refused in one sentence that
    names the bound, by the library and, as a 400, by the server; MAX_DEPTH levels translate."""
    deep = f"<{tag}>" * 10_000 + "x"
    with pytest.raises(MtkitError, match=f"more than {MAX_DEPTH} deep"):
        Markup([deep])
    fine = "<span>" * MAX_DEPTH + "a b" + "</span>" * MAX_DEPTH
    (out,) = run([fine], lambda text: text)
    assert markup_only(tree_tokens(out)) == markup_only(tree_tokens(fine))


def test_the_server_answers_deep_or_mutating_markup_with_a_400():
    from mtkit.config import DecodeConfig
    from mtkit.serve.markup import translate_html
    from mtkit.serve.payload import RequestError

    class Never(StandInService):
        async def translate(self, *args, **kwargs):
            raise AssertionError("nothing is translated")

    with pytest.raises(RequestError) as caught:
        asyncio.run(translate_html(Never(), ["<b>" * 10_000], DecodeConfig(), ""))  # type: ignore[arg-type]
    assert caught.value.status == 400 and re.search(r"more than \d+ deep", caught.value.message)
    with pytest.raises(RequestError) as caught:
        asyncio.run(translate_html(StandInService(), MUTATING[:1], DecodeConfig(), ""))  # type: ignore[arg-type]
    assert caught.value.status == 400 and "does not read back" in caught.value.message


def test_the_command_line_refuses_deep_markup_in_one_sentence(cli, cli_model, tmp_path):
    """fault: `translate --format html` of a hostile file; expected: the comment and the textarea kept inert,
    and a line of 10,000 nested tags one sentence, exit 1, no traceback."""
    source = tmp_path / "in.html"
    source.write_text(HOSTILE[0] + "\n" + HOSTILE[10] + "\n")
    done = cli("translate", "-m", cli_model, "-i", source, "--format", "html", "--beam", "1", "--max-len-b", "3")
    assert done.returncode == 0, done.stderr
    for line, out in zip(source.read_text().splitlines(), done.stdout.splitlines()):
        assert markup_only(tree_tokens(out)) == markup_only(tree_tokens(line)), out
    deep = tmp_path / "deep.html"
    deep.write_text("<b>" * 10_000 + "x\n")
    done = cli("translate", "-m", cli_model, "-i", deep, "--format", "html", "--beam", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"more than {MAX_DEPTH} deep" in done.stderr


@pytest.mark.parametrize("said", SAID)
def test_a_translated_attribute_that_says_a_tag_stays_its_value(said):
    """fault: title and alt translated (--attributes title,alt) by a model that writes markup; expected: the
    values change, the elements and the other attributes stay, nothing new appears."""
    source = '<p title="A red bike">A man <img src="a.png" alt="A dog &quot;runs&quot;"> rides.</p>'
    markup = Markup([source], attributes=("title", "alt"))
    assert markup.texts == ["A red bike", 'A dog "runs"', "A man rides."]
    found = [f"{t} {said}" for t in markup.texts]
    (out,) = markup.render(found, None)
    tokens = [t for t in markup_only(tree_tokens(out)) if t[0] != "element" or t[1]]  # the root left out
    assert [(t[1], [k for k, _ in t[2]]) for t in tokens if t[0] == "element"] == [
        ("p", ["title"]),
        ("img", ["alt", "src"]),
    ]
    attrs = {k: v for t in tokens if t[0] == "element" for k, v in t[2]}
    assert attrs["title"] == f"A red bike {said}" and attrs["alt"] == f'A dog "runs" {said}' and attrs["src"] == "a.png"
