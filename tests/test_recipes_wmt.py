"""The WMT14 recipes' dry runs: every printed command is one mtkit's own parsers accept, and nothing is created.

Nothing is trained or run: each `mtkit ...` line (also after `torchrun ... -m mtkit`) is parsed by
the typer app's click command with `make_context`, and each torchrun line by torchrun's own parser.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import types
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from mtkit.config import get_preset
from mtkit.train import probe
from mtkit.train.distributed import World
from tests.support.recipes import ROOT, decode_config, dry_run, parse_line, parse_mtkit, run_recipe

SPLIT = types.SimpleNamespace(src_sizes=np.array([30, 120]), tgt_sizes=np.array([35, 110]))  # what the probe reads

RECIPES = {
    "wmt14-en-de": ("de", 37000, {"base": 0.1, "big": 0.3}),
    "wmt14-en-fr": ("fr", 32000, {"base": 0.1, "big": 0.1}),
}
MASTER = ["--master", "10.0.0.7:29500"]
VARIANTS = {  # name: (args, world size, node rank)
    "base": (["base"], 1, 0),
    "big": (["big"], 1, 0),
    "base-8gpu": (["base", "--gpus", "8"], 8, 0),
    "big-8gpu": (["big", "--gpus", "8"], 8, 0),
    "big-2node-rank0": (["big", "--gpus", "8", "--nodes", "2", "--node-rank", "0", *MASTER], 16, 0),
    "big-2node-rank1": (["big", "--gpus", "8", "--nodes", "2", "--node-rank", "1", *MASTER], 16, 1),
    "base-3gpu": (["base", "--gpus", "3"], 3, 0),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("recipe", RECIPES)
def test_dry_run_commands_parse_and_follow_the_paper(recipe: str, variant: str, tmp_path: Path) -> None:
    args, world, node_rank = VARIANTS[variant]
    tgt, vocab, dropout = RECIPES[recipe]
    preset = args[0]
    work = tmp_path / "work"
    work.mkdir()
    data, out, mirror = tmp_path / "da ta", tmp_path / "o'ut", tmp_path / "mir ror"  # quoting must hold
    paths = ["--data", str(data), "--out", str(out), "--mirror", str(mirror)]
    printed = dry_run(recipe, *args, *paths, cwd=work, watch=tmp_path, made={"work"})
    commands = [line for line in printed if line and not line.startswith("#")]

    parsed = []
    for line in commands:
        argv, torchrun, target = parse_line(line)
        name, params = parse_mtkit(argv)
        parsed.append((name, params, torchrun, target))
    names = [p[0] for p in parsed]
    if node_rank == 0:
        assert names == ["prepare", "bpe", "train", "average", "translate", "score", "translate", "score"]
    else:
        assert names == ["train"], "only node 0 prepares, averages, translates and scores"
        assert printed[0].startswith(f"# node {node_rank} waits for ")
    steps = {name: params for name, params, _, _ in parsed}

    if node_rank == 0:
        assert steps["prepare"]["name"] == recipe and steps["prepare"]["out"] == data
        assert list(steps["prepare"]["mirror"]) == [mirror]
        assert list(steps["bpe"]["data_dirs"]) == [data] and steps["bpe"]["vocab_size"] == vocab

    train = steps["train"]
    paper_steps, paper_last = {"base": (100_000, 5), "big": (300_000, 20)}[preset]
    assert (train["data"], train["out"], train["preset"]) == (data, out / "run", preset)
    assert (train["max_steps"], train["keep_last"], train["save_every_minutes"]) == (paper_steps, paper_last, 10)
    assert train["dropout"] == dropout[preset] and train["precision"] == "auto"  # measured on the GPU at start
    assert train["update_freq"] is None, "the trainer picks --update-freq for the world size"
    # --max-tokens auto: whatever a GPU fits, the trainer's own arithmetic (the probe's rule, then
    # TrainConfig.for_world) must land on the paper's ~25,000 tokens a side.
    assert train["max_tokens"] == "auto"
    auto = dataclasses.replace(get_preset(preset).train, max_tokens=train["max_tokens"], length_buckets="ladder")
    gpu = World(0, world, 0, torch.device("cuda"))
    for limit in (2_000, 9_000, 30_000):
        fits = lambda rows, length, limit=limit: rows * length <= limit  # noqa: E731
        with mock.patch.object(probe.dist, "all_gather_objects", lambda found, w: [found] * w.size):
            cfg = probe.resolve(auto, None, None, SPLIT, gpu, 1024, fits).cfg.for_world(world)
        assert 25_000 <= cfg.update_freq * cfg.max_tokens * world < 25_000 + world * cfg.update_freq  # rounding up
        assert cfg.max_tokens <= limit

    torchrun = parsed[names.index("train")][2]
    if world == 1:
        assert torchrun is None
    else:
        assert int(torchrun["nproc_per_node"]) == world // int(str(torchrun["nnodes"]).split(":")[0])
        if "--nodes" in args:
            assert (torchrun["nnodes"], torchrun["node_rank"]) == ("2", node_rank)
            assert (torchrun["master_addr"], torchrun["master_port"]) == ("10.0.0.7", 29500)
        else:
            assert torchrun["standalone"]
    if node_rank:
        return

    assert [str(p) for p in steps["average"]["paths"]] == [str(out / "run")] and steps["average"]["last"] == paper_last
    assert str(steps["average"]["output"]) == str(out / "model.pt")
    pairs = [(parsed[i], parsed[i + 1]) for i in (4, 6)]
    models = []
    for (_, tr, _, _), (_, sc, _, target) in pairs:
        dc = decode_config(tr)
        assert (dc.beam, dc.alpha, dc.lenpen, dc.max_len_a, dc.max_len_b) == (4, 0.6, "gnmt", 1, 50)
        assert tr["input"] == str(data / "raw" / "test.en") and sc["hyp"] == tr["output"]
        assert sc["ref"] == [str(data / "raw" / f"test.{tgt}")] and sc["paper_bleu"] and sc["lang"] == tgt
        assert target is not None and Path(target).parent == out
        models.extend(tr["model"])  # -m is repeatable (ensembles): a list
    assert models == [str(out / "run" / "checkpoint_last.pt"), str(out / "model.pt")]


@pytest.mark.parametrize("recipe", RECIPES)
def test_default_paths_stay_in_the_recipe_folder_and_dry_run_creates_nothing(recipe: str, tmp_path: Path) -> None:
    folder = ROOT / "recipes" / recipe
    train = next(shlex.split(line) for line in dry_run(recipe, "big", cwd=tmp_path) if line.startswith("mtkit train"))
    _, params = parse_mtkit(train)
    assert params["data"] == folder / "out" / "data" and params["out"] == folder / "out" / "big" / "run"


def test_a_given_max_tokens_replaces_auto(tmp_path: Path) -> None:
    printed = dry_run("wmt14-en-fr", "big", "--max-tokens", "5000", cwd=tmp_path)
    train = next(shlex.split(line) for line in printed if line.startswith("mtkit train"))
    assert parse_mtkit(train)[1]["max_tokens"] == "5000"  # the option is text: TrainConfig reads the number


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "name the model"),
        (["huge"], "unknown argument 'huge'"),
        (["base", "big"], "one preset"),
        (["base", "--gpus"], "--gpus needs a value"),
        (["base", "--gpus", "0"], "--gpus must be a positive integer"),
        (["base", "--nodes", "2", "--node-rank", "0"], "--master ADDR:PORT"),
        (["base", "--nodes", "2", "--node-rank", "2", *MASTER], "0 <= R < 2"),
        (["base", "--node-rank", "1"], "for --nodes 2 or more"),
        (["base", "--precision", "fp8"], "--precision must be"),
        (["base", "--max-tokens", "lots"], "--max-tokens must be a positive integer or auto"),
    ],
)
def test_bad_arguments_are_one_clear_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = run_recipe("wmt14-en-de", *args, "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_help_names_every_option(tmp_path: Path) -> None:
    done = run_recipe("wmt14-en-fr", "--help", cwd=tmp_path)
    assert done.returncode == 0
    for option in (
        "--gpus",
        "--nodes",
        "--node-rank",
        "--master",
        "--data",
        "--out",
        "--mirror",
        "--max-tokens",
        "--precision",
        "--dry-run",
    ):
        assert option in done.stdout


FAKE_MTKIT = r"""#!/usr/bin/env bash
# Stands in for mtkit: records its arguments and writes what the real command would, instantly.
set -euo pipefail
printf '%s\n' "$*" >>"$FAKE_LOG"
value() { local want=$1; shift; while (($#)); do [[ $1 == "$want" ]] && { printf '%s' "$2"; return; }; shift; done; }
case $1 in
    --version) echo "mtkit 9.9-fake" ;;
    prepare) d=$(value --out "$@"); mkdir -p "$d/raw"; echo src >"$d/raw/test.en"; echo ref >"$d/raw/test.de" ;;
    bpe) echo {} >"$2/bpe.json" ;;
    train) r=$(value --out "$@"); mkdir -p "$r"; touch "$r/checkpoint_last.pt"
        printf '%s\n' '{"event": "start", "effective_batch": "7 x 3,572 tokens x 1 rank(s) = up to 25,004"}' \
            '{"event": "train", "step": 100, "s_per_update": 0.125}' >"$r/metrics.jsonl" ;;
    average | translate) touch "$(value --output "$@")" ;;
    score) printf '%s\n' "BLEU = 26.10 60/30/20/10 (BP = 1.000)" "    sig-sacre" "chrF2 = 55.50" "    sig-chrf" \
        "TER = 60.00" "    sig-ter" "BLEU = 27.20 61/31/21/11 (BP = 1.000)" "    sig-paper" ;;
esac
"""


def test_a_real_run_writes_results_md(tmp_path: Path) -> None:
    """The run path itself (not only the dry run), with a stand-in mtkit that does each step instantly."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mtkit").write_text(FAKE_MTKIT)
    (bin_dir / "mtkit").chmod(0o755)
    log, out = tmp_path / "calls.log", tmp_path / "out dir"
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG": str(log)}
    done = subprocess.run(
        [
            "bash",
            str(ROOT / "recipes" / "wmt14-en-de" / "run.sh"),
            "base",
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    assert calls == ["prepare", "bpe", "train", "average", "translate", "score", "translate", "score", "--version"]
    results = (out / "results.md").read_text()
    assert "| last checkpoint | 26.10 | 55.50 | 27.20 |" in results
    assert "| average of the last 5 | 26.10 | 55.50 | 27.20 |" in results
    assert "up to 25,004" in results and "0.125" in results and "mtkit 9.9-fake" in results
    assert results.count("sig-paper") == 2 and "| train |" in results
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "run",
            "model.pt",
            "newstest2014.last.de",
            "newstest2014.averaged.de",
            "scores.last.txt",
            "scores.averaged.txt",
            "results.md",
        ]
    )
