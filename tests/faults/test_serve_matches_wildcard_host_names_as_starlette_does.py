"""`--allow-host '*.example.org'`: any name under example.org is allowed, as Starlette's TrustedHostMiddleware.

It was accepted and never matched: every request got 400. Other wildcard forms are refused at start.
"""

from __future__ import annotations

import pytest

from mtkit.errors import MtkitError
from mtkit.serve.guard import Access


def test_a_subdomain_wildcard_matches_names_under_it_only(cli):
    """fault: `--allow-host '*.example.org'`; expected: a.example.org and a.b.example.org allowed, example.org
    and evil-example.org not; `*example.org` refused at start."""
    access = Access(hosts=("*.Example.org",))
    assert access.host_allowed("api.example.org:5000") and access.host_allowed("a.b.example.org")
    assert not access.host_allowed("example.org") and not access.host_allowed("evilexample.org")
    assert not access.host_allowed("example.org.evil.net")
    for bad in ("*example.org", "api.*.org", "*.*.org"):
        with pytest.raises(MtkitError, match="a wildcard is"):
            Access(hosts=(bad,))
    done = cli("serve", "-m", "no-model.pt", "--allow-host", "*example.org")
    assert done.returncode in (1, 2) and "wildcard" in done.stderr and "Traceback" not in done.stderr, done.stderr
