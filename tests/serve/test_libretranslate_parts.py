"""LibreTranslate's pieces without a server: the languages a model offers, --languages, detection, request checks."""

from __future__ import annotations

import pytest

from mtkit.errors import MtkitError
from mtkit.serve.libretranslate import Detector, Directions, directions, for_target, parse_languages, parse_request
from mtkit.serve.payload import Limits, RequestError

TOKENS = {">>de<<": 4, ">>fr<<": 5}


def test_languages_from_the_option_the_record_or_the_tokens():
    assert directions((("en", "de"),), None, {}).pairs == (("en", "de"),)
    assert directions((), ("en", "de"), {}).pairs == (("en", "de"),)
    assert directions((), ("en", "de"), TOKENS) == Directions((("en", "de"), ("en", "fr")), tokens=True)
    assert directions((), ("src", "tgt"), TOKENS).pairs == ()  # a multilingual directory names no source
    assert directions((), None, {}).pairs == ()


def test_languages_lists_sources_with_their_targets_then_targets_only():
    dirs = Directions((("en", "de"), ("en", "fr"), ("de", "en")))
    assert dirs.languages() == [
        {"code": "en", "name": "English", "targets": ["de", "fr"]},
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "fr", "name": "French", "targets": []},
    ]


def test_parse_languages():
    assert parse_languages("en-de, en-fr") == (("en", "de"), ("en", "fr"))
    for bad in ("ende", "", "en-", "-de", "en de"):
        with pytest.raises(MtkitError, match="--languages takes pairs like en-de"):
            parse_languages(bad)


def test_the_target_reaches_the_translator_as_its_token_only_where_the_model_has_tokens():
    assert for_target("fr", Directions((("en", "fr"),), tokens=True)) == "fr"
    assert for_target("de", Directions((("en", "de"),))) == ""


def test_request_checks():
    dirs = Directions((("en", "de"),))
    req = parse_request({"q": "a\r\nb", "target": "de"}, dirs, Limits(), is_json=False)
    assert (req.lines, req.batch, req.source, req.html, req.alternatives) == (["a\nb"], False, "auto", False, 0)
    assert parse_request({"q": ["x"], "target": "de", "format": "html"}, dirs, Limits(), True).html
    with pytest.raises(RequestError, match="no target parameter"):
        parse_request({"q": "x"}, dirs, Limits(), True)
    with pytest.raises(RequestError, match="--languages en-de"):
        parse_request({"q": "x", "target": "de"}, Directions(()), Limits(), True)


def test_detection_with_one_source_language_is_that_language():
    assert Detector(["en"]).detect("Ein Hund.") == [{"confidence": 100.0, "language": "en"}]


def test_detection_among_several_source_languages():
    pytest.importorskip("py3langid")
    ranked = Detector(["en", "de"]).detect("Ein Mann fährt mit dem Fahrrad die Straße entlang.")
    assert [r["language"] for r in ranked] == ["de", "en"]
    assert ranked[0]["confidence"] > 90 and sum(r["confidence"] for r in ranked) == pytest.approx(100, abs=0.2)
