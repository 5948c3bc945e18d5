"""The compiled decoding step (bench/compiled_step.py, measured by bench/translate_speed.py --compile), handed to
mtkit's search as its step, gives the outputs of the eager step, for padded and unpadded batches, beam search and
greedy search.

Compiling takes tens of seconds on a small CPU, hence slow; it needs a C++ compiler (inductor's CPU kernels).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import torch

from mtkit.config import DecodeConfig
from mtkit.decode.loading import load_translator
from tests.support.recipes import load_script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("g++") is None, reason="inductor builds its CPU kernels with a C++ compiler"),
]


@pytest.fixture
def compiler_settings_restored() -> Iterator[None]:
    """compile_model sets three of the process's compiler settings: each put back after the test by torch's own
    `patch` (pytest's monkeypatch would delete them from torch's config modules on undo: later tests then fail)."""
    with (
        torch._inductor.config.patch(freezing=torch._inductor.config.freezing),
        torch.fx.experimental._config.patch(use_duck_shape=torch.fx.experimental._config.use_duck_shape),
        torch._dynamo.config.patch(recompile_limit=torch._dynamo.config.recompile_limit),
    ):
        yield
    torch._dynamo.reset()  # and its compiled code with the frozen weights goes too


def test_the_compiled_step_translates_as_the_eager_one(
    trained_model, toy_sentences, compiler_settings_restored
) -> None:
    eager = load_translator(trained_model, device="cpu")
    fast = load_translator(trained_model, device="cpu")
    compiled = load_script("bench/compiled_step.py")
    engine = fast.engine
    engine.steps = steps = compiled.compile_model(engine.model)  # type: ignore[attr-defined]
    calls = []
    step = steps.function
    steps.function = lambda *args: calls.append(args[-1]) or step(*args)  # counts the compiled steps
    sentences = toy_sentences[:24]
    for config in (DecodeConfig(beam=4), DecodeConfig(beam=1)):
        expected = [(t.text, t.score) for t in eager.translate_stream(sentences, config, 64)]
        got = [(t.text, t.score) for t in fast.translate_stream(sentences, config, 64)]
        assert [text for text, _ in got] == [text for text, _ in expected]
        assert [score for _, score in got] == pytest.approx([score for _, score in expected], abs=1e-4)
        alone = [t.text for t in fast.translate_stream(sentences[:1], config, 64)]  # a batch without padding
        assert alone == [expected[0][0]]
    assert calls and min(calls) == compiled.FIRST_COMPILED  # the first two steps are eager, the rest compiled
