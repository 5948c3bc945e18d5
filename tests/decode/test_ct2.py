"""`mtkit translate -m CT2DIR`: CTranslate2 searches behind mtkit's text pipeline, with mtkit's outputs.

A tiny model trained on the toy task (tests/support/models.py: train_toy) is exported, then translated by the
command line through both engines: greedy outputs and scores equal (per-sentence length limits
included), beam outputs equal with `--lenpen fairseq` (CTranslate2's formula), input order kept
across chunks and threads, and each setting CTranslate2 cannot run refused in one sentence.
Skipped, with the reason, where the `ct2` extra is not installed; CI installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.config import DecodeConfig, ExportConfig
from mtkit.decode import ct2
from mtkit.decode.loading import load_translator
from mtkit.errors import MtkitError
from mtkit.export import RECORD, export
from mtkit.sources import CT2Export
from tests.support.cli import ROOT, run_cli

pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'mtkit[ct2]'")


@pytest.fixture(scope="module")
def ct2_dir(trained_model, tmp_path_factory) -> Path:
    return export(trained_model, tmp_path_factory.mktemp("ct2-engine") / "model")


@pytest.fixture(scope="module")
def text(toy_sentences) -> str:
    lines = toy_sentences[:30]
    return "\n".join(lines[:10] + [""] + lines[10:]) + "\n"  # an empty line keeps its place


def translate(model: Path, text: str, *args: str) -> list[str]:
    done = run_cli("translate", "-m", model, *args, input=text)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def split_scores(lines: list[str]) -> tuple[list[str], list[float]]:
    pairs = [line.rsplit("\t", 1) for line in lines]
    return [p[0] for p in pairs], [float(p[1]) for p in pairs]


def test_greedy_equals_mtkit_engine(trained_model, ct2_dir, text):
    args = ("--beam", "1", "--scores", "--lenpen", "gnmt")  # GNMT's penalty too: greedy search ranks nothing
    ours, our_scores = split_scores(translate(trained_model, text, *args))
    theirs, their_scores = split_scores(translate(ct2_dir, text, *args))
    assert theirs == ours
    assert their_scores == pytest.approx(our_scores, abs=2e-4)
    assert sum(bool(t) for t in ours) > len(ours) // 2  # the model really translates


# `mtkit translate` in a fresh Python that says, as it exits, whether torch was ever imported (on stderr's last line).
NO_TORCH = """
import atexit, runpy, sys
atexit.register(lambda: print("torch imported:", "torch" in sys.modules, file=sys.stderr))
sys.argv = ["mtkit", *sys.argv[1:]]
runpy.run_module("mtkit", run_name="__main__")
"""


def test_translate_on_ct2_never_imports_torch(trained_model, ct2_dir, text):
    """CTranslate2 searches; torch (~200 MiB of memory) has no work, so the pipeline must not import it."""
    args = ("--beam", "1", "--scores", "--lenpen", "gnmt")
    done = subprocess.run(
        [sys.executable, "-c", NO_TORCH, "translate", "-m", str(ct2_dir), *args],
        input=text,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "torch imported: False", done.stderr
    ours, our_scores = split_scores(translate(trained_model, text, *args))
    theirs, their_scores = split_scores(done.stdout.splitlines())
    assert theirs == ours
    assert their_scores == pytest.approx(our_scores, abs=2e-4)


@pytest.mark.parametrize("limits", [(0.0, 1), (0.5, 1), (1.0, 2)])
def test_greedy_equals_at_each_sentences_own_length_limit(trained_model, ct2_dir, toy_sentences, limits):
    """Outputs cut by a short limit that differs within a batch: ended with EOS at the limit and rescored,
    as mtkit's search ends them."""
    config = DecodeConfig(beam=1, max_len_a=limits[0], max_len_b=limits[1])
    ours = load_translator(trained_model).translate_stream(toy_sentences, config)
    theirs = load_translator(ct2_dir).translate_stream(toy_sentences, config)
    for a, b in zip(ours, theirs, strict=True):
        assert (b.text, b.score) == (a.text, pytest.approx(a.score, abs=2e-4))


def test_beam_with_fairseq_penalty_equals_mtkit_engine(trained_model, ct2_dir, text):
    args = ("--beam", "4", "--lenpen", "fairseq", "--alpha", "0.6", "--nbest", "2")
    ours = [line.split("\t") for line in translate(trained_model, text, *args)]
    theirs = [line.split("\t") for line in translate(ct2_dir, text, *args)]
    assert [t[:2] for t in theirs] == [o[:2] for o in ours]
    assert [float(t[2]) for t in theirs] == pytest.approx([float(o[2]) for o in ours], abs=2e-4)


