"""The bench/ scripts' building blocks: a bench that stopped working goes unnoticed until its figures are needed."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtkit.data.dataset import open_data
from tests.support.cli import ROOT
from tests.support.corpora import sample_multi30k
from tests.support.recipes import load_script
from tests.support.shortlist import one_piece_shortlist


def test_train_throughputs_synthetic_corpus_is_data_that_training_reads(tmp_path: Path) -> None:
    """The corpus is made by `mtkit prepare custom` and `mtkit bpe`: a data directory of the asked vocabulary with
    WMT-like lengths, which `mtkit train` reads."""
    data = open_data(load_script("bench/train_throughput.py").make_corpus(tmp_path / "data", 50, 400, seed=1))
    assert data.vocab_size == 400 and (data.src_lang, data.tgt_lang) == ("src", "tgt")
    train, valid = data.split("train"), data.split("valid")
    assert (len(train), len(valid)) == (50, 64)
    assert train.max_id() < 400 and train.src_sizes.min() >= 1
    words = [len(line.split()) for line in (data.path / "raw" / "train.src").read_text().splitlines()]
    assert 10 < sum(words) / len(words) < 50  # WMT-like sentences (median ~20 words)


def public_modules() -> set[str]:
    """mtkit's public API: the package itself and the modules the pages show a user importing in Python."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    shown = {m for p in pages for m in re.findall(r"^from (mtkit[\w.]*) import", p.read_text("utf-8"), re.M)}
    return {"mtkit", *shown}


