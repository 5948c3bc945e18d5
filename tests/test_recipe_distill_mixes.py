"""The distillation recipe's mix sweep (recipes/multi30k-distill/mixes.py): its dry run's commands parse with mtkit's
own parsers, the teacher decodes once, every student is run.sh's for the same number of updates, only the
validation set is translated and scored; its record after every run and its table; and, end to end on a toy task,
the smaller mixes it cuts from the one distillation are what `mtkit distill --nbest 1` makes."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.distill import toy_task
from tests.support.recipes import ROOT, dry_run, load_script, parse_line, parse_mtkit

SCRIPT = ROOT / "recipes" / "multi30k-distill" / "mixes.py"
# what differs between run.sh's student and the sweep's: where it reads and writes, and its seed
OWN = ("data", "out", "seed")
MIXES = ("1best", "1best+refs", "2best+refs")


def sweep(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=3600)


def test_the_dry_run_distils_once_trains_run_shs_student_per_mix_and_seed_and_looks_at_dev_only(tmp_path) -> None:
    done = sweep("--teacher", "t.pt", "--data", "d", "--steps", "300", "--seeds", "1", "2", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [parse_mtkit(shlex.split(line)) for line in lines if line.startswith("mtkit ")]
    cuts = [line for line in lines if line.startswith("#")]
    assert len(steps) + len(cuts) == len(lines) and len(cuts) == 2  # 1best, 1best+refs: cut, not decoded again
    distils = [params for name, params in steps if name == "distill"]
    recipe = {
        name: params
        for name, params in (
            parse_mtkit(parse_line(line)[0])
            for line in dry_run(
                "multi30k-distill",
                "--steps",
                "300",
                "--teacher",
                "t.pt",
                "--data",
                "d",
                "--mix",
                "2best+refs",
                cwd=tmp_path,
            )
        )
        if name in ("distill", "train")
    }
    assert len(distils) == 1 and distils[0]["nbest"] == 2 and distils[0]["mix_references"] is True
    assert {k: v for k, v in distils[0].items() if k != "out"} == {
        k: v for k, v in recipe["distill"].items() if k != "out"
    }
    trains = [params for name, params in steps if name == "train"]
    assert [(Path(p["data"]).name, p["seed"]) for p in trains] == [
        (f"data-{mix}", seed) for seed in (1, 2) for mix in ("1best", "1best+refs", "2best+refs")
    ]
    for params in trains:  # run.sh's student, its budget included
        assert {k: v for k, v in params.items() if k not in OWN} == {
            k: v for k, v in recipe["train"].items() if k not in OWN
        }
    averages = [params for name, params in steps if name == "average"]
    assert len(averages) == len(trains) and {p["last"] for p in averages} == {recipe["train"]["keep_last"]}
    translated = [params for name, params in steps if name == "translate"]
    assert len(translated) == len(trains) and all(str(p["input"]).endswith("valid.en") for p in translated)
    assert {p["beam"] for p in translated} == {1}
    scored = [str(ref) for name, params in steps if name == "score" for ref in params["ref"]]
    assert len(scored) == len(trains) and all(path.endswith("valid.de") for path in scored)
    assert "test" not in done.stdout


def test_a_token_budget_and_a_bad_one() -> None:
    done = sweep("--teacher", "t.pt", "--data", "d", "--tokens", "20480", "--mixes", "2best+refs", "--seeds", "1",
                 "--dry-run")  # fmt: skip
    assert done.returncode == 0, done.stderr
    trains = [parse_mtkit(shlex.split(line))[1] for line in done.stdout.splitlines() if line.startswith("mtkit train")]
    assert [p["max_steps"] for p in trains] == [10] and "# " not in done.stdout  # nothing to cut
    refused = sweep("--teacher", "t.pt", "--data", "d", "--steps", "0", "--dry-run")
    assert refused.returncode == 2 and "--steps" in refused.stderr.splitlines()[-1]


def test_the_record_is_kept_after_every_run_and_renders_its_table(tmp_path, monkeypatch) -> None:
    """The record (written after each run: a stopped sweep keeps what it measured) holds every run's dev score,
    each mix's mean and spread, the chosen mix, and passes the checks every record on the pages must."""
    mixes = load_script("recipes/multi30k-distill/mixes.py")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "valid.de").write_text("ein Hund .\nzwei Katzen laufen\n", encoding="utf-8")
    path = tmp_path / "r.json"
    argv = [str(SCRIPT), "--teacher", "/elsewhere/t.pt", "--data", "/elsewhere/d", "--steps", "3300", "--seeds", "1",
            "2", "--record", str(path)]  # fmt: skip
    args = mixes.parse_args(argv[1:])
    record = mixes.Record(argv)
    runs = [{"mix": "1best", "seed": 1, "steps": 3300, "pairs": 29000, "dev_bleu": 30.0}]
    assert mixes.write(record, args, runs, tmp_path)["best"] == "1best" and path.is_file()
    runs += [{"mix": "2best+refs", "seed": 1, "steps": 3300, "pairs": 87000, "dev_bleu": 31.0},
             {"mix": "1best", "seed": 2, "steps": 3300, "pairs": 29000, "dev_bleu": 31.5}]  # fmt: skip
    results = mixes.write(record, args, runs, tmp_path)
    assert results["best"] == "2best+refs" and results["runs"] == "3 of 6"
    assert results["by_mix"]["1best"] == {"mean": 30.75, "spread": 1.5, "seeds": 2}
    data = json.loads(path.read_text())
    assert data["renderer"] == "recipes/multi30k-distill/mixes.py::table" and data["passes"] == runs
    assert (data["sentences"], data["words"]) == (2, 6) and data["results"] == results
    assert data["settings"]["teacher"] == ["t.pt"] and data["settings"]["data"] == "d"  # no path of the machine's
    assert "elsewhere" not in path.read_text()
    table = mixes.table(data["rows"], data["sentences"], data["words"]).splitlines()
    assert table[2] == "| **2best+refs** | 87,000 | 31.00 | 31.00 | 0.00 |"
    assert table[3] == "| 1best | 29,000 | 30.00, 31.50 | 30.75 | 1.50 |" and len(table) == 4
    figures = load_script("tests/test_docs_figures.py")  # what every record under docs/results/ is held to
    figures.test_every_record_has_its_command_commit_date_machine_and_passes(path)
    figures.test_every_records_command_parses_at_the_current_command_line(path, tmp_path, monkeypatch)


