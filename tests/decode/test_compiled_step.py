"""`--compile` for decoding (mtkit/decode/compiled.py): off stays eager, auto chooses by a kept measurement, and a
compiled step that fails falls back to the same step run eagerly, said in one sentence."""

from __future__ import annotations

import logging
import os
import shutil

import pytest
import torch

from mtkit.config import DecodeConfig
from mtkit.decode import compiled
from mtkit.decode.beam import beam_search
from mtkit.decode.ensemble import make_step
from mtkit.errors import MtkitError
from mtkit.runtime import kept
from mtkit.runtime.int8 import quantize_int8
from tests.support.models import batch, random_model, sources

CPU = torch.device("cpu")
V = 40


@pytest.fixture
def timings(monkeypatch):
    """The compiled step's measured speed-up, scripted: each measurement takes the next answer and is counted."""
    answers, calls = [1.31, 0.97, 0.9], []

    def measure(model):
        calls.append(model.cfg.d_model)
        return answers[len(calls) - 1]

    monkeypatch.setattr(compiled, "speedup", measure)
    return calls


def test_off_is_eager_and_a_wrong_choice_is_one_sentence(timings):
    model = random_model(V, seed=1)
    assert compiled.choose_steps("off", [model], CPU) == (None, "eager (--compile off)")
    with pytest.raises(MtkitError, match="--compile must be one of off, on, auto"):
        compiled.choose_steps("yes", [model], CPU)
    assert timings == []


def test_auto_compiles_where_it_measured_faster_and_keeps_the_answer(timings):
    model = random_model(V, seed=1)
    factory, why = compiled.choose_steps("auto", [model], CPU)
    assert factory is not None and "1.31x eager" in why and "measured now" in why
    again, why = compiled.choose_steps("auto", [model], CPU)  # read, not timed: the 0.97x answer is never asked
    assert again is not None and "kept in" in why and len(timings) == 1


def test_auto_stays_eager_where_it_did_not_measure_faster(timings, monkeypatch):
    monkeypatch.setenv(kept.REMEASURE_ENV, "1")
    model = random_model(V, seed=1)
    compiled.choose_steps("auto", [model], CPU)
    factory, why = compiled.choose_steps("auto", [model], CPU)  # timed again: 0.97x
    assert factory is None and "0.97x eager" in why and "under 1.05x" in why


def test_auto_never_measures_what_it_cannot_run_compiled(timings):
    for model in (random_model(V, seed=1).double(), quantize_int8(random_model(V, seed=1))):
        factory, why = compiled.choose_steps("auto", [model], CPU)
        assert factory is None and "fp32 on the CPU only" in why
    assert timings == []


def test_a_compiled_step_that_fails_decodes_eagerly_and_says_so_once(monkeypatch, caplog):
    model = random_model(V, seed=2, max_positions=64)
    src = batch(sources(1, V, seed=5, max_len=7))
    config = DecodeConfig(beam=1, max_len_b=8)
    factory, states = compiled.compiled_steps()
    calls = []

    class Broken:
        def __call__(self, *args):
            calls.append(1)
            raise RuntimeError("InductorError: no C++ compiler found\nthe rest of a long trace")

        encode = __call__

    states.compiled = Broken()
    with caplog.at_level(logging.WARNING, logger="mtkit.decode.compiled"):
        found = beam_search(model, src, config, steps=factory)
    expected = beam_search(model, src, config, steps=make_step)
    assert [[h.tokens for h in hs] for hs in found.hypotheses] == [[h.tokens for h in hs] for hs in expected.hypotheses]
    assert len(calls) == 1 and states.failed == "InductorError: no C++ compiler found"
    (record,) = caplog.records
    assert record.getMessage() == (
        "the compiled decoder step failed (InductorError: no C++ compiler found); decoding eagerly instead"
    )


class Eager:
    """A 'compiled' step and encoder that are `static_states` and `encode` themselves, counting their calls: the wiring
    runs end to end without seconds of compiling."""

    def __init__(self):
        self.rows, self.sources = [], []

    def __call__(self, *args):
        self.rows.append(args[1].size(0))
        return compiled.static_states(*args)

    def encode(self, model, src):
        self.sources.append(src.size(0))
        return compiled.encode(model, src)


@pytest.fixture
def eager_compile(monkeypatch):
    monkeypatch.setattr(compiled, "ExportedStates", Eager)


def test_only_steps_of_one_row_run_compiled(monkeypatch):
    model = random_model(V, seed=2, max_positions=64)
    factory, states = compiled.compiled_steps()
    states.compiled = Eager()
    one, several = batch(sources(1, V, seed=5, max_len=7)), batch(sources(3, V, seed=6, max_len=7))
    for src, config in ((one, DecodeConfig(beam=1, max_len_b=6)), (several, DecodeConfig(beam=1, max_len_b=6))):
        beam_search(model, src, config, steps=factory)
    beam_search(model, one, DecodeConfig(beam=3, max_len_b=6), steps=factory)  # its first step: one row
    assert states.compiled.rows and set(states.compiled.rows) == {1}
    assert states.compiled.sources == [1, 3, 1]  # every source reaches the compiled encoder, which takes or declines