def test_no_bench_imports_mtkit_internals() -> None:
    """bench/ measures what a user runs: `import mtkit` and the modules the docs show users importing (the public
    API), the command line, the server; a question about an internal is answered by a script that lives while it
    is open, then leaves."""
    import ast

    public, internal = public_modules(), []
    assert "mtkit" in public and "mtkit.decode.loading" not in public
    for script in sorted((ROOT / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mtkit"):
                internal += [f"{script.name}: from {node.module} import ..."] if node.module not in public else []
            elif isinstance(node, ast.Import):
                internal += [f"{script.name}: import {a.name}" for a in node.names if a.name.startswith("mtkit.")]
    assert not internal, internal


def test_a_record_holds_the_command_commit_date_machine_settings_and_passes(tmp_path: Path) -> None:
    """bench/harness.py's record: what a reader needs to trust and rerun a figure. Paths outside the repository
    keep only their name; the load is the one when the bench began."""
    harness = load_script("bench/harness.py")
    argv = [str(ROOT / "bench" / "static_step.py"), "--model", "/somewhere/private/student.pt", "--rounds", "3"]
    record = harness.Record(argv)
    path = tmp_path / "results" / "x.json"
    record.write(str(path), {"rounds": 3}, {"fp32": [1.0, 2.0]}, {"p50": 1.5})
    data = json.loads(path.read_text())
    assert data["format"] == "mtkit-bench-record" and data["command"] == (
        "python bench/static_step.py --model student.pt --rounds 3"
    )
    assert len(data["commit"]["commit"]) == 40 and data["date"] == record.started
    assert data["machine"]["cpu"] and data["machine"]["cores"] >= 1 and data["machine"]["load_1min"] == record.load
    assert data["settings"] == {"rounds": 3} and data["passes"] == {"fp32": [1.0, 2.0]}
    assert "/somewhere" not in path.read_text()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc/PID/stat")
def test_procstat_counters_see_a_fresh_buffers_page_faults_and_a_childs_cpu() -> None:
    """Writing 64 MiB of fresh memory costs this process at least one minor page fault per 4 KiB page;
    a child's CPU time counts toward the total as the workers' does."""
    bench = load_script("bench/harness.py")
    go, burnt = os.pipe(), os.pipe()
    before = bench.counters()
    pid = os.fork()
    if pid == 0:  # the child: burns 0.3 s of CPU, says so, and waits until the parent has measured
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        os.write(burnt[1], b"x")
        os.read(go[0], 1)
        os._exit(0)
    try:
        fresh = bytearray(64 * 2**20)  # calloc'd: its pages are mapped as they are first written
        fresh[::4096] = b"\1" * (len(fresh) // 4096)
        os.read(burnt[0], 1)
        after = bench.counters()
    finally:
        os.write(go[1], b"x")
        os.waitpid(pid, 0)
        for fd in (*go, *burnt):
            os.close(fd)
    used = bench.totals(before, after)
    assert str(pid) in after and str(os.getpid()) in after
    assert used["minor_faults"] >= 64 * 2**20 // 4096
    assert 0.2 <= used["cpu_seconds"] and 0 <= used["system_cpu_seconds"] <= used["cpu_seconds"]
    assert used["peak_rss_mib"] >= after[str(os.getpid())][3] > 64
    del fresh


def test_translate_speeds_ratios_come_best_of_and_paired() -> None:
    """mtkit's best round over CTranslate2's, and the median of the rounds' own ratios; one round: no paired one."""
    add_ratios = load_script("bench/translate_speed.py").add_ratios
    rows = {
        "mtkit-fp32": {"sentences_per_s": 120.0, "rounds_sentences_per_s": [120.0, 80.0, 90.0]},
        "ct2-fp32": {"sentences_per_s": 150.0, "rounds_sentences_per_s": [150.0, 80.0, 100.0]},
    }
    add_ratios(rows)
    assert rows["mtkit-fp32"]["vs_ct2-fp32"] == 0.8
    assert rows["mtkit-fp32"]["paired_vs_ct2-fp32"] == 0.9  # rounds: 0.8, 1.0, 0.9
    single = {name: {"sentences_per_s": 1.0, "rounds_sentences_per_s": [1.0]} for name in ("mtkit-int8", "ct2-int8")}
    add_ratios(single)
    assert single["mtkit-int8"]["vs_ct2-int8"] == 1.0 and "paired_vs_ct2-int8" not in single["mtkit-int8"]


def resident_mib(pid: str) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux's /proc/PID/smaps_rollup")
def test_translate_speeds_pss_counts_what_a_forked_worker_shares_once() -> None:
    """`--workers` memory: 64 MiB written before a fork, then shared by parent and child, is 64 MiB in the PSS
    sum, where adding up the two processes' resident sizes counts it twice."""
    bench = load_script("bench/harness.py")
    shared = b"\1" * (64 * 2**20)  # written, so resident in the parent before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: holds the shared pages until the parent has measured
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        both = bench.pss_mib(["self", str(pid)])
        resident = resident_mib("self") + resident_mib(str(pid))
        with bench.PeakPss(interval=0.01) as peak:
            pass
    finally:
        os.write(write, b"x")
        os.waitpid(pid, 0)
    del shared  # held until both processes were measured
    assert resident - both > 48  # the 64 MiB count once, not twice
    assert 64 < both < resident
    assert peak.peak > 0 and bench.pss_mib(["no-such-process"]) == 0.0


def test_the_paired_ratio_is_the_median_of_each_rounds_own_ratio_and_needs_matching_rounds() -> None:
    paired_ratio = load_script("bench/harness.py").paired_ratio
    assert paired_ratio([2.0, 3.0, 9.0], [1.0, 3.0, 3.0]) == (2.0, 1.0, 3.0)
    with pytest.raises(ValueError, match="same number"):
        paired_ratio([1.0, 2.0], [1.0])


def test_translate_speeds_mtkit_over_ctranslate2_is_its_overhead() -> None:
    """mtkit's pipeline over the CTranslate2 export is measured against CTranslate2's own API, each precision."""
    bench = load_script("bench/translate_speed.py")
    rows = {name: {"sentences_per_s": s, "rounds_sentences_per_s": [s]} for name, s in (("ct2-int8", 100.0),)}
    rows |= {"mtkit-ct2-int8": {"sentences_per_s": 96.0, "rounds_sentences_per_s": [96.0]}}
    bench.add_ratios(rows)
    assert rows["mtkit-ct2-int8"]["vs_ct2-int8"] == 0.96
    assert {"mtkit-ct2-fp32", "mtkit-ct2-int8"} <= set(bench.SYSTEMS)


@pytest.mark.slow
def test_gpu_run_sh_runs_whole_on_the_cpu_with_a_tiny_preset(tmp_path: Path, cli_model: Path) -> None:
    """The GPU call, dry: every part of bench/gpu_run.sh on the CPU (the tiny preset, a few updates on a small
    synthetic corpus, the recipe's commands printed, decoding of the model and of a student), so that it cannot rot
    between GPU loans: each part exits 0 and leaves its output, the benches' ending in their JSON line. (The compile
    part is skipped: compiling on a CPU takes minutes.)"""
    assets = tmp_path / "assets"
    (assets / "multi30k").mkdir(parents=True)
    sample_multi30k(assets / "multi30k")
    shutil.copy(cli_model, assets / "model.pt")
    shutil.copy(cli_model, assets / "student.pt")
    out = tmp_path / "out"
    shadow = tmp_path / "shadow"  # a dependency this Python cannot import, as sacremoses on a GPU image
    shadow.mkdir()
    (shadow / "sacremoses.py").write_text("raise ImportError('hidden by the test')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")])),
        "ASSETS": str(assets),
        "OUT": str(out),
        "PYTHON": sys.executable,
        "DEVICE": "cpu",
        "PRESETS": "tiny",
        "PRECISION": "fp32",
        "COMPILES": "off",
        "STEPS": "2",
        "WARMUP": "1",
        "TRAIN_ARGS": "--sentences 200 --vocab 400 --threads 1 --peak-gflops 100",
        "RECIPE_ARGS": "--dry-run",
        "SYSTEMS": "mtkit-fp32",
        "DECODE_ARGS": "--limit 4 --max-len-b 3 --threads 1",  # an untrained model's search runs to its length limit
    }
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_run.sh")], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "=== packages: missing sacremoses (put their wheels in ASSETS/whl)" in done.stdout, done.stdout
    parts = ("train-4096", "train-auto", "recipe", "decode-4096", "decode-student")
    for part in parts:
        assert f"=== {part}: exit 0 after" in done.stdout, done.stdout
    assert "=== compile" not in done.stdout  # COMPILES=off
    for part in ("train-4096", "train-auto", "decode-4096", "decode-student"):
        figures = json.loads((out / f"{part}.txt").read_text().splitlines()[-1])
        assert figures, part
    assert "mtkit train" in (out / "recipe.txt").read_text()  # the recipe's commands, printed
    assert '"beam": 1' in (out / "decode-student.txt").read_text()  # a student decodes greedily
    assert len(list(out.iterdir())) <= 7  # the device tool brings back 8 files: room for all.txt