def test_ct2_default_penalty_is_fairseq(ct2_dir, text):
    """mtkit's default GNMT penalty has no CTranslate2 counterpart: a CTranslate2 model defaults to |Y|^alpha."""
    assert translate(ct2_dir, text) == translate(ct2_dir, text, "--lenpen", "fairseq")


def test_order_kept_across_chunks_batches_and_threads(ct2_dir, text):
    """The same lines in the same order; scores equal to the printed digits' last place (another batch
    makes CTranslate2 sum in another order, which can round a fourth decimal the other way)."""
    whole, whole_scores = split_scores(translate(ct2_dir, text, "--nbest", "2"))
    for args in (("--buffer-size", "3", "--batch-tokens", "8"), ("--batch-tokens", "8", "--workers", "2")):
        lines, scores = split_scores(translate(ct2_dir, text, "--nbest", "2", *args))
        assert lines == whole, args
        assert scores == pytest.approx(whole_scores, abs=2e-4), args
    assert [int(line.split("\t")[0]) for line in whole[::2]] == list(range(1, len(text.splitlines()) + 1))


def test_score_only_equals_mtkit_engine(trained_model, ct2_dir, toy_sentences):
    pairs = "".join(f"{s}\t{t}\n" for s, t in zip(toy_sentences[:8], toy_sentences[8:16]))
    ours = [list(map(float, line.split("\t"))) for line in translate(trained_model, pairs, "--score-only")]
    theirs = [list(map(float, line.split("\t"))) for line in translate(ct2_dir, pairs, "--score-only")]
    assert theirs == [pytest.approx(o, abs=2e-4) for o in ours]


def test_sampling_runs_and_is_seeded(ct2_dir, text):
    args = ("--sampling", "--topk", "0", "--nbest", "2", "--seed", "5")
    first = translate(ct2_dir, text, *args)
    assert len(first) == 2 * len(text.splitlines()) - 1  # an empty line has one, empty, output
    assert first == translate(ct2_dir, text, *args)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--early-stop", "exact"], "no exact stop rule"),
        (["--lenpen", "gnmt"], "--lenpen fairseq"),
        (["--precision", "bf16"], "cannot compute in bfloat16"),
        (["--device", "mps"], "not one CTranslate2 runs on"),
    ],
)
def test_settings_ctranslate2_lacks_are_one_sentence(ct2_dir, args, says):
    done = run_cli("translate", "-m", ct2_dir, *args, input="small house\n")
    assert done.returncode != 0 and done.stdout == ""
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_ensemble_and_missing_spm_are_one_sentence(ct2_dir, trained_model, tmp_path):
    done = run_cli("translate", "-m", ct2_dir, "-m", trained_model, input="small house\n")
    assert done.returncode != 0 and "not an ensemble" in done.stderr and "Traceback" not in done.stderr
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("model.bin", "config.json", "shared_vocabulary.json"):
        (bare / name).write_bytes((ct2_dir / name).read_bytes())
    done = run_cli("translate", "-m", bare, input="small house\n")
    assert done.returncode != 0 and "no spm.model" in done.stderr and "Traceback" not in done.stderr


def test_export_carries_what_the_engine_reads(ct2_dir, trained_model):
    record = json.loads((ct2_dir / RECORD).read_text(encoding="utf-8"))
    assert "spm.model" in record["files"] and record["model_config"]["max_positions"] > 1
    claims = CT2Export.claims
    assert claims(Path(ct2_dir)) and not claims(Path(trained_model)) and not claims(Path(ct2_dir).parent)


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
    with pytest.raises(MtkitError, match=r"pip install 'mtkit\[ct2\]'"):
        ct2.import_ctranslate2()


def test_a_quantized_export_run_in_another_type_says_how_to_run_it_as_exported(trained_model, tmp_path, caplog):
    """CTranslate2 converts an int8 export's weights to float32 under translate's default --precision fp32: the
    model line says so, and `auto` (CTranslate2's "default": the export's own type) runs it as exported."""
    int8_dir = export(trained_model, tmp_path / "int8", ExportConfig(quantization="int8"))
    said = {}
    for precision in ("fp32", "auto", "int8"):
        caplog.clear()
        with caplog.at_level("WARNING", logger="mtkit.decode.ct2"):
            ct2.open_export(CT2Export(int8_dir), "cpu", precision, 1, 1).close()
        said[precision] = [r.getMessage() for r in caplog.records if "was exported in" in r.getMessage()]
    assert said["auto"] == said["int8"] == [] and len(said["fp32"]) == 1
    assert said["fp32"][0].endswith(
        "was exported in int8 and runs in float32 here; --precision auto runs it as exported"
    )
    done = run_cli("translate", "-m", int8_dir, input="small house\n")
    assert done.returncode == 0 and "was exported in int8 and runs in float32" in done.stderr
