"""The access rules alone: which Host names and Origins pass, where the API key comes from, how it is compared."""

from __future__ import annotations

import pytest

from mtkit.errors import MtkitError
from mtkit.serve.guard import API_KEY_ENV, Access, host_name, is_loopback, load_api_key


@pytest.mark.parametrize(
    "header,name",
    [("localhost:5000", "localhost"), ("[::1]:5000", "[::1]"), ("[::1]", "[::1]"), ("Example.ORG", "example.org")],
)
def test_host_name_drops_the_port(header, name):
    assert host_name(header) == name


LOOPBACK = Access(bind="127.0.0.1")
NAMED = Access(bind="10.1.2.3", hosts=("mt.example.org",))
EVERYWHERE = Access(bind="0.0.0.0")


@pytest.mark.parametrize(
    "access,host,allowed",
    [
        (LOOPBACK, "127.0.0.1:5000", True),
        (LOOPBACK, "localhost:5000", True),
        (LOOPBACK, "[::1]:5000", True),
        (LOOPBACK, "127.0.0.2", True),  # all of 127/8 is this machine
        (LOOPBACK, "evil.example.com:5000", False),  # DNS rebinding: the attacker's name
        (LOOPBACK, "localhost.evil.example.com", False),
        (LOOPBACK, "10.1.2.3:5000", False),
        (LOOPBACK, "", False),
        (NAMED, "10.1.2.3:5000", True),
        (NAMED, "MT.example.org", True),
        (NAMED, "other.example.org", False),
        (NAMED, "10.9.9.9", False),
        (EVERYWHERE, "10.9.9.9:5000", True),  # an address cannot be a rebinding page's name
        (EVERYWHERE, "[fe80::1]:5000", True),
        (EVERYWHERE, "evil.example.com", False),
        (Access(hosts=("*",)), "anything.example", True),
        (Access(bind="::1"), "[::1]:5000", True),
    ],
)
def test_which_hosts_are_answered(access, host, allowed):
    assert access.host_allowed(host) is allowed


def test_origins_match_as_browsers_send_them():
    access = Access(origins=("https://App.example.org/", "http://localhost:8080"))
    assert access.origin_allowed("https://app.example.org")
    assert access.origin_allowed("http://localhost:8080")
    assert not access.origin_allowed("http://app.example.org")  # another scheme is another origin
    assert not access.origin_allowed("http://localhost:8081")
    assert not access.origin_allowed("null")  # sandboxed frames and file:// pages
    assert Access(origins=("*",)).origin_allowed("https://anywhere.example")


@pytest.mark.parametrize("origin", ["app.example.org", "https://app.example.org/path", "https://"])
def test_an_origin_that_is_not_one_is_one_sentence(origin):
    with pytest.raises(MtkitError, match="is not an origin"):
        Access(origins=(origin,))


def test_the_key_is_a_bearer_token_or_x_api_key():
    access = Access(api_key="s3cret")
    assert access.key_given({b"authorization": b"Bearer s3cret"})
    assert access.key_given({b"authorization": b"bearer  s3cret "})
    assert access.key_given({b"x-api-key": b"s3cret"})
    for headers in ({}, {b"authorization": b"Bearer s3cre"}, {b"authorization": b"Basic s3cret"}, {b"x-api-key": b""}):
        assert not access.key_given(headers)
    assert "s3cret" not in repr(access)


def test_the_key_comes_from_the_file_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert load_api_key(None) is None
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert load_api_key(None) == "from-env"
    (tmp_path / "key").write_text("from-file\n")
    assert load_api_key(str(tmp_path / "key")) == "from-file"  # the file wins


@pytest.mark.parametrize(
    "content,says", [(None, "cannot read the API key file"), ("\n", "is empty"), ("two words\n", "printable ASCII")]
)
def test_a_bad_key_file_is_one_sentence(tmp_path, content, says):
    path = tmp_path / "key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(MtkitError, match=says):
        load_api_key(str(path))


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.0.0.1")


def test_the_servers_own_page_is_an_allowed_origin():
    """The page at / sends its requests with the Origin of the Host it came from; no other page is let in."""
    access = Access()
    assert access.origin_allowed("http://127.0.0.1:5000", "127.0.0.1:5000")
    assert access.origin_allowed("http://localhost:5000/", "localhost:5000")
    assert not access.origin_allowed("http://127.0.0.1:5001", "127.0.0.1:5000")
    assert not access.origin_allowed("https://evil.example", "127.0.0.1:5000")
    assert not access.origin_allowed("http://127.0.0.1:5000")  # no Host: nothing to compare with
