"""`--compile` for decoding (mtkit/decode/compiled.py): off stays eager, auto chooses by a kept measurement, and a
compiled step that fails falls back to the same step run eagerly, said in one sentence."""

from __future__ import annotations

import dataclasses
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
from mtkit.model.static import static_run
from mtkit.runtime import kept
from mtkit.runtime.int8 import quantize_int8
from tests.support.models import batch, random_model, sources

CPU = torch.device("cpu")
V = 40


@pytest.fixture
def timings(monkeypatch):
    """The compiled step's measured speed-up, scripted: each measurement takes the next answer and is counted."""
    answers, calls = [1.31, 0.97, 0.9], []

    def measure(model, *probe):
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


def test_auto_hands_the_engine_the_steps_it_measured(monkeypatch):
    """The packages the measurement built and loaded are the engine's: one set of compiled steps, not a second."""
    made, probed = [], []
    real = compiled.compiled_steps
    monkeypatch.setattr(compiled, "compiled_steps", lambda: made.append(real()) or made[-1])
    monkeypatch.setattr(compiled, "speedup", lambda model, factory, states: probed.append(states) or 1.31)
    factory, _ = compiled.choose_steps("auto", [random_model(V, seed=1)], CPU)
    assert factory is not None and len(made) == 1 and probed == [made[0][1]]


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
        def run(self, *args):
            calls.append(1)
            raise RuntimeError("InductorError: no C++ compiler found\nthe rest of a long trace")

        encode = run

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
    """A 'compiled' greedy search and encoder that are `static_run` and `encode` themselves, counting their calls:
    the wiring runs end to end without seconds of compiling."""

    def __init__(self):
        self.rows, self.sources = [], []

    def run(self, *args):
        self.rows.append(args[1].size(0))
        return static_run(*args)

    def encode(self, model, src):
        self.sources.append(src.size(0))
        return compiled.encode(model, src)


@pytest.fixture
def eager_compile(monkeypatch):
    monkeypatch.setattr(compiled, "ExportedStates", Eager)


def test_greedy_searches_take_the_compiled_step_and_beams_do_not():
    model = random_model(V, seed=2, max_positions=64)
    factory, states = compiled.compiled_steps()
    states.compiled = Eager()
    one, several = batch(sources(1, V, seed=5, max_len=7)), batch(sources(3, V, seed=6, max_len=7))
    for src in (one, several):
        beam_search(model, src, DecodeConfig(beam=1, max_len_b=6), steps=factory)
    greedy_rows = list(states.compiled.rows)
    beam_search(model, one, DecodeConfig(beam=3, max_len_b=6), steps=factory)
    assert states.compiled.rows == greedy_rows and set(greedy_rows) == {1}  # a batch's and a beam's steps never ask
    assert states.compiled.sources == [1, 3, 1]  # every source reaches the compiled encoder, which takes or declines


def test_a_search_run_in_one_call_a_window_decodes_as_the_eager_search_over_windows_and_at_the_limit():
    """`static_run` (the loop the package compiles) run eagerly: greedy search hands it a lone sentence's steps a
    window at a time (WINDOW positions), takes the step at the length limit itself, and finds eager's outputs, over
    the whole vocabulary and over a shortlist's rows (columns in, token ids fed back)."""
    from mtkit.decode.shortlist import Restriction

    model = random_model(V, seed=3, max_positions=64)
    states = compiled.Compiled()
    states.compiled = Eager()
    factory = compiled.static_steps(states.encode, states.run)
    shortlist = Restriction(torch.tensor([0, 1, 2, 3, *range(12, 36)]))
    long = DecodeConfig(beam=1, max_len_a=0.0, max_len_b=40)  # this model runs to its limit: 41 steps, 3 windows
    with torch.inference_mode():
        for config in (DecodeConfig(beam=1, max_len_b=12), long):
            for src in (batch(sources(1, V, seed=s, max_len=n)) for s, n in ((7, 3), (9, 14), (10, 20))):
                for steps, eager in ((factory, make_step), (shortlist.steps(factory), shortlist.steps(make_step))):
                    runs = len(states.compiled.rows)
                    found, expected = (beam_search(model, src, config, steps=s) for s in (steps, eager))
                    _same(found.hypotheses, expected.hypotheses)
                    assert found.steps == expected.steps and len(states.compiled.rows) > runs
        found = beam_search(model, batch(sources(1, V, seed=10, max_len=20)), long, steps=factory)
    assert found.steps == [41] and states.compiled.rows[-3:] == [1, 1, 1]  # positions 0-15, 16-31, 32-39


