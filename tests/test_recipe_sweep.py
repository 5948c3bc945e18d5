"""The quick recipe's dev sweep (recipes/multi30k-en-de/sweep.py): its dry run's commands parse with mtkit's own
parsers, every setting trains once a seed for the same number of updates, and only the validation set is ever
translated or scored: the settings are chosen on dev, never on test."""

from __future__ import annotations

import shlex
import subprocess
import sys

from tests.support.recipes import ROOT, parse_mtkit


def test_the_sweep_trains_every_setting_and_seed_and_looks_at_dev_only() -> None:
    argv = ["--steps", "50", "--max-tokens", "768", "1024", "--warmup", "400", "--dropout", "0", "0.1"]
    argv += ["--seeds", "1", "2", "--search", "0.6:patience", "1.4:exact", "--dry-run"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / "multi30k-en-de" / "sweep.py"), *argv], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    steps = [parse_mtkit(shlex.split(line)) for line in done.stdout.splitlines()]
    trains = [params for name, params in steps if name == "train"]
    assert len(trains) == 2 * 1 * 2 * 2 and {p["max_steps"] for p in trains} == {50}
    assert {(p["max_tokens"], p["dropout"], p["seed"]) for p in trains} == {
        (t, d, s)
        for t in ("768", "1024")
        for d in (0.0, 0.1)
        for s in (1, 2)  # --max-tokens takes "auto" too
    }
    translated = [str(params["input"]) for name, params in steps if name == "translate"]
    scored = [str(ref) for name, params in steps if name == "score" for ref in params["ref"]]
    assert len(translated) == len(trains) * 2 and all(path.endswith("valid.en") for path in translated)
    searches = [(params["alpha"], params["early_stop"]) for name, params in steps if name == "translate"]
    assert set(searches) == {(0.6, "patience"), (1.4, "exact")}
    assert scored and all(path.endswith("valid.de") for path in scored) and "test" not in done.stdout


def test_the_sweeps_record_is_kept_after_every_run_and_renders_its_table(tmp_path) -> None:
    """The record a sweep writes (after each run, so a stopped sweep keeps what it measured): every run's score,
    each setting's mean and spread over its seeds, the best by mean dev BLEU, rendered by docs/tables.py."""
    import json

    from tests.support.recipes import load_script

    sweep = load_script("recipes/multi30k-en-de/sweep.py")
    tables = load_script("docs/tables.py")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "valid.de").write_text("ein Hund .\nzwei Katzen laufen\n", encoding="utf-8")
    argv = ["--steps", "5", "--max-tokens", "768", "--warmup", "400", "600", "--dropout", "0", "--seeds", "1", "2"]
    args = sweep.parse_args([*argv, "--search", "0.6:patience", "--record", str(tmp_path / "r.json")])
    scores = {"a": [20.0, 21.0], "b": [22.0]}
    runs = [{"dev_bleu": 20.0}, {"dev_bleu": 22.0}, {"dev_bleu": 21.0}]
    results = sweep.write(sweep.Record(["sweep.py"]), args, runs, scores, tmp_path)
    assert results["best"] == "b" and results["runs"] == "3 of 4" and results["by_setting"]["a"]["spread"] == 1.0
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["renderer"] == "docs/tables.py::quick_sweep" and data["passes"] == runs
    assert (data["sentences"], data["words"]) == (2, 6)
    table = tables.quick_sweep(data["rows"], data["sentences"], data["words"]).splitlines()
    assert table[2] == "| **b** | 22.00 | 22.00 | 0.00 |" and table[3] == "| a | 20.00, 21.00 | 20.50 | 1.00 |"


def test_a_token_budget_gives_larger_batches_fewer_updates() -> None:
    """--tokens: every setting trains on the same tokens (the recipe's budget is time, in which a larger batch makes
    fewer updates too), where --steps would give larger batches more training."""
    argv = ["--tokens", "3072", "--max-tokens", "768", "1024", "--warmup", "400", "--dropout", "0", "--seeds", "1"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / "multi30k-en-de" / "sweep.py"), *argv, "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    trains = [
        params for name, params in map(parse_mtkit, map(shlex.split, done.stdout.splitlines())) if name == "train"
    ]
    assert {(p["max_tokens"], p["max_steps"]) for p in trains} == {("768", 4), ("1024", 3)}