def test_the_peers_scripts_parse_and_the_fairseq_comparison_runs_one_of_them() -> None:
    """bench/peers/ holds the setups behind every comparison with another toolkit: each script is bash that parses,
    reads Multi30k from the copy mtkit ships (nothing outside the repository), and train_throughput.py's
    --fairseq runs the one that exists."""
    scripts = sorted((ROOT / "bench" / "peers").glob("*.sh"))
    assert {p.name for p in scripts} >= {"setup.sh", "prep_multi30k.sh", "train_throughput.sh", "multi30k_budget.sh"}
    for script in scripts:
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, f"{script.name}: {done.stderr}"
        assert "../shared" not in script.read_text(encoding="utf-8"), script.name
    assert "mtkit/data/multi30k" in (ROOT / "bench" / "peers" / "prep_multi30k.sh").read_text(encoding="utf-8")
    bench = load_script("bench/train_throughput.py")
    assert (bench.PEERS / "train_throughput.sh").is_file()
    assert set(bench.FAIRSEQ_ARCH.values()) <= {"small", "big"}


def test_static_step_times_each_step_per_sentence_through_the_public_api(
    cli_model: Path, monkeypatch, tmp_path: Path
) -> None:
    """bench/static_step.py's `one` scenario on a tiny model carrying a shortlist: each step is
    `mtkit.load_translator` (int8 at its precision, eager at fp32), every call translates one sentence, every
    sentence is timed in every round, the steps take turns (the order reversing from call to call and round to
    round), and each step's outputs are its own translator's with the model's own defaults at beam 1."""
    import mtkit

    bench = load_script("bench/static_step.py")
    real, opened, calls = mtkit.load_translator, {}, []

    def spy(model, **kwargs):
        translator = real(model, **kwargs)
        precision, translate = kwargs["precision"], translator.translate
        opened[precision] = translator

        def one_by_one(lines, *args, **kw):
            calls.append((precision, list(lines)))
            return translate(lines, *args, **kw)

        translator.translate = one_by_one
        return translator

    monkeypatch.setattr(mtkit, "load_translator", spy)
    lines = ["a b c", "d e", "f g h i"]
    model, _ = one_piece_shortlist(cli_model, tmp_path / "one.pt")
    translators = bench.load(str(model), ["eager", "int8"], "fp32", threads=1)
    config = translators["eager"].settings(beam=1)
    results = bench.measure(translators, config, bench.calls_of(lines, "one", 32), rounds=2)
    assert set(opened) == {"fp32", "int8"} and set(results) == {"eager", "int8"}
    assert all(len(batch) == 1 for _, batch in calls)  # one sentence a call: a lone request's latency
    timed = [precision for precision, _ in calls[4:]]  # after the warm-up of two calls each
    assert timed == ["fp32", "int8", "int8", "fp32", "fp32", "int8"] + ["int8", "fp32", "fp32", "int8", "int8", "fp32"]
    for step, precision in (("eager", "fp32"), ("int8", "int8")):
        result = results[step]
        assert len(result["ms"]) == 2 * len(lines) and all(ms > 0 for ms in result["ms"])
        assert result["outputs"] == [opened[precision].translate([line], config)[0] for line in lines]
    full = [opened["int8"].translate([line], beam=1, shortlist=False)[0] for line in lines]
    assert config.shortlist and results["int8"]["outputs"] != full  # its shortlist matters: the check above can fail


