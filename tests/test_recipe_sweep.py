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
