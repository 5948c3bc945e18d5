"""An API key file with a second line (a comment): the first line is the key, as `--help` and the docs say."""

from __future__ import annotations

import pytest

from mtkit.errors import MtkitError
from mtkit.serve.guard import load_api_key


def test_the_lines_after_the_first_are_left_alone(tmp_path):
    """fault: an API key file with a second line (a comment); expected: the first line used as the key."""
    key = tmp_path / "key"
    key.write_text("s3cret-key\n# rotated 2026-11-01 by ops\n")
    key.chmod(0o600)
    assert load_api_key(str(key)) == "s3cret-key"
    key.write_text("\nthe-key-on-line-two\n")
    with pytest.raises(MtkitError, match="is empty; put the key on its first line"):
        load_api_key(str(key))
