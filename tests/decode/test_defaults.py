"""A model's decoding defaults: carried as data in its file and its export, laid over DecodeConfig's in one place
(mtkit/sources/defaults.py, `Translator.defaults`), so that the CLI and the Python API decode every kind of model
alike with no options given: a student, an int8 model, a CTranslate2 export, an OPUS-MT directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import mtkit
from mtkit import average, checkpoint, distill, shortlist
from mtkit.config import DecodeConfig, ExportConfig
from mtkit.decode import loading
from mtkit.errors import MtkitError
from mtkit.sources import defaults as decode_defaults
from mtkit.textio import one_line
from tests.support.cli import run_cli
from tests.support.distill import toy_task
from tests.support.training import in_process_run


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> tuple[Path, Path]:
    """(the model file of a real student, the distilled data it learnt from): a teacher's translations, a tiny run
    trained on them, its checkpoint as a model file, then `mtkit shortlist`."""
    root = tmp_path_factory.mktemp("student")
    data, teacher, _ = toy_task(root)
    distilled = root / "distilled"
    distill.distill(data, loading.plan([teacher], device="cpu", beam=2, max_len_b=8), distilled)
    in_process_run(distilled, root / "run", max_steps=2)
    checkpoint.atomic_save(average.average([root / "run" / "checkpoint_last.pt"]), root / "averaged.pt")
    shortlist.make(root / "averaged.pt", distilled, root / "student.pt", k=8, frequent=10)
    return root / "student.pt", distilled


@pytest.fixture(scope="module")
def lines(student) -> list[str]:
    return (student[1] / "raw" / "valid.en").read_text(encoding="utf-8").splitlines()


def shown(translations: list[str]) -> list[str]:
    """Translations as the command line writes them: one line each (a random student may emit a line break)."""
    return [one_line(text) for text in translations]


def cli_translate(model: Path, lines: list[str], *args: str) -> list[str]:
    done = run_cli("translate", "-m", model, "--device", "cpu", *args, input="".join(f"{line}\n" for line in lines))
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_student_carries_its_defaults_from_training_to_averaging_to_its_shortlist(student):
    model, _ = student
    run = model.parent / "run"
    assert checkpoint.load(run / "checkpoint_last.pt")[decode_defaults.KEY] == {"beam": 1}  # the trainer's
    assert checkpoint.load(model.parent / "averaged.pt")[decode_defaults.KEY] == {"beam": 1}  # carried on
    assert checkpoint.load(model)[decode_defaults.KEY] == {"beam": 1, "shortlist": True}  # `mtkit shortlist`'s


def test_a_student_decodes_alike_from_the_cli_and_the_python_api(student, lines):
    model, _ = student
    translator = mtkit.load_translator(model, device="cpu")
    assert (translator.defaults.beam, translator.defaults.shortlist) == (1, True)
    ours = translator.translate(lines)
    assert cli_translate(model, lines) == shown(ours)
    assert ours != translator.translate(lines, DecodeConfig())  # the defaults are what made it so
    full = translator.translate(lines, DecodeConfig())
    assert cli_translate(model, lines, "--beam", "4", "--no-shortlist") == shown(full)


@pytest.mark.parametrize("precision", ["int8"])
def test_an_int8_model_decodes_alike_from_the_cli_and_the_python_api(student, lines, precision):
    model, _ = student
    translator = mtkit.load_translator(model, device="cpu", precision=precision)
    assert cli_translate(model, lines, "--precision", precision) == shown(translator.translate(lines))


def test_a_ctranslate2_export_decodes_alike_from_the_cli_and_the_python_api(student, lines, tmp_path):
    pytest.importorskip("ctranslate2", reason="the ct2 extra is not installed: pip install 'mtkit[ct2]'")
    from mtkit.export import export

    model, _ = student
    out = export(model, tmp_path / "ct2", ExportConfig(quantization="int8"))
    translator = mtkit.load_translator(out)  # refused before: DecodeConfig()'s GNMT penalty has no CTranslate2 twin
    defaults = translator.defaults
    assert (defaults.beam, defaults.shortlist, defaults.lenpen) == (1, True, "fairseq")  # the model's, the engine's
    assert cli_translate(out, lines) == shown(translator.translate(lines))


def test_an_opus_mt_directory_decodes_alike_from_the_cli_and_the_python_api(opus_dir):
    lines = ["a small test", "the house is green", ""]
    translator = mtkit.load_translator(opus_dir, device="cpu")
    assert translator.defaults == DecodeConfig()  # it carries none: the paper's
    assert cli_translate(opus_dir, lines) == shown(translator.translate(lines))


def test_a_file_from_before_decode_defaults_is_read_by_its_provenance(student, tmp_path):
    ckpt = checkpoint.load(student[0])
    del ckpt[decode_defaults.KEY]
    ckpt["provenance"] = {"data": {"distilled": {"teacher": [{"path": "t.pt", "sha256": "ab"}]}}}
    checkpoint.atomic_save(ckpt, tmp_path / "old.pt")
    assert loading.find(tmp_path / "old.pt").decode_defaults() == {"beam": 1, "shortlist": True}
    ckpt["provenance"] = None
    checkpoint.atomic_save(ckpt, tmp_path / "old.pt")
    assert loading.find(tmp_path / "old.pt").decode_defaults() == {"shortlist": True}


def test_the_layers_in_order_and_the_callers_changes_over_them():
    engine, model = {"lenpen": "fairseq"}, {"beam": 1, "shortlist": True}
    assert decode_defaults.layered({}, {}, {}) == DecodeConfig()
    laid = decode_defaults.layered(engine, model, {"alpha": 1.0})
    assert (laid.lenpen, laid.beam, laid.shortlist, laid.alpha) == ("fairseq", 1, True, 1.0)
    assert decode_defaults.layered(engine, {"lenpen": "none"}, {}).lenpen == "none"  # the model's over the engine's
    assert decode_defaults.layered(engine, model, {"lenpen": "gnmt", "beam": 5}).beam == 5
    assert decode_defaults.layered(engine, model, {"nbest": 3}).beam == 3  # a model's beam wide enough for nbest
    with pytest.raises(MtkitError, match="beem is no decoding setting; DecodeConfig's are beam, alpha"):
        decode_defaults.layered({}, {}, {"beem": 2})


@pytest.mark.parametrize(
    ("stored", "why"),
    [
        ([1], "a list, not a dict"),
        ({"beem": 1}, "'beem' is no decoding setting"),
        ({"beam": "1"}, "beam '1' is not of type int"),
        ({"shortlist": 1}, "shortlist 1 is not of type bool"),
        ({"beam": 0}, "beam must be a positive integer"),
    ],
)
def test_damaged_defaults_in_a_file_are_one_sentence_before_its_weights_are_read(student, tmp_path, stored, why):
    ckpt = checkpoint.load(student[0])
    ckpt[decode_defaults.KEY] = stored
    checkpoint.atomic_save(ckpt, tmp_path / "bad.pt")
    with pytest.raises(MtkitError, match="holds damaged decoding defaults") as error:
        mtkit.load_translator(tmp_path / "bad.pt", device="cpu")
    assert why in str(error.value)
    done = run_cli("translate", "-m", tmp_path / "bad.pt", input="a\n")
    assert done.returncode == 1 and "damaged decoding defaults" in done.stderr and "Traceback" not in done.stderr
