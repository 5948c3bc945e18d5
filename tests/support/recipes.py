"""Helpers for the recipe tests: run a recipe's run.sh, and parse the commands its dry run prints
with mtkit's own parsers (the typer app's click command, torchrun's argument parser), running nothing;
and load a script of the repository (a recipe's results.py, a bench) as a module."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import typer

from mtkit.cli import app
from mtkit.cli.options import build
from mtkit.config import DecodeConfig
from tests.support.cli import ROOT


def run_recipe(recipe: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "recipes" / recipe / "run.sh"), *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def dry_run(recipe: str, *args: str, cwd: Path, watch: Path | None = None, made: set[str] | None = None) -> list[str]:
    """The lines `run.sh ARGS --dry-run` prints, after checking that it succeeded and created nothing: the recipe's
    folder is unchanged and `watch` (default `cwd`) holds only `made` (what the test itself put there)."""
    folder = ROOT / "recipes" / recipe
    before = tree(folder)
    done = run_recipe(recipe, *args, "--dry-run", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert tree(folder) == before and tree(watch or cwd) == (made or set()), "a dry run created files"
    return done.stdout.splitlines()


def load_script(relative: str) -> ModuleType:
    """The Python script at ROOT / `relative` (not a package module), imported as a module of its own, with its
    directory on sys.path as when it runs (bench/ scripts import bench/harness.py)."""
    path = ROOT / relative
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


def parse_mtkit(argv: list[str]) -> tuple[str, dict]:
    """Parse `mtkit SUBCOMMAND ARGS` with mtkit's own click command, running nothing; returns its params."""
    assert argv[0] == "mtkit", argv
    group = typer.main.get_command(app)
    name, rest = argv[1], argv[2:]
    assert name in group.commands, f"unknown subcommand {name!r}"
    ctx = group.commands[name].make_context(name, list(rest), resilient_parsing=False)
    assert not ctx.args, f"mtkit {name} left arguments unparsed: {ctx.args}"
    return name, ctx.params


def decode_config(params: dict) -> DecodeConfig:
    """The decoding settings a parsed `mtkit translate` runs with: the flags given, laid over the defaults."""
    return build(DecodeConfig(), {k: v for k, v in params.items() if v is not None})


def parse_line(line: str) -> tuple[list[str], dict | None, str | None]:
    """(mtkit argv, torchrun's parsed options or None, stdout redirect target or None) of one printed line."""
    argv = shlex.split(line)
    target = None
    if ">" in argv:
        at = argv.index(">")
        assert len(argv) == at + 2, f"a redirect is the line's end: {line}"
        argv, target = argv[:at], argv[at + 1]
    if argv[0] != "torchrun":
        return argv, None, target
    from torch.distributed.run import get_args_parser

    options = get_args_parser().parse_args(argv[1:])
    assert options.module and options.training_script == "mtkit", line
    return ["mtkit", *options.training_script_args], vars(options), target
