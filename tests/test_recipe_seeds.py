"""recipes/multi30k-en-de/seeds.py: the recipe once a seed, each seed's figures read from the files the recipe
wrote (model.pt's as the recipe chose it: by dev BLEU, or the last checkpoint where only it was translated), kept as
a record docs/tables.py renders."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.recipes import ROOT, load_script

seeds = load_script("recipes/multi30k-en-de/seeds.py")
tables = load_script("docs/tables.py")


def scores(bleu: float, chrf: float) -> str:
    return json.dumps({"scores": [{"name": "BLEU", "score": bleu, "signature": "nrefs:1|tok:13a"},
                                  {"name": "chrF2", "score": chrf, "signature": "nrefs:1|chrF2"}]})  # fmt: skip


def recipe_out(out: Path, files: dict[str, str], step: int) -> Path:
    (out / "run").mkdir(parents=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    log = [{"event": "start", "precision": "bf16"}, {"event": "done", "step": step, "hours": 0.05}]
    (out / "run" / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in log) + "\n", encoding="utf-8")
    return out


def test_each_seed_is_the_recipe_itself_with_its_own_out(tmp_path: Path) -> None:
    argv = [sys.executable, str(ROOT / "recipes" / "multi30k-en-de" / "seeds.py"), "--quick", "--seeds", "4", "5"]
    done = subprocess.run([*argv, "--out", str(tmp_path), "--dry-run"], capture_output=True, text=True, check=True)
    lines = [shlex.split(line) for line in done.stdout.splitlines()]
    assert [line[2:] for line in lines] == [
        ["--quick", "--seed", "4", "--out", str(tmp_path / "seed-4")],
        ["--quick", "--seed", "5", "--out", str(tmp_path / "seed-5")],
    ]
    assert all(line[:2] == ["bash", str(ROOT / "recipes" / "multi30k-en-de" / "run.sh")] for line in lines)


def test_a_seeds_figures_are_those_of_the_model_the_recipe_chose(tmp_path: Path) -> None:
    full = recipe_out(tmp_path / "full", {
        "scores.valid.last.json": scores(38.0, 60.0), "scores.test.last.json": scores(37.0, 61.0),
        "scores.valid.averaged.json": scores(38.5, 60.5), "scores.test.averaged.json": scores(36.5, 60.0),
    }, step=1500)  # fmt: skip
    row = seeds.seed_row(2, full, wall_s=120.0, load=0.5)
    assert (row["model"], row["dev_bleu"], row["test_bleu"], row["test_chrf"]) == ("averaged", 38.5, 36.5, 60.0)
    assert (row["updates"], row["training_minutes"], row["recipe_minutes"], row["precision"]) == (
        1500,
        3.0,
        2.0,
        "bf16",
    )
    quick = recipe_out(tmp_path / "quick", {"scores.test.last.json": scores(21.5, 44.0)}, step=600)
    row_quick = seeds.seed_row(1, quick, wall_s=240.0, load=0.5)
    assert (row_quick["model"], row_quick["dev_bleu"], row_quick["test_bleu"]) == ("last", None, 21.5)
    table = tables.recipe_seeds([row_quick, row], 1000, 12000).splitlines()
    assert table[2] == "| 1 | 600 | 3.0 | bf16 | last checkpoint | - | 21.50 | 44.00 |"
    assert table[-1] == "| mean (spread) | | | | | | **29.00** (15.00) | 52.00 (16.00) |"