def test_the_two_best_are_cut_only_where_every_source_has_two(tmp_path) -> None:
    """The first of each two pairs is a source's best only when no empty translation was left out; otherwise the
    sweep distils the 1-best again (`--nbest 1`)."""
    mixes = load_script("recipes/multi30k-distill/mixes.py")
    for distilled, empty, cuttable in ((46, 0, True), (45, 1, False)):
        record = {"pairs": {"distilled": distilled, "empty_left_out": empty}, "settings": {"source": {"lines": 23}}}
        (tmp_path / "distill.json").write_text(json.dumps(record))
        assert mixes.cuttable(tmp_path) is cuttable


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path, Path]:
    return toy_task(tmp_path_factory.mktemp("mixes"))


@pytest.mark.slow
def test_end_to_end_the_cut_mixes_are_what_distill_makes_with_nbest_1(toy, cli, tmp_path) -> None:
    """A real sweep on a toy teacher: one distillation, a student, its dev score in the record; the 1best+refs data
    it cut from the 2best+refs distillation (and the 1best, its first part) are byte for byte, text and encoded
    arrays, what `mtkit distill --nbest 1 --mix-references` makes with the same teacher and search."""
    data, teacher, _ = toy
    out, path = tmp_path / "out", tmp_path / "mixes.json"
    done = sweep("--teacher", str(teacher), "--data", str(data), "--steps", "5", "--seeds", "1", "--out", str(out),
                 "--mixes", "1best", "1best+refs", "--record", str(path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(path.read_text())
    assert [(r["mix"], r["pairs"]) for r in record["passes"]] == [("1best", 23), ("1best+refs", 46)]
    assert all(math.isfinite(r["dev_bleu"]) for r in record["passes"]) and record["results"]["best"] in MIXES
    made = tmp_path / "distilled"
    ran = cli("distill", str(data), "-m", str(teacher), "--out", str(made), "--beam", "4", "--alpha", "1.4",
              "--early-stop", "exact", "--nbest", "1", "--mix-references")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    cut = out / "data-1best+refs"
    files = [p.relative_to(made) for folder in ("raw", "bin") for p in sorted((made / folder).iterdir())]
    assert files and all((cut / f).read_bytes() == (made / f).read_bytes() for f in files)
    assert sorted(p.relative_to(cut) for p in (cut / "raw").iterdir()) == [f for f in files if f.parts[0] == "raw"]
    settings = json.loads((cut / "prepare.json").read_text())["distilled"]["settings"]
    assert settings == json.loads((made / "prepare.json").read_text())["distilled"]["settings"]
    for side in ("en", "de"):  # 1best: the teacher's part of the same pairs, without the references
        best = (out / "data-1best" / "raw" / f"train.{side}").read_text().splitlines()
        assert best == (made / "raw" / f"train.{side}").read_text().splitlines()[:23]
