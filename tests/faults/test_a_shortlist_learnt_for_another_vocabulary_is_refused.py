"""A shortlist used with a model of another vocabulary: a shortlist grafted into another model's file, or a vmap.txt
copied from another CTranslate2 export. Its ids (or pieces) name another vocabulary's pieces, so every line changed
(40 of 40), without a word; now each is one sentence and exit 1 (mtkit/decode/shortlist.py, mtkit/decode/ct2.py).
"""

from __future__ import annotations

import json
import shutil

import pytest

from mtkit import checkpoint, shortlist
from tests.support.cli import error_line, run_cli
from tests.support.distill import toy_task


@pytest.fixture(scope="module")
def shortlisted(tmp_path_factory):
    """(data, a model file that carries its shortlist, the same model with another shortlist of its own)."""
    root = tmp_path_factory.mktemp("foreign-shortlist")
    data, model, _ = toy_task(root)
    shortlist.make(model, data, root / "with.pt", k=8, frequent=10)
    shortlist.make(model, data, root / "other.pt", k=2, frequent=3)
    return data, root / "with.pt", root / "other.pt"


def test_a_shortlist_grafted_into_a_model_of_another_vocabulary_is_refused(shortlisted, cli_model, tmp_path):
    """fault: another model's shortlist record copied into a model file; expected: one sentence naming both
    vocabularies, exit 1 (and the file the shortlist was made for still translates)."""
    data, made, _ = shortlisted
    line = (data / "raw" / "valid.en").read_text().splitlines()[0] + "\n"
    assert run_cli("translate", "-m", made, "--device", "cpu", input=line).returncode == 0
    grafted = checkpoint.load(cli_model)
    grafted["shortlist"] = checkpoint.load(made)["shortlist"]
    checkpoint.atomic_save(grafted, tmp_path / "grafted.pt")
    said = error_line(run_cli("translate", "-m", tmp_path / "grafted.pt", "--device", "cpu", input=line))
    assert "carries a shortlist learnt for another vocabulary" in said and "mtkit shortlist" in said, said
    del grafted["shortlist"]["learned_from"]  # a record that does not say its vocabulary is no better
    checkpoint.atomic_save(grafted, tmp_path / "unnamed.pt")
    said = error_line(run_cli("translate", "-m", tmp_path / "unnamed.pt", "--device", "cpu", input=line))
    assert "learnt for another vocabulary (one it does not name" in said, said


def test_a_vocabulary_map_copied_from_another_export_is_refused(shortlisted, tmp_path):
    """fault: a vmap.txt copied in from another CTranslate2 export, or an export record of another vocabulary;
    expected: one sentence that says what to do, exit 1; --no-shortlist still translates."""
    pytest.importorskip("ctranslate2")
    data, made, other = shortlisted
    lines = "\n".join((data / "raw" / "valid.en").read_text().splitlines()[:3]) + "\n"
    out, elsewhere = tmp_path / "ct2", tmp_path / "other"
    for model, where in ((made, out), (other, elsewhere)):
        done = run_cli("export", model, "--format", "ctranslate2", "-o", where)
        assert done.returncode == 0, done.stderr
    own = (out / "vmap.txt").read_bytes()
    assert run_cli("translate", "-m", out, "--shortlist", input=lines).returncode == 0
    shutil.copy(elsewhere / "vmap.txt", out / "vmap.txt")
    said = error_line(run_cli("translate", "-m", out, "--shortlist", input=lines))
    assert "vmap.txt is not the one mtkit export wrote there" in said and "--no-shortlist" in said, said
    assert run_cli("translate", "-m", out, "--no-shortlist", input=lines).returncode == 0
    (out / "vmap.txt").write_bytes(own)
    record = json.loads((out / "mtkit-export.json").read_text())
    record["vmap"]["spm_sha256"] = "0" * 64
    (out / "mtkit-export.json").write_text(json.dumps(record))
    said = error_line(run_cli("translate", "-m", out, "--shortlist", input=lines))
    assert "was made for another vocabulary" in said, said
    del record["vmap"]
    (out / "mtkit-export.json").write_text(json.dumps(record))
    said = error_line(run_cli("translate", "-m", out, "--shortlist", input=lines))
    assert "does not say which vocabulary it was made for" in said, said
