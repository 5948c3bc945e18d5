"""Every use of the model in a server runs in the thread that loaded it: PyTorch's OpenMP keeps a team of threads
for each thread that runs a parallel operation, and a second team (more threads than cores) made one sentence
decode in twice the time on a 2-core CPU (mtkit/serve/batcher.py)."""

from __future__ import annotations

import asyncio
import threading

from mtkit.config import DecodeConfig
from mtkit.serve.service import ServeSettings, Service
from tests.support.serve import wait_until


class Recording(Service):
    """The real service on a real model, noting the thread of each use of the model."""

    def __init__(self, model: str) -> None:
        super().__init__(ServeSettings(models=(model,), device="cpu"))
        self.threads: dict[str, set[threading.Thread]] = {"load": set(), "decode": set(), "align": set()}

    def _load(self) -> None:
        self.threads["load"].add(threading.current_thread())
        super()._load()
        assert self.translator is not None
        translator, align = self.translator, self.translator.align

        def recorded_align(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.threads["align"].add(threading.current_thread())
            return align(*args, **kwargs)

        translator.align = recorded_align  # type: ignore[method-assign]

    def decoder(self, translator):  # noqa: ANN001, ANN201
        decode = super().decoder(translator)

        def recorded(lines, config, *rest):  # noqa: ANN001, ANN002, ANN202
            self.threads["decode"].add(threading.current_thread())
            return decode(lines, config, *rest)

        return recorded


def test_loading_decoding_and_alignment_share_one_thread(cli_model):
    service = Recording(str(cli_model))
    failed = threading.Event()
    service.start_loading(failed.set)
    wait_until(lambda: service.ready or failed.is_set(), 120, "the model to load")
    assert service.ready, service.error

    async def use() -> None:
        await service.translate(["green dog"], DecodeConfig(beam=1))
        await service.align([(["green", "dog"], ["grün", "hund"])], "")

    asyncio.run(use())
    service.close()
    (loader,) = service.threads["load"]
    assert loader is not threading.current_thread()
    assert service.threads["decode"] == {loader} and service.threads["align"] == {loader}