FAKE_FAIRSEQ = """#!{python}
# fairseq-interactive as the comparison calls it: its arguments kept, the German reference of each input line (val's
# or test's) back as its translation with --lenpen 1.0, its first word alone otherwise; the lines out of order, as
# fairseq's batches by length give them, and H- lines (pieces) beside the D- lines (detokenized) that count.
import gzip, json, sys
args = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
lenpen = args[args.index("--lenpen") + 1] if "--lenpen" in args else None
source = open(args[args.index("--input") + 1], encoding="utf-8").read().splitlines()
for split in ("val", "test_2016_flickr"):
    with gzip.open({data!r} + "/" + split + ".en.gz", "rt", encoding="utf-8") as f:
        if f.readline().rstrip("\\n") == source[0]:
            break
with gzip.open({data!r} + "/" + split + ".de.gz", "rt", encoding="utf-8") as f:
    refs = [line.rstrip("\\n") for line in f]
for i in reversed(range(len(source))):
    print(f"S-{{i}}\\t{{source[i]}}\\nH-{{i}}\\t-0.5\\t\\u2581pieces")
    print(f"D-{{i}}\\t-0.5\\t" + (refs[i] if lenpen == "1.0" else refs[i].split()[0]))
"""


def test_the_fairseq_comparison_chooses_each_alpha_on_dev_and_reads_each_training_from_its_log(
    cli_model: Path, tmp_path: Path
) -> None:
    """bench/fairseq_same_search.py: both systems' last checkpoints, each alpha chosen on dev for its own system,
    test once with it and once at each default search, the same references; fairseq's H- lines put back in order;
    updates and minutes from each run's own log. fairseq is a stand-in here that is perfect only at lenpen 1.0."""
    peers, calls = tmp_path / "peers", tmp_path / "calls.jsonl"
    (peers / "venv" / "bin").mkdir(parents=True)
    fake = peers / "venv" / "bin" / "fairseq-interactive"
    data = str(ROOT / "mtkit" / "data" / "multi30k")
    fake.write_text(FAKE_FAIRSEQ.format(python=sys.executable, calls=str(calls), data=data))
    fake.chmod(0o755)
    fs_run = tmp_path / "fairseq"
    fs_run.mkdir()
    (fs_run / "train.log").write_text(  # progress lines, then the summary fairseq prints when its time is up
        "| num_updates=50, wall=20\n| num_updates=2900, lr=1e-3, wall=1480\n| train | num_updates 2950 | wall 1500\n"
    )
    run = tmp_path / "mtkit"
    run.mkdir()
    shutil.copy(cli_model, run / "checkpoint_last.pt")
    events = [{"event": "start", "precision": "bf16"}, {"event": "done", "step": 2100, "hours": 25.1 / 60}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    record = tmp_path / "record.json"
    cmd = [sys.executable, str(ROOT / "bench" / "fairseq_same_search.py"), "--mtkit-run", str(run), "--fairseq-run",
           str(fs_run), "--peers", str(peers), "--alphas", "0.6", "1.0", "--limit", "3", "--threads", "1",
           "--record", str(record)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    data = json.loads(record.read_text())
    rows = {r["name"]: r for r in data["rows"]}
    best = rows["fairseq 0.12, beam 4, score / length^1.0 (dev-best)"]
    assert best["bleu"] == 100.0 and best["dev_bleu"] == 100.0 and best["alpha"] == 1.0
    assert rows["fairseq 0.12, beam 4, lenpen 1, max-len-b 200 (its default)"]["bleu"] < 50  # the stand-in's 1st words
    assert (best["updates"], best["minutes"], best["precision"]) == (2950, 25.0, "fp32")
    ours = [r for r in data["rows"] if r["system"] == "mtkit"]
    assert len(ours) == 2 and {(r["updates"], r["minutes"], r["precision"]) for r in ours} == {(2100, 25.1, "bf16")}
    assert set(data["passes"]["mtkit"]) == set(data["passes"]["fairseq 0.12"]) == {"0.6", "1.0"}
    searches = [json.loads(line) for line in calls.read_text().splitlines()]
    splits = [Path(c[c.index("--input") + 1]).name.split(".")[1] for c in searches]
    assert splits == ["valid", "valid", "test", "test"]
    assert all(c[c.index("--max-len-b") + 1] == "50" for c in searches if "--lenpen" in c)  # as mtkit's limit
    assert "--lenpen" not in searches[-1] and "--max-len-b" not in searches[-1]  # its default search: no options
    assert data["renderer"] == "docs/tables.py::fairseq_same_search" and data["sentences"] == 3
    assert "| fairseq 0.12, last checkpoint | beam 4, score / length^1.0 (dev-best) | 100.00 | 100.00 |" in done.stdout


def test_translate_speeds_shortlist_reaches_mtkit_and_ctranslate2_greedy(cli_model: Path, tmp_path: Path) -> None:
    """--shortlist --beam 1: mtkit searches over the shortlist the model carries, CTranslate2 over the export's
    vocabulary map (vmap.txt, `use_vmap`). With a shortlist of one piece, each system's greedy output changes and
    holds only that piece (or UNK): a system that ignored the shortlist would give its whole-vocabulary output."""
    pytest.importorskip("ctranslate2")
    import torch

    bench = load_script("bench/translate_speed.py")
    model, piece = one_piece_shortlist(cli_model, tmp_path / "one.pt")
    ct2 = bench.export_model(str(model), tmp_path)
    assert (Path(ct2) / "vmap.txt").is_file()
    lines = ["a b c", "d e", "f g h i", "a man rides a bike ."]
    outputs, threads = {}, torch.get_num_threads()
    try:
        for shortlist in (False, True):
            job = {
                "model": str(model),
                "lines": lines,
                "beam": 1,
                "alpha": 0.6,
                "max_len_b": 3,
                "batch_tokens": 4096,
                "threads": 1,
                "workers": 1,
                "device": "cpu",
                "early_stop": "patience",
                "shortlist": shortlist,
                "ct2_dir": ct2,
            }
            outputs["mtkit", shortlist] = bench.run_mtkit(job, "int8")[0]
            outputs["ct2", shortlist] = bench.run_ct2(job, "int8")[0]
    finally:
        torch.set_num_threads(threads)  # run_mtkit sets the child's
    for system in ("mtkit", "ct2"):
        assert outputs[system, True] != outputs[system, False], system
        assert set(" ".join(outputs[system, True]).split()) <= {piece, "⁇"}, (system, outputs[system, True])
        assert any(set(line.split()) - {piece, "⁇"} for line in outputs[system, False]), system  # it can fail


def test_translate_speeds_isa_cap_reaches_the_childs_kernels(cli_model: Path, tmp_path: Path) -> None:
    """--isa avx2: a child runs PyTorch's AVX2 kernels on a CPU that has more, and says so in its row."""
    import torch

    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip(f"this CPU runs {torch.backends.cpu.get_cpu_capability()} kernels, below the cap")
    bench = load_script("bench/translate_speed.py")
    job = {"model": str(cli_model), "lines": ["a b c", "d e"], "beam": 1, "alpha": 0.6, "max_len_b": 3}
    job.update(batch_tokens=4096, threads=1, workers=1, device="cpu", early_stop="patience", shortlist=False)
    (tmp_path / "job.json").write_text(json.dumps(job), encoding="utf-8")
    capped = bench.run_child("mtkit-fp32", tmp_path / "job.json", tmp_path, "avx2")
    assert capped["cpu_capability"] == "AVX2" and len(capped["outputs"]) == 2
    assert bench.summarise("mtkit-fp32", capped, 2, None)["cpu_capability"] == "AVX2"
    assert bench.child_env("avx2")["CT2_FORCE_CPU_ISA"] == "AVX2"  # CTranslate2's own cap, read as it loads


def test_translate_speeds_settings_each_systems_best_and_the_table() -> None:
    """--settings THREADSxWORKERS: every system at each; each system's fastest setting (its best round) against its
    anchor's own fastest, best round over best round and paired over the rounds; the page's table marks the bests."""
    best_setting = load_script("bench/best_setting.py")
    assert best_setting.settings_list("1x1,2x1,1x2") == [(1, 1), (2, 1), (1, 2)]
    for bad in ("2", "1x0", "x1", ","):
        with pytest.raises(argparse.ArgumentTypeError):
            best_setting.settings_list(bad)
    names = [best_setting.setting_name(t, w) for t, w in ((1, 1), (2, 1), (1, 2))]
    assert names == ["1 thread", "2 threads", "2 workers x 1 thread"]

    def row(system: str, setting: str, rounds: list[float]) -> dict:
        return {
            "name": f"{system}, {setting}",
            "system": system,
            "setting": setting,
            "sentences_per_s": max(rounds),
            "rounds_sentences_per_s": rounds,
            "words_per_s": 10 * max(rounds),
            "peak_rss_mib": 100.0,
            "bleu": 30.0,
        }

    rows = [
        row("mtkit-int8", "1 thread", [50.0, 60.0]),
        row("ct2-int8", "1 thread", [40.0, 45.0]),
        row("mtkit-int8", "2 threads", [80.0, 70.0]),
        row("ct2-int8", "2 threads", [50.0, 50.0]),
        row("mtkit-int8", "2 workers x 1 thread", [75.0, 78.0]),
        row("ct2-int8", "2 workers x 1 thread", [64.0, 60.0]),
    ]
    for setting in names:
        best_setting.add_ratios({r["system"]: r for r in rows if r["setting"] == setting})
    best = best_setting.best_settings(rows)
    assert best["mtkit-int8"]["setting"] == "2 threads" and best["ct2-int8"]["setting"] == "2 workers x 1 thread"
    assert best["mtkit-int8"]["vs_ct2-int8_at_its_best"] == 1.25  # 80 / 64, not 80 / 50 at its own setting
    assert best["mtkit-int8"]["paired_vs_ct2-int8_at_its_best"] == pytest.approx((80 / 64 + 70 / 60) / 2, abs=1e-3)
    table = best_setting.table(rows, 1000, 11877).splitlines()
    assert table[0].startswith("| system (1,000 sentences, 11,877 source words) | setting |")
    assert table[4] == "| **mtkit-int8** | 2 threads | **80.0** | 800 | 100 | 30.00 | 1.60x ct2-int8 |"
    assert table[-1] == "| mtkit-int8, 2 threads | 80.0 | ct2-int8, 2 workers x 1 thread | 64.0 | 1.25x | 1.21x |"


@pytest.mark.slow
def test_translate_speed_measures_every_setting_in_turns_into_a_record_a_page_renders(
    cli_model: Path, tmp_path: Path, monkeypatch
) -> None:
    """The distillation comparison's command, small: a greedy student with its shortlist, mtkit int8 and
    CTranslate2 int8 at two settings, two rounds (every system and setting in turn, the second round reversed),
    one record whose table docs/gen_figures.py renders and which passes the checks every record on a page must;
    --shortlist on a model without one is one sentence."""
    pytest.importorskip("ctranslate2")
    model, _ = one_piece_shortlist(cli_model, tmp_path / "student.pt")
    path = tmp_path / "speed.json"
    script = ROOT / "bench" / "translate_speed.py"
    argv = [
        str(script),
        "--model",
        str(model),
        "--beam",
        "1",
        "--shortlist",
        "--systems",
        "mtkit-int8,ct2-int8",
        "--settings",
        "1x1,1x2",
        "--rounds",
        "2",
        "--limit",
        "3",
        "--max-len-b",
        "3",
        "--record",
        str(path),
    ]
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    order = [line.split(":")[0] for line in done.stderr.splitlines() if line.endswith("sent/s")]
    names = [
        "mtkit-int8, 1 thread",
        "ct2-int8, 1 thread",
        "mtkit-int8, 2 workers x 1 thread",
        "ct2-int8, 2 workers x 1 thread",
    ]
    assert order == names + names[::-1]
    data = json.loads(path.read_text())
    assert [r["name"] for r in data["rows"]] == names and all(len(p) == 2 for p in data["passes"].values())
    assert data["settings"]["shortlist"] is True and data["settings"]["beam"] == 1
    assert set(data["results"]["best"]) == {"mtkit-int8", "ct2-int8"}
    best_setting = load_script("bench/best_setting.py")
    assert data["renderer"] == "bench/best_setting.py::table"
    table = best_setting.table(data["rows"], data["sentences"], data["words"]).splitlines()
    assert len(table) == 2 + 4 + 1 + 2 + 1 and table[-1].startswith("| mtkit-int8, ")  # rows, then at their best
    figures = load_script("tests/test_docs_figures.py")
    figures.test_every_record_has_its_command_commit_date_machine_and_passes(path)
    figures.test_every_records_command_parses_at_the_current_command_line(path, tmp_path, monkeypatch)
    refused = subprocess.run(
        [
            sys.executable,
            str(script),
            "--model",
            str(cli_model),
            "--beam",
            "1",
            "--shortlist",
            "--systems",
            "ct2-int8",
            "--limit",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert refused.returncode == 1 and refused.stderr.strip().endswith("-o OUT)"), refused.stderr


def test_startup_bench_times_fresh_processes_and_keeps_each_choice_with_its_cold_start(cli_model, tmp_path) -> None:
    """bench/startup.py with the eager choice alone on a tiny model: an untimed cold start, then a timed start each
    round, each a fresh process whose parts add up to its start; the record keeps every pass."""
    path = tmp_path / "startup.json"
    argv = ["--model", str(cli_model), "--choices", "off", "--rounds", "2", "--cache", str(tmp_path / "cache")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "startup.py"), *argv, "--record", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(path.read_text())
    (start, again) = data["passes"]["off"]
    for one in (start, again):
        assert one["start_s"] == pytest.approx(one["import_s"] + one["open_s"] + one["first_s"], abs=1e-6)
    row = data["results"]["off"]
    assert row["first_start_s"] > 0 and row["over_first_choice_paired_s"] == 0.0
    assert row["start_s"] == round((start["start_s"] + again["start_s"]) / 2, 2)
