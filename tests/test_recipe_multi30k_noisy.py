"""Multi30k-noisy: the noise is built the same way every time and each cleaning rule finds its own kind;
the recipe's dry run parses with mtkit's own parsers, trains the three systems alike, and creates nothing."""

from __future__ import annotations

import shlex

from tests.support.corpora import fake_multi30k
from tests.support.recipes import ROOT, dry_run, load_script, parse_line, parse_mtkit, run_recipe


def test_the_noisy_corpus_is_deterministic_and_each_rule_finds_its_noise(tmp_path):
    bench = load_script("recipes/multi30k-noisy/noise.py")
    data = fake_multi30k(tmp_path / "data")
    counts = bench.build(data, tmp_path / "a", seed=1)
    bench.build(data, tmp_path / "b", seed=1)
    for name in ("train.en", "train.de", "train.kind"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert counts["misaligned"] == 28 and counts["french"] == counts["html"] == 16 and counts["duplicate"] == 8
    noise = sum(n for k, n in counts.items() if k != "clean")
    assert 0.28 < noise / sum(counts.values()) < 0.32
    config = bench.WebCleanConfig(markup=True, copies=True, dedup=True, near_dedup=True, max_char_ratio=2.0)
    table = bench.report(tmp_path / "a", config)
    assert table["html"]["markup"] == 16 and table["copy"]["copy"] == 16
    assert table["duplicate"]["duplicate"] == 8 and table["near_duplicate"]["near_duplicate"] == 8
    assert table["clean"]["kept"] >= table["clean"]["pairs"] - 2  # synthetic captions repeat rarely


def test_dry_run_trains_clean_noisy_and_cleaned_alike(tmp_path):
    data = tmp_path / "da ta"
    lines = dry_run("multi30k-noisy", "--data", str(data), "--minutes", "10", cwd=tmp_path)
    assert shlex.split(lines[0])[:2] == ["python", str(ROOT / "recipes" / "multi30k-noisy" / "noise.py")]
    assert shlex.split(lines[2])[-4:] == [
        "--max-char-ratio",
        "2",
        ">",
        str(ROOT / "recipes/multi30k-noisy/out/report.md"),
    ]
    steps = [parse_mtkit(parse_line(line)[0]) for line in lines if line.startswith("mtkit ")]
    assert [name for name, _ in steps] == ["clean"] + ["prepare", "bpe", "train", "average", "translate", "score"] * 3
    clean = steps[0][1]
    assert clean["all_rules"] and clean["max_char_ratio"] == 2.0
    trains = [params for name, params in steps if name == "train"]
    settings = [{k: v for k, v in p.items() if k not in ("data", "out")} for p in trains]
    assert settings[0] == settings[1] == settings[2] and settings[0]["max_minutes"] == 10
    prepares = [params for name, params in steps if name == "prepare"]
    assert prepares[0]["train_src"] == data / "train.en.gz"
    assert all(p["valid_src"] == data / "val.en.gz" for p in prepares)
    assert all(params["lang"] == "de" for name, params in steps if name == "score")


def test_systems_and_steps_pick_what_to_train_and_how_long(tmp_path):
    """--systems 'noisy cleaned' builds and cleans the noise as ever but trains only those two (the clean run is the
    Multi30k recipe's own, trained alike); --steps N trains N updates, checkpoints every N/25; a name that is none
    of the three is refused in one sentence."""
    lines = dry_run("multi30k-noisy", "--data", str(tmp_path), "--systems", "noisy cleaned", cwd=tmp_path)
    steps = [parse_mtkit(parse_line(line)[0]) for line in lines if line.startswith("mtkit ")]
    assert [name for name, _ in steps] == ["clean"] + ["prepare", "bpe", "train", "average", "translate", "score"] * 2
    outs = [params["out"] for name, params in steps if name == "train"]
    assert [out.parent.name for out in outs] == ["noisy", "cleaned"]
    steps = [parse_mtkit(parse_line(line)[0]) for line in dry_run("multi30k-noisy", "--data", str(tmp_path),
        "--steps", "1590", cwd=tmp_path) if line.startswith("mtkit train")]  # fmt: skip
    assert len(steps) == 3 and all(
        (p["max_steps"], p["max_minutes"], p["save_every_steps"], p["save_every_minutes"]) == (1590, 0, 64, 0)
        for _, p in steps
    )
    done = run_recipe("multi30k-noisy", "--data", str(tmp_path), "--systems", "clean dirty", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "--systems takes clean, noisy, cleaned and dual, got 'dirty'" in done.stderr


def test_the_dual_system_scores_with_a_model_each_way_and_drops_a_share(tmp_path):
    """dual: a De->En model trained alike on the cleaned set, the cleaned system's En->De model beside it, mtkit clean
    --dual-xent-drop, then the same training on what is left; without the cleaned model it is refused."""
    lines = dry_run("multi30k-noisy", "--data", str(tmp_path), "--systems", "cleaned dual", cwd=tmp_path)
    steps = [parse_mtkit(parse_line(line)[0]) for line in lines if line.startswith("mtkit ")]
    trains = {params["out"].parent.name: params for name, params in steps if name == "train"}
    assert list(trains) == ["cleaned", "backward", "dual"]
    same = [{k: v for k, v in p.items() if k not in ("data", "out")} for p in trains.values()]
    assert same[0] == same[1] == same[2]
    out = ROOT / "recipes/multi30k-noisy/out"
    backward = next(p for name, p in steps if name == "prepare" and p["out"] == out / "backward" / "data")
    assert (
        backward["train_src"] == out / "cleaned" / "train.de" and backward["train_tgt"] == out / "cleaned" / "train.en"
    )
    dual = [p for name, p in steps if name == "clean"][1]
    assert dual["dual_xent"] == (out / "cleaned" / "averaged.pt", out / "backward" / "averaged.pt")
    assert dual["dual_xent_drop"] == 0.04 and dual["all_rules"] and dual["out"] == out / "dual" / "train"
    assert any("report-dual.md" in line and "--dual-xent-drop 0.04" in line for line in lines)
    done = run_recipe("multi30k-noisy", "--data", str(tmp_path), "--systems", "dual", "--dual-xent-drop", "4",
                      "--dry-run", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "--dual-xent-drop must be a share between 0 and 1" in done.stderr
    done = run_recipe("multi30k-noisy", "--systems", "dual", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2 and "needs the cleaned system's model" in done.stderr


def test_the_recipe_reads_the_shipped_corpus_by_default_and_says_when_data_lacks_it(tmp_path):
    """As written in its README, with no --data: the Multi30k that ships with mtkit, every language of it."""
    lines = dry_run("multi30k-noisy", cwd=tmp_path)
    shipped = ROOT / "mtkit" / "data" / "multi30k"
    assert shlex.split(lines[0])[shlex.split(lines[0]).index("--data") + 1] == str(shipped)
    for lang in ("en", "de", "fr", "cs"):
        assert (shipped / f"train.{lang}.gz").is_file()
    done = run_recipe("multi30k-noisy", "--data", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "does not hold Multi30k's files" in done.stderr
