"""The distillation recipe's dry run: every command parses with mtkit's own parsers, the student trains on the
distilled data with a student preset, and nothing is created; its results table, from given figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.support.recipes import ROOT, dry_run, load_script, parse_line, parse_mtkit, run_recipe
from tests.support.shortlist import one_piece_shortlist

ORDER = ["distill", "train", "average", "shortlist", "shortlist", "export", "export"]


@pytest.mark.parametrize(
    "args, preset, minutes, teachers",
    [
        ([], "student-fast", 25, 1),
        (["--preset", "student-tiny", "--minutes", "10"], "student-tiny", 10, 1),
        (["--teacher", "a.pt", "--teacher", "b.pt", "--data", "d"], "student-fast", 25, 2),
    ],
)
def test_dry_run_commands_parse_and_keep_the_recipes_promises(args, preset, minutes, teachers, tmp_path: Path) -> None:
    folder = ROOT / "recipes" / "multi30k-distill"
    parsed = []
    for line in dry_run("multi30k-distill", *args, cwd=tmp_path):
        argv, torchrun, target = parse_line(line)
        assert torchrun is None and target is None
        parsed.append(parse_mtkit(argv))
    assert [name for name, _ in parsed] == ORDER
    distill, train, average, student_list, teacher_list, export_teacher, export_student = (p for _, p in parsed)
    out = folder / "out"
    assert len(distill["model"]) == teachers and distill["out"] == out / "data" and distill["beam"] == 4
    data = Path("d") if "--data" in args else folder / ".." / "multi30k-en-de" / "out" / "data"
    assert distill["data"] == data and teacher_list["data"] == data
    assert (train["data"], train["preset"], train["max_minutes"]) == (out / "data", preset, minutes)
    assert train["save_every_minutes"] == pytest.approx(minutes / 25) and train["keep_last"] == average["last"] == 5
    assert student_list["model"] == out / "averaged.pt" and student_list["data"] == out / "data"
    assert student_list["output"] == out / "student.pt" and export_student["model"] == str(out / "student.pt")
    assert export_teacher["model"] == str(teacher_list["output"])
    assert {export_teacher["quantization"], export_student["quantization"]} == {"int8"}


def test_steps_trains_a_number_of_updates_and_the_teacher_distils_with_its_tuned_search(tmp_path: Path) -> None:
    """--steps N: the student's budget in updates (checkpoints every N/25), whatever else the machine runs; the
    distillation decodes with the search the Multi30k recipe picked on dev (alpha 1.4, exact stop), keeps the
    best translation of each source (the mix chosen on dev)."""
    parsed = [parse_mtkit(parse_line(line)[0]) for line in dry_run("multi30k-distill", "--steps", "1296", cwd=tmp_path)]
    distill, train = parsed[0][1], parsed[1][1]
    assert (train["max_steps"], train["max_minutes"], train["save_every_steps"], train["save_every_minutes"]) == (
        1296,
        0,
        52,
        0,
    )
    assert (distill["alpha"], distill["early_stop"]) == (1.4, "exact")  # with the default GNMT penalty
    assert distill["nbest"] == 1 and distill["mix_references"] is False  # the best translation alone
    done = run_recipe("multi30k-distill", "--steps", "0", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "--steps must be a positive whole number" in done.stderr


@pytest.mark.parametrize(
    "mix, nbest, references", [("1best", 1, False), ("1best+refs", 1, True), ("2best+refs", 2, True), (None, 1, False)]
)
def test_the_mix_is_what_the_teacher_distils(mix, nbest, references, tmp_path: Path) -> None:
    """--mix: the teacher's best translation of each source, with the references or not, or its two best and the
    references (the default); only the distillation changes."""
    args = ["--mix", mix] if mix else []
    parsed = [parse_mtkit(parse_line(line)[0]) for line in dry_run("multi30k-distill", *args, cwd=tmp_path)]
    distill = parsed[0][1]
    assert (distill["nbest"], distill["mix_references"]) == (nbest, references)
    default = [parse_mtkit(parse_line(line)[0]) for line in dry_run("multi30k-distill", cwd=tmp_path)]
    assert parsed[1:] == default[1:]
    done = run_recipe("multi30k-distill", "--mix", "3best", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "--mix must be 1best, 1best+refs or 2best+refs" in done.stderr


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    done = run_recipe("multi30k-distill", "--preset", "small", cwd=tmp_path)
    assert done.returncode == 2 and "--preset must be student-fast or student-tiny" in done.stderr
    helped = run_recipe("multi30k-distill", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--teacher MODEL" in helped.stdout


def test_the_results_table_puts_every_system_against_the_teacher() -> None:
    results = load_script("recipes/multi30k-distill/results.py")
    rows = [
        {"name": "teacher", "bleu": 37.9, "identical": 0.5, "peak_kib": 512_000, "bytes": 30_870_976,
         "seconds": {"1 thread": 10.0, "2 threads": 6.0, "2 workers x 1 thread": 5.0}},
        {"name": "student", "bleu": 37.5, "identical": 1.0, "peak_kib": 256_000, "bytes": 9_000_000,
         "seconds": {"1 thread": 2.0, "2 threads": 1.0, "2 workers x 1 thread": 0.8}},
    ]  # fmt: skip
    table = results.table(rows, sentences=1000, words=12_000).splitlines()
    assert table[0].startswith("| system | BLEU |") and len(table) == 4
    assert table[0].count("x teacher") == 3
    assert table[3] == (
        "| student | 37.50 | 100.0% | 500.0 | 6,000 | 5.00 | 1,000.0 | 12,000 | 6.00 "
        "| 1,250.0 | 15,000 | 6.25 | 250 | 9.0 |"
    )
    names = [s.name for s in results.systems(Path("out"), ["t.pt"])]
    assert results.REFERENCE in names and len(names) == len(set(names)) == 9


def test_a_child_measures_one_system_with_todays_loader(cli_model: Path, cli, tmp_path: Path) -> None:
    """results.py's child opens the model as `mtkit translate` does and translates with the system's settings: its
    output is the CLI's with the same ones (beam 1 and beam 4, which differ on these lines, and a shortlist, so a
    child that drops a setting fails), and it reports its time and peak memory, its workers' peaks added to its
    own (the dry run never runs it: the measuring step once called the loader with an old signature)."""
    import json
    import subprocess
    import sys

    src = tmp_path / "test.en"
    src.write_text("a b c\nd e\nf g h i\na man rides a bike .\ntwo dogs play .\n", encoding="utf-8")
    script = ROOT / "recipes" / "multi30k-distill" / "results.py"
    model, _ = one_piece_shortlist(cli_model, tmp_path / "one.pt")  # used by default: said off, it must be off

    results = load_script("recipes/multi30k-distill/results.py")

    def child(**changes):
        system = results.System("m", (str(model),), "int8", changes.pop("beam"), changes.pop("shortlist"), str(model))
        spec = {**system._asdict(), "search": results.search(system), "workers": 2, "threads": 1, "src": str(src),
                "output": str(tmp_path / "out.de")} | changes  # fmt: skip
        done = subprocess.run(
            [sys.executable, str(script), "--child", json.dumps(spec)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1]), (tmp_path / "out.de").read_text(encoding="utf-8")

    outputs, figures = {}, {}
    for beam, workers, shortlist in ((1, 2, False), (4, 1, False), (1, 1, True)):
        figures[workers], outputs[beam, shortlist] = child(beam=beam, workers=workers, shortlist=shortlist)
        assert figures[workers]["seconds"] > 0 and figures[workers]["peak_kib"] > 0 and figures[workers]["passes"]
        wanted = tmp_path / f"cli-{beam}-{shortlist}.de"
        args = ["-m", str(model), "--precision", "int8", "--beam", str(beam), "--workers", str(workers)]
        args += ["--shortlist" if shortlist else "--no-shortlist", "--threads", "1", "--input", str(src)]
        args += ["--lenpen", "fairseq", "--alpha", "0.6", "--early-stop", "patience"]
        args += ["--output", str(wanted)]
        done = cli("translate", *args)
        assert done.returncode == 0, done.stderr
        assert outputs[beam, shortlist] == wanted.read_text(encoding="utf-8"), (beam, shortlist)
    # the settings matter on these lines: the comparisons above can fail
    assert outputs[1, False] != outputs[4, False] and outputs[1, False] != outputs[1, True]
    assert figures[2]["peak_kib"] > 1.5 * figures[1]["peak_kib"]  # two workers: their peaks added to the parent's


def test_every_system_searches_with_one_length_penalty(cli_model: Path, cli, tmp_path: Path) -> None:
    """Every row of the table is the same search (fairseq's score / |Y|^0.6, the patience stop; the beam and the
    shortlist are the system's), in mtkit and through its CTranslate2 engine alike, as the translator each child
    opens reports it: a child that left a system on its engine's default (mtkit's GNMT penalty) fails here."""
    import json
    import subprocess
    import sys

    pytest.importorskip("ctranslate2")
    results = load_script("recipes/multi30k-distill/results.py")
    systems = results.systems(Path("out"), ["t.pt"])
    assert {(s.beam, s.shortlist) for s in systems} == {(4, False), (4, True), (1, False), (1, True)}
    for system in systems:
        assert results.search(system) == {"beam": system.beam, "shortlist": system.shortlist, "lenpen": "fairseq",
                                          "alpha": 0.6, "early_stop": "patience"}, system.name  # fmt: skip
    src = tmp_path / "test.en"
    src.write_text("a b c\nd e\n", encoding="utf-8")
    export = tmp_path / "ct2"
    done = cli("export", str(cli_model), "--format", "ctranslate2", "--quantization", "int8", "-o", str(export))
    assert done.returncode == 0, done.stderr
    for name, model, precision in (("teacher", cli_model, "fp32"), ("teacher, CTranslate2", export, "int8")):
        system = results.System(name, (str(model),), precision, 4, False, str(model))
        spec = {**system._asdict(), "search": results.search(system), "workers": 1, "threads": 1, "src": str(src),
                "output": str(tmp_path / "out.de")}  # fmt: skip
        script = ROOT / "recipes" / "multi30k-distill" / "results.py"
        ran = subprocess.run([sys.executable, str(script), "--child", json.dumps(spec)], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        searched = json.loads(ran.stdout.splitlines()[-1])["search"]
        assert searched == {"beam": 4, "lenpen": "fairseq", "alpha": 0.6, "early_stop": "patience",
                            "shortlist": False}, name  # fmt: skip


def test_the_record_names_the_recipes_command_and_keeps_every_pass(tmp_path: Path, monkeypatch) -> None:
    """run.sh --record: results.py keeps the run as a bench record whose command is run.sh's (so the docs test can
    dry-run it), with each system's passes and the rows docs/gen_figures.py renders with `table`."""
    results = load_script("recipes/multi30k-distill/results.py")
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    (data / "raw" / "test.en").write_text("ein Hund .\nzwei Katzen .\n", encoding="utf-8")
    (data / "raw" / "test.de").write_text("a dog .\ntwo cats .\n", encoding="utf-8")
    sized = tmp_path / "model.bin"
    sized.write_bytes(b"x" * 1000)
    monkeypatch.setattr(results, "systems", lambda out, teachers: [
        results.System("teacher", ("t.pt",), "fp32", 4, False, str(sized)),
        results.System(results.REFERENCE, ("s.pt",), "int8", 1, True, str(sized)),
    ])  # fmt: skip

    def measure(system, setting, src, output):  # the teacher twice as slow as the student, its output one line off
        output.write_text("a dog .\ntwo dogs .\n" if system.name == "teacher" else "a dog .\ntwo cats .\n")
        seconds = 2.0 if system.name == "teacher" else 1.0
        return {"seconds": seconds, "passes": [seconds] * 3, "peak_kib": 2048, "search": {"beam": system.beam}}

    monkeypatch.setattr(results, "measure", measure)
    monkeypatch.setattr(results, "trained", lambda path: {"file": Path(path).name, "updates": 7})
    record = tmp_path / "record.json"
    args = results.parse_args([str(tmp_path), str(data), "/somewhere/teacher.pt", "--record", str(record),
                               "--recipe-args", "--teacher", "/somewhere/teacher.pt", "--data", str(data)])  # fmt: skip
    results.main(args.out, args.data, args.teachers, args.record, args.recipe_args)
    kept = json.loads(record.read_text(encoding="utf-8"))
    assert kept["command"] == "bash recipes/multi30k-distill/run.sh --teacher teacher.pt --data data"
    assert kept["format"] == "mtkit-bench-record" and kept["renderer"] == "recipes/multi30k-distill/results.py"
    assert kept["settings"]["search"] == results.SEARCH and kept["settings"]["teachers"] == ["teacher.pt"]
    assert kept["passes"]["teacher"]["1 thread"] == [2.0, 2.0, 2.0] and kept["sentences"] == 2
    assert kept["settings"]["trained"] == {"teachers": [{"file": "teacher.pt", "updates": 7}],
                                           "student": {"file": "student.pt", "updates": 7}}  # fmt: skip
    assert [row["identical"] for row in kept["rows"]] == [0.5, 1.0]
    assert results.table(kept["rows"], kept["sentences"], kept["words"]).splitlines()[3].split(" | ")[5] == "2.00"


def test_how_a_model_was_trained_is_read_from_its_file(cli_model: Path, tmp_path: Path) -> None:
    """The record's `trained`: the updates, minutes and precision the model file itself records, not a log's."""
    results = load_script("recipes/multi30k-distill/results.py")
    ckpt = torch.load(cli_model, map_location="cpu", weights_only=True)
    ckpt["step"], ckpt["progress"] = 1730, {**(ckpt.get("progress") or {}), "elapsed": 1500.0}
    ckpt["provenance"] = {**(ckpt.get("provenance") or {}), "precision": "bf16"}
    ckpt["averaged_from"] = [{"file": f"checkpoint_{k}.pt", "step": k, "sha256": "0" * 64} for k in (1700, 1730)]
    torch.save(ckpt, model := tmp_path / "student.pt")
    assert results.trained(model) == {"file": "student.pt", "updates": 1730, "training_minutes": 25.0,
                                      "precision": "bf16", "averaged_from": [1700, 1730]}  # fmt: skip