def test_the_packages_take_one_row_of_one_sentence_and_decline_the_rest_before_building(tmp_path):
    from mtkit.config import BOS
    from mtkit.decode import exported
    from mtkit.decode.step import StaticStep

    model = random_model(V, seed=2, max_positions=64)
    packages = exported.ExportedStates(tmp_path)
    several = batch(sources(3, V, seed=6, max_len=7))
    with torch.inference_mode():
        with pytest.raises(exported.NotTaken, match="one unpadded source"):
            packages.encode(model, several)
        step = StaticStep(model, several[:1].clone(), 1, 8, run_fn=packages.run)
        step.cache = dataclasses.replace(step.cache, src_mask=torch.ones(1, 1, 1, several.size(1), dtype=torch.bool))
        with pytest.raises(exported.NotTaken, match="one row of an unpadded source"):
            step.run(torch.full((1,), BOS), torch.zeros(1), 4)
    assert list(tmp_path.iterdir()) == [] and dict(packages.packages) == {}


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
    """The real thing, once: both packages exported and compiled by AOTInductor for a tiny model (seconds); greedy
    outputs and scores as eager's for sentences of several lengths, over the whole vocabulary and over a shortlist's
    rows (the same package: its rows are a dynamic dimension); a one-sentence beam through the compiled encoder as
    eager's; and a new ExportedStates (a later process) loads the kept packages instead of building them again."""
    from mtkit.decode import exported
    from mtkit.decode.shortlist import Restriction

    model = random_model(V, seed=3, max_positions=64)
    greedy, beam = DecodeConfig(beam=1, max_len_b=12), DecodeConfig(beam=3, max_len_b=12)
    lines = [batch(sources(1, V, seed=s, max_len=n)) for s, n in ((7, 3), (8, 9), (9, 14))]
    shortlist = Restriction(torch.tensor([0, 1, 2, 3, *range(12, 36)]))
    built, steps_taken = [], []
    monkeypatch.setattr(exported, "build", _counting_build(exported.build, built))

    def compiled_steps(states):
        return compiled.static_steps(states.encode, states.run)

    def decode(config, steps):
        return [beam_search(model, src, config, steps=steps).hypotheses[0] for src in lines]

    with torch.inference_mode():
        first = compiled.Compiled()
        first.compiled = exported.ExportedStates(tmp_path)
        package_run = first.compiled.run
        first.compiled.run = lambda *args: steps_taken.append(1) or package_run(*args)
        found = decode(greedy, compiled_steps(first))
        _same(found, decode(greedy, make_step))
        taken = len(steps_taken)
        _same(decode(greedy, shortlist.steps(compiled_steps(first))), decode(greedy, shortlist.steps(make_step)))
        assert taken > 0 and len(steps_taken) > taken  # the shortlist's steps went through the package too
        _same(decode(beam, compiled_steps(first)), decode(beam, make_step))
        again = compiled.Compiled()
        again.compiled = exported.ExportedStates(tmp_path)
        assert decode(greedy, compiled_steps(again)) == found
    assert first.failed is None and again.failed is None
    assert built == ["encoder", "greedy-run"]  # the encoder runs first
    assert sorted(p.name.split("-")[0] for p in tmp_path.glob("*.pt2")) == ["encoder", "greedy"]
    assert len(first.compiled.packages[model].runners) == 2 and len(again.compiled.packages[model].runners) == 2


def _same(found, expected):
    """The same outputs, and their scores up to fp32 rounding (the compiled kernels sum in another order)."""
    assert [[h.tokens for h in hs] for hs in found] == [[h.tokens for h in hs] for hs in expected]
    for hs, es in zip(found, expected):
        assert [h.score for h in hs] == pytest.approx([h.score for h in es], abs=1e-5)


def _counting_build(build, built):
    def counted(kind, *args):
        built.append(kind)
        build(kind, *args)

    return counted


def test_a_declined_run_keeps_the_room_it_made_for_the_eager_step():
    """`StaticStep.run` makes room in the cache before the package answers; when it declines, the eager step that
    follows finds that room instead of growing the cache again."""
    from mtkit.config import BOS
    from mtkit.decode.step import StaticStep

    model = random_model(V, seed=4, max_positions=64)
    last = torch.tensor([BOS])
    with torch.inference_mode():
        step = StaticStep(model, batch(sources(1, V, seed=8, max_len=5)), 1, 1, run_fn=lambda *args: None)
        step.log_probs(last)  # position 0 fills the one position of room
        assert step.run(last, torch.zeros(1), 10) is None  # the package declines at position 1: room made first
        grown = step.cache.history
        step.log_probs(last)
    assert grown is not None and grown.size(1) >= 2 and step.cache.history is grown and step.cache.length == 2
