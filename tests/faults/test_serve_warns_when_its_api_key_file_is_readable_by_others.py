"""`serve --api-key-file` readable by other users: a warning naming the mode (docs/serving.md asks for 0600)."""

from __future__ import annotations

import logging

from mtkit.serve.guard import load_api_key


def test_a_key_file_others_can_read_is_warned_about(tmp_path, caplog, monkeypatch):
    """fault: `--api-key-file` readable by others; expected: a warning naming the mode and chmod 600."""
    # A server started earlier in this process counts repeated warnings once per cause (connections.py).
    monkeypatch.setattr(logging.getLogger("mtkit.serve.guard"), "filters", [])
    key = tmp_path / "key"
    key.write_text("s3cret-key\n")
    key.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="mtkit.serve.guard"):  # whatever level an earlier CLI run left
        assert load_api_key(str(key)) == "s3cret-key"
    assert "mode 0644" in caplog.text and "chmod 600" in caplog.text
    caplog.clear()
    key.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="mtkit.serve.guard"):  # whatever level an earlier CLI run left
        assert load_api_key(str(key)) == "s3cret-key"
    assert caplog.text == ""
