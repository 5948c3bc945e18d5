"""Request bodies: each mistake is one sentence with its status; good ones give lines and settings."""

from __future__ import annotations

import pytest

from mtkit.config import DecodeConfig
from mtkit.serve.payload import Limits, RequestError, parse_json, parse_opennmt, parse_translate

LIMITS = Limits(max_lines=3, max_chars=20, max_beam=8)


def status(call, *args) -> int:
    with pytest.raises(RequestError) as info:
        call(*args)
    assert info.value.message.endswith(".")
    return info.value.status


def test_good_requests():
    lines, config, target_lang = parse_translate({"text": ["a", ""], "beam": 2, "alpha": 1}, DecodeConfig(), LIMITS)
    assert lines == ["a", ""] and config == DecodeConfig(beam=2, alpha=1) and target_lang is None
    _, config, target_lang = parse_translate({"text": ["a"], "target_lang": "fr"}, DecodeConfig(), LIMITS)
    assert config == DecodeConfig() and target_lang == "fr"  # the request's direction, apart from the search
    assert parse_opennmt([{"src": "x", "id": 100}, {"src": "y"}], LIMITS) == ["x", "y"]
    assert parse_json('{"text": ["Straße"]}'.encode()) == {"text": ["Straße"]}


@pytest.mark.parametrize("body,code", [(b"", 400), (b"{", 400), (b"\xc3(", 400), (b"nul", 400)])
def test_bodies_that_are_not_json(body, code):
    assert status(parse_json, body) == code


@pytest.mark.parametrize(
    "data,code",
    [
        ({"text": ["a"] * 4}, 413),
        ({"text": ["a" * 21]}, 413),
        ({"text": []}, 422),
        ({"text": [None]}, 422),
        ({"text": ["\ud800"]}, 422),
        ({"text": ["a"], "beam": 9}, 422),
        ({"text": ["a"], "beam": 2.0}, 422),
        ({"text": ["a"], "nbest": 5}, 422),
        ({"text": ["a"], "device": "cuda"}, 422),
        ({"text": ["a"], "target_lang": 3}, 422),
        ([], 422),
    ],
)
def test_bad_translate_requests(data, code):
    assert status(parse_translate, data, DecodeConfig(), LIMITS) == code


def test_the_servers_own_beam_is_always_allowed():
    _, config, _ = parse_translate({"text": ["a"], "beam": 12}, DecodeConfig(beam=12), LIMITS)
    assert config.beam == 12
