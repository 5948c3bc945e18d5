"""`serve --languages eng-deu,fra-deu` started; the first /detect answered 500 and every later one detected over all of
py3langid's languages. Codes language detection does not know are refused when the server starts, and detection
stays among the languages given."""

from __future__ import annotations

import pytest

from mtkit.errors import MtkitError
from mtkit.serve.languages import Detector
from tests.support.cli import run_cli

pytest.importorskip("py3langid")

GERMAN = "Ein Mann fährt mit dem Fahrrad die Straße entlang und zwei Hunde spielen im Schnee."


def test_serve_with_source_codes_detection_does_not_know_exits_with_one_sentence(cli_model):
    """fault: `mtkit serve --languages eng-deu,fra-deu`; expected: exit 1, one sentence naming eng and fra."""
    pytest.importorskip("fastapi")
    result = run_cli(
        "serve", "-m", cli_model, "--port", "0", "--languages", "eng-deu,fra-deu", process=True, timeout=180
    )
    assert result.returncode == 1, result.stderr
    assert "knows no language eng, fra" in result.stderr
    assert "Traceback" not in result.stderr


def test_detection_is_refused_then_stays_refused_never_unrestricted():
    detector = Detector(["eng", "fra"])
    for _ in range(2):  # the second call used to detect over every language py3langid knows
        with pytest.raises(MtkitError, match="knows no language eng, fra"):
            detector.check()


def test_detection_among_the_languages_given_only():
    ranked = Detector(["en", "fr"]).detect(GERMAN)
    assert {r["language"] for r in ranked} == {"en", "fr"}
