"""`python -m tests.support.gated serve ARGS`: the real `mtkit serve`, its decoder wrapped by `serve.gated`.

The server has no hook of its own (an environment variable that imports and runs code is not
for production); this harness monkeypatches `Service.decoder` in its own process before the
command line starts, so every other line of the server runs as it does for users. With
$MTKIT_TEST_ROOM_WAIT_S it also sets how long a connection past --max-connections waits for room
before its 503 (`connections.IDLE_AFTER_S`), so a test can act while connections wait.
"""

from __future__ import annotations

import os
from typing import Any

from mtkit.serve import connections
from mtkit.serve.service import Service
from tests.support.serve import gated


def main() -> None:
    original = Service.decoder

    def decoder(self: Service, translator: Any) -> Any:
        return gated(original(self, translator))

    Service.decoder = decoder  # type: ignore[method-assign]
    if wait := os.environ.get("MTKIT_TEST_ROOM_WAIT_S"):
        connections.IDLE_AFTER_S = float(wait)
    from mtkit.cli import main as mtkit_main

    mtkit_main()


if __name__ == "__main__":
    main()
