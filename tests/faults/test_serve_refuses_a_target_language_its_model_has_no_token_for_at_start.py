"""`mtkit serve -m BILINGUAL --target-lang fr` is refused at start, as `translate` refuses it.

It started, /health said ready, and every request got 422 for a setting of the server's own.
"""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli


@pytest.mark.parametrize("lang", ["fr", ">>fr<<"])
def test_serve_with_a_target_language_a_bilingual_model_has_no_token_for_exits_1_at_start(cli_model, lang):
    """fault: `serve -m BILINGUAL --target-lang fr`; expected: one sentence naming --target-lang, exit 1, the
    server never ready."""
    done = run_cli(
        "serve", "-m", cli_model, "--port", "0", "--threads", "1", "--target-lang", lang, process=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    assert "the model has no target-language tokens (it knows one pair); drop --target-lang fr." in done.stderr
    assert "Traceback" not in done.stderr


def test_translate_refuses_it_in_the_same_words(cli_model):
    done = run_cli("translate", "-m", cli_model, "--target-lang", "fr", input="a dog\n")
    assert done.returncode == 1 and "drop --target-lang fr." in done.stderr