def test_translate_compile_auto_decodes_lone_lines_through_the_chosen_step_with_the_same_output(
    cli_model, timings, eager_compile, caplog, monkeypatch
):
    from mtkit.decode import loading
    from mtkit.decode.step import StaticStep

    made = []
    monkeypatch.setattr(StaticStep, "__init__", _counting(StaticStep.__init__, made))
    lines = ["a b c d", "e f g", "h i"]
    plain = loading.prepare(cli_model, device="cpu", max_len_b=6)
    with caplog.at_level(logging.INFO, logger="mtkit.decode.torch_engine"):
        chosen = loading.prepare(cli_model, device="cpu", compile="auto", max_len_b=6)
    assert "decoder step: compiled decoder step for greedy searches of one sentence: 1.31x eager" in caplog.text
    assert [chosen.translate([line]) for line in lines] == [plain.translate([line]) for line in lines]
    assert len(made) == len(lines)  # each lone line through the static step
    assert chosen.translate(lines) == plain.translate(lines) and len(made) == len(lines)  # a batch: eager


def _counting(init, made):
    def counted(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    return counted


def test_compile_is_refused_in_one_sentence_where_it_cannot_run(cli, cli_model):
    for flags, said in (
        (["--compile", "yes"], "--compile must be one of off, on, auto, not 'yes'."),
        (["--compile", "on", "--workers", "2"], "--compile on runs with one worker"),
    ):
        done = cli("translate", "-m", str(cli_model), *flags, input="a b\n")
        assert done.returncode != 0 and done.stdout == "" and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_serve_plans_with_its_compile_setting(cli_model):
    from mtkit.serve.service import ServeSettings

    assert ServeSettings(models=(str(cli_model),), compile="auto").plan().compile == "auto"
    with pytest.raises(MtkitError, match="--compile must be one of off, on, auto"):
        ServeSettings(models=(str(cli_model),), compile="yes").plan()


@pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None, reason="AOTInductor needs a C++ compiler (g++ or $CXX)"
)
def test_the_exported_step_and_encoder_decode_as_eager_and_a_second_process_loads_them(tmp_path, monkeypatch):
    """The real thing, once: both packages exported and compiled by AOTInductor for a tiny model (seconds), greedy
    outputs and scores as eager's for sentences of several lengths, and a new ExportedStates (a later process) loads
    the kept packages instead of building them again."""
    from mtkit.decode import exported

    model = random_model(V, seed=3, max_positions=64)
    config = DecodeConfig(beam=1, max_len_b=12)
    lines = [sources(1, V, seed=s, max_len=n) for s, n in ((7, 3), (8, 9), (9, 14))]
    built = []
    monkeypatch.setattr(exported, "build", _counting_build(exported.build, built))

    def decode(states):
        factory = compiled.static_steps(states, states.encode)
        return [beam_search(model, batch(line), config, steps=factory).hypotheses[0] for line in lines]

    with torch.inference_mode():
        expected = [beam_search(model, batch(line), config, steps=make_step).hypotheses[0] for line in lines]
        first = compiled.Compiled()
        first.compiled = exported.ExportedStates(tmp_path)
        found = decode(first)
        again = compiled.Compiled()
        again.compiled = exported.ExportedStates(tmp_path)
        assert decode(again) == found
        beam = DecodeConfig(beam=3, max_len_b=12)  # one sentence's beam: the compiled encoder, the steps eager
        for line in lines:
            src = batch(line)
            (by_package,) = beam_search(model, src, beam, steps=compiled.static_steps(first, first.encode)).hypotheses
            (by_eager,) = beam_search(model, src, beam, steps=make_step).hypotheses
            assert [h.tokens for h in by_package] == [h.tokens for h in by_eager]
            assert [h.score for h in by_package] == pytest.approx([h.score for h in by_eager], abs=1e-5)
    assert first.failed is None and again.failed is None
    assert [[h.tokens for h in hs] for hs in found] == [[h.tokens for h in hs] for hs in expected]
    for hs, es in zip(found, expected):
        assert [h.score for h in hs] == pytest.approx([h.score for h in es], abs=1e-5)
    assert built == ["decoder-step", "encoder"] or built == ["encoder", "decoder-step"]
    assert sorted(p.name.split("-")[0] for p in tmp_path.glob("*.pt2")) == ["decoder", "encoder"]
    assert len(first.compiled.runners) == 2 and len(again.compiled.runners) == 2


def _counting_build(build, built):
    def counted(kind, *args):
        built.append(kind)
        build(kind, *args)

    return counted
