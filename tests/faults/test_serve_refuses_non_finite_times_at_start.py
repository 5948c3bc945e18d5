"""`serve --batch-wait-ms inf` started, then its decoder thread died at the first request while /health said ready;
`--drain-timeout inf` crashed with a traceback at start. Every time option is refused at start, in one sentence,
when it is not a finite number."""

from __future__ import annotations

import pytest

from mtkit.errors import MtkitError
from mtkit.serve.service import ServeSettings
from tests.support.cli import run_cli

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--batch-wait-ms", "inf"), ("--drain-timeout", "inf"), ("--request-timeout", "inf"), ("--read-timeout", "inf")],
)
def test_a_non_finite_time_is_one_sentence_and_no_server(cli_model, flag, value):
    """fault: `mtkit serve FLAG inf` (or nan); expected: exit 1 before listening, one sentence naming FLAG."""
    result = run_cli("serve", "-m", cli_model, "--port", "0", flag, value, process=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert f"{flag} must be a finite number" in result.stderr
    assert "Traceback" not in result.stderr and "listening on" not in result.stderr


def test_the_settings_refuse_them_for_library_callers_too():
    with pytest.raises(MtkitError, match="--batch-wait-ms must be a finite number of milliseconds"):
        ServeSettings(models=("m.pt",), batch_wait_ms=float("inf"))
    with pytest.raises(MtkitError, match="--drain-timeout"):
        ServeSettings(models=("m.pt",), drain_timeout_s=float("nan"))
    assert ServeSettings(models=("m.pt",), batch_wait_ms=0.0).batch_wait_ms == 0.0
