"""Row 4 of issue 37: the server no longer imports and runs a `module:function` named in $MTKIT_SERVE_DECODE_HOOK.

That hook let whoever could set the production server's environment run code inside it; the
tests that needed a slow or failing decoder now monkeypatch `Service.decoder` instead
(tests/support/gated.py for a real server process, tests/support/fake_service.py in-process).
"""

from __future__ import annotations

import asyncio
import sys
import threading

from mtkit.config import DecodeConfig
from mtkit.serve.service import ServeSettings, Service
from tests.support.serve import wait_until

HOOK_MODULE = "tests_faults_planted_hook"


def test_a_decode_hook_in_the_environment_is_never_imported(cli_model, tmp_path, monkeypatch):
    """fault: $MTKIT_SERVE_DECODE_HOOK names a module:function in the server's environment;
    expected: never imported or run."""
    planted = tmp_path / f"{HOOK_MODULE}.py"
    ran = tmp_path / "ran"
    planted.write_text(f"from pathlib import Path\nPath({str(ran)!r}).touch()\ndef wrap(decode):\n    return decode\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("MTKIT_SERVE_DECODE_HOOK", f"{HOOK_MODULE}:wrap")
    service = Service(ServeSettings(models=(str(cli_model),), device="cpu"))
    failed = threading.Event()
    service.start_loading(failed.set)
    wait_until(lambda: service.ready or failed.is_set(), 120, "the model to load")
    assert service.ready and not failed.is_set(), service.error
    (translation,) = asyncio.run(service.translate(["green dog"], DecodeConfig(beam=1)))
    assert isinstance(translation.text, str)
    service.close()
    assert HOOK_MODULE not in sys.modules and not ran.exists()
