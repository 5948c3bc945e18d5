"""Fixtures of the server tests: one real `mtkit serve` per module (tests/support/serve.py).

The HTTP test modules skip themselves without the serve extra (fastapi, uvicorn) and httpx.
"""

from __future__ import annotations

import pytest

from tests.support.serve import Server


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    """One plain server per test module: small request limits, a 20 ms batching window."""
    srv = Server(
        cli_model, tmp_path_factory.mktemp("serve"), "--batch-wait-ms", "20", "--max-lines", "8", "--max-chars", "400"
    )
    yield srv
    srv.stop()
