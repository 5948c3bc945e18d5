"""Measure the distillation recipe's systems and write its results.md table (called by run.sh).

usage: python results.py OUT DATA TEACHER... [--record FILE --recipe-args ARG...]

Each system translates DATA/raw/test.en (test_2016_flickr) with the same search (`SEARCH`: fairseq's length
normalisation score / |Y|^0.6 and the patience stop, in mtkit and in CTranslate2 alike; its beam and shortlist are
the system's) in a child process of its own, one after the other, at 1 thread, at 2 threads, and as 2 workers of 1
thread each (`--workers 2 --threads 1`: mtkit's forked worker processes, CTranslate2's inter_threads; on 2 cores the
faster use of them for a small model, whose steps are too short for two threads to share): one untimed pass over the
first 8 lines, then 3 timed passes over all of them, of which the median counts (a fast student's pass is about a
second, where one stall of the machine would move a single pass's figure by a fifth). The child reports its seconds
and its peak resident memory (VmHWM, read from /proc: its own, plus its worker processes' own, so the weights the
workers share with it are counted once for each; the table's peak memory is that of one process, the larger of the
1- and 2-thread runs). The parent scores each output with sacreBLEU against DATA/raw/test.de, counts how many lines
are identical to the student's mtkit int8 output (each hop's change: shortlist, int8, CTranslate2), and prints the
table. Nothing else may run meanwhile: the figures are only comparable within one run on one idle machine.
`--record FILE` (run.sh --record) also keeps the run as a record (bench/harness.py's: the commit, the machine, the
load at start, each system's passes, and how the teacher and the student were trained: their updates, minutes and
precision, from their files) that docs/gen_figures.py renders with `table`; `--recipe-args` are run.sh's own
arguments, so that the record's command is the recipe's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Record  # noqa: E402  # the benches' record writer

# Every system's search, beside its beam and shortlist: fairseq's length normalisation score / |Y|^0.6 and the
# patience stop (mtkit `--lenpen fairseq --alpha 0.6 --early-stop patience`; through mtkit's CTranslate2 engine
# that is CTranslate2's `length_penalty=0.6`, `patience=1`, where |Y| counts the end token in both, and
# `min_decoding_length=0`: mtkit/decode/ct2.py). Not mtkit's default (GNMT's ((5 + |Y|) / 6)^0.6, which
# CTranslate2 has not) and not the teacher's own defaults: one search for every row. A greedy search (beam 1, the
# students) takes each step's most probable piece whatever the penalty, which only rescales the final score.
SEARCH = {"lenpen": "fairseq", "alpha": 0.6, "early_stop": "patience"}
# How each system uses the CPU: (workers, threads per worker), and the table's name for it.
SETTINGS = {(1, 1): "1 thread", (1, 2): "2 threads", (2, 1): "2 workers x 1 thread"}
WARMUP_LINES = 8
TIMED_PASSES = 3  # the median counts


class System(NamedTuple):  # not a dataclass: tests load this script as a module of no package
    name: str
    models: tuple[str, ...]
    precision: str  # fp32 or int8: mtkit's dynamic int8, or CTranslate2's int8 compute type
    beam: int
    shortlist: bool
    size_of: str  # the file whose size is the model's


def systems(out: Path, teachers: list[str]) -> list[System]:
    ct2_teacher, ct2_student = str(out / "ct2-teacher"), str(out / "ct2-student")
    student = str(out / "student.pt")
    return [
        System("teacher, mtkit fp32, beam 4", tuple(teachers), "fp32", 4, False, teachers[0]),
        System("student, mtkit fp32, greedy", (student,), "fp32", 1, False, student),
        System("student, mtkit fp32, shortlist, greedy", (student,), "fp32", 1, True, student),
        System("student, mtkit int8, greedy", (student,), "int8", 1, False, student),
        System("student, mtkit int8, shortlist, greedy", (student,), "int8", 1, True, student),
        System("teacher, CTranslate2 int8, beam 4", (ct2_teacher,), "int8", 4, False, f"{ct2_teacher}/model.bin"),
        System("teacher, CTranslate2 int8 + vmap, beam 4", (ct2_teacher,), "int8", 4, True, f"{ct2_teacher}/model.bin"),
        System("student, CTranslate2 int8, greedy", (ct2_student,), "int8", 1, False, f"{ct2_student}/model.bin"),
        System("student, CTranslate2 int8 + vmap, greedy", (ct2_student,), "int8", 1, True, f"{ct2_student}/model.bin"),
    ]


REFERENCE = "student, mtkit int8, shortlist, greedy"  # the deployed student: what the others are compared with


def search(system: System) -> dict[str, Any]:
    """The decoding settings `system` translates with (DecodeConfig fields, laid over the model's own defaults)."""
    return {"beam": system.beam, "shortlist": system.shortlist, **SEARCH}


def child(spec: dict[str, Any]) -> None:
    """One system at one thread count: translate, time, and print {"seconds", "passes", "peak_kib", "search"} (its
    own process): "seconds" is the median of the timed passes, "search" the settings the translator searched with."""
    import statistics
    import time

    from mtkit.decode.loading import prepare

    paths = [Path(p) for p in spec["models"]]
    # as `mtkit translate -m PATH --beam B --shortlist/--no-shortlist --lenpen fairseq --alpha 0.6 --early-stop
    # patience` runs it (`search`)
    translator = prepare(paths, "cpu", spec["precision"], spec["workers"], spec["threads"], **spec["search"])
    lines = Path(spec["src"]).read_text(encoding="utf-8").splitlines()
    translator.translate(lines[:WARMUP_LINES])
    passes = []
    for _ in range(TIMED_PASSES):
        start = time.perf_counter()
        output = translator.translate(lines)  # the same output each pass: the search is deterministic
        passes.append(time.perf_counter() - start)
    Path(spec["output"]).write_text("".join(line + "\n" for line in output), encoding="utf-8")
    peak = sum(peak_kib(pid) for pid in ["self", *worker_pids()])
    config = translator.defaults  # what the engine searched with: the model's defaults under `search`
    searched = {key: getattr(config, key) for key in ("beam", "lenpen", "alpha", "early_stop", "shortlist")}
    print(json.dumps({"seconds": statistics.median(passes), "passes": passes, "peak_kib": peak, "search": searched}))


def worker_pids() -> list[str]:
    """This process's children (mtkit's worker processes), from /proc."""
    import glob

    found: list[str] = []
    for path in glob.glob("/proc/self/task/*/children"):
        found += Path(path).read_text().split()
    return found


def peak_kib(pid: str) -> int:
    """A process's high-water mark of resident memory (VmHWM), in KiB; 0 for one that ended meanwhile."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def measure(system: System, setting: tuple[int, int], src: Path, output: Path) -> dict[str, Any]:
    workers, threads = setting
    spec = {**system._asdict(), "search": search(system), "workers": workers, "threads": threads, "src": str(src),
            "output": str(output)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"results.py: {system.name} at {SETTINGS[setting]} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def trained(path: str | Path) -> dict[str, Any]:
    """How a model was trained, from what its file records (`mtkit info`): its updates, minutes of training and
    precision (the run's, `auto` as decided), and for an average the updates of the checkpoints it is the mean of."""
    from mtkit.info import describe

    info = describe(path)
    hours, run = info.get("training_hours"), info.get("provenance") or {}
    return {
        "file": Path(path).name,
        "updates": info.get("step"),
        "training_minutes": None if hours is None else round(60 * hours, 1),
        "precision": run.get("precision"),
        "averaged_from": [s.get("step") for s in info.get("averaged_from") or [] if isinstance(s, dict)],
    }


def table(rows: list[dict[str, Any]], sentences: int, words: int) -> str:
    """The markdown table: one row a system, its BLEU, identical lines, speed in each setting, memory, size; the
    deployed student's row (REFERENCE) in bold. docs/gen_figures.py renders the published tables with it too."""
    head = ["system", "BLEU", "same lines as the deployed student"]
    for name in SETTINGS.values():
        head += [f"sent/s, {name}", "words/s", "x teacher"]
    head += ["peak MiB", "model MB"]
    teacher = rows[0]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        deployed = row["name"] == REFERENCE
        name, bleu = (
            (f"**{row['name']}** (deployed)", f"**{row['bleu']:.2f}**")
            if deployed
            else (row["name"], f"{row['bleu']:.2f}")
        )
        cells = [name, bleu, f"{row['identical']:.1%}"]
        for setting in SETTINGS.values():
            seconds = row["seconds"][setting]
            cells += [
                f"{sentences / seconds:,.1f}",
                f"{words / seconds:,.0f}",
                f"{teacher['seconds'][setting] / seconds:.2f}",
            ]
        cells += [f"{row['peak_kib'] / 1024:,.0f}", f"{row['bytes'] / 1e6:,.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the recipe's OUT: student.pt, ct2-teacher, ct2-student")
    parser.add_argument("data", type=Path, help="the teacher's data directory (raw/test.en, raw/test.de)")
    parser.add_argument("teachers", nargs="+", help="the teacher's model files (more than one: an ensemble)")
    parser.add_argument("--record", help="also keep the run as a record here, e.g. docs/results/NAME.json")
    parser.add_argument("--recipe-args", nargs=argparse.REMAINDER, default=None, help="run.sh's own arguments")
    return parser.parse_args(argv)


def main(out: Path, data: Path, teachers: list[str], record: str | None = None,
         recipe_args: list[str] | None = None) -> None:  # fmt: skip
    import sacrebleu

    from mtkit.device import cpu_name

    # begun before the first system runs: the load it reads is the machine's, not the measurement's
    recipe = [str(Path(__file__).resolve().parent / "run.sh"), *(recipe_args or [])]
    run = Record(recipe, runner="bash") if recipe_args is not None else Record()
    src, ref = data / "raw" / "test.en", data / "raw" / "test.de"
    refs = ref.read_text(encoding="utf-8").splitlines()
    sources = src.read_text(encoding="utf-8").splitlines()
    words = sum(len(line.split()) for line in sources)
    rows, outputs = [], {}
    for k, system in enumerate(systems(out, teachers)):
        measured = {(w, t): measure(system, (w, t), src, out / f"test.system{k}.{w}w{t}t.de") for w, t in SETTINGS}
        outputs[system.name] = (out / f"test.system{k}.1w2t.de").read_text(encoding="utf-8").splitlines()
        rows.append(
            {
                "name": system.name,
                "bleu": sacrebleu.corpus_bleu(outputs[system.name], [refs]).score,
                "seconds": {SETTINGS[setting]: m["seconds"] for setting, m in measured.items()},
                "passes": {SETTINGS[setting]: m["passes"] for setting, m in measured.items()},
                # One process's: the workers' added VmHWM counts the pages they share with it twice.
                "peak_kib": max(m["peak_kib"] for (workers, _), m in measured.items() if workers == 1),
                "search": measured[1, 1]["search"],
                "bytes": Path(system.size_of).stat().st_size,
            }
        )
    for row in rows:
        mine, theirs = outputs[row["name"]], outputs[REFERENCE]
        row["identical"] = sum(a == b for a, b in zip(mine, theirs)) / max(len(theirs), 1)
    print("# Multi30k En-De: a distilled student against its teacher\n")
    print(
        f"test_2016_flickr, {len(sources):,} sentences, {words:,} source words; {os.cpu_count()} CPU cores "
        f"({cpu_name()}), {platform.platform()}; each system alone, one after the other; every search with "
        "fairseq's length normalisation (score / |Y|^0.6) and the patience stop; speed: the median of "
        f"{TIMED_PASSES} timed passes after {WARMUP_LINES} warm-up lines; peak memory: the process's VmHWM (Python, "
        "the libraries and the model).\n"
    )
    print(table(rows, len(sources), words))
    print("\n" + json.dumps({"rows": rows}, default=str))
    if record:
        how = {"teachers": [trained(t) for t in teachers], "student": trained(out / "student.pt")}
        settings = {"search": SEARCH, "settings": list(SETTINGS.values()), "warmup_lines": WARMUP_LINES,
                    "timed_passes": TIMED_PASSES, "teachers": [Path(t).name for t in teachers],
                    "trained": how}  # fmt: skip
        results = {row["name"]: {"bleu": row["bleu"], "seconds": row["seconds"]} for row in rows}
        kept = run.data(settings, {row["name"]: row["passes"] for row in rows}, results)
        kept.update(renderer="recipes/multi30k-distill/results.py", test="test_2016_flickr", rows=rows,
                    sentences=len(sources), words=words)  # fmt: skip
        run.write_data(record, kept)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(json.loads(sys.argv[2]))
    else:
        args = parse_args()
        main(args.out, args.data, args.teachers, args.record, args.recipe_args)
