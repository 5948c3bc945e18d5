"""The command line's shape: every subcommand with help and an example; the README and CI agree."""

import os
import re
import subprocess
import sys
from pathlib import Path

import mtkit

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = ["prepare", "clean", "bpe", "train", "average", "translate", "score", "export", "serve", "plot", "info"]


def test_help_lists_every_subcommand(cli):
    result = cli("--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert re.search(rf"^\W*{command}\s", result.stdout, re.M), command


def test_every_subcommand_has_help_with_an_example(cli):
    for command in COMMANDS:
        result = cli(command, "--help")
        assert result.returncode == 0, result.stderr
        assert f"mtkit {command}" in result.stdout and "Example" in result.stdout


# Runs `mtkit ARGS` in a fresh Python and says, last on stderr, whether torch was imported.
WITHOUT_TORCH = """
import runpy, sys
sys.argv = ["mtkit", *sys.argv[1:]]
try:
    runpy.run_module("mtkit", run_name="__main__")
except SystemExit:
    pass
print("torch imported:", "torch" in sys.modules, file=sys.stderr)
"""


def test_help_and_score_answer_without_importing_torch(tmp_path):
    """Importing torch costs 2-3 s on a small machine: `mtkit --help`, every command's --help and `mtkit score`
    do without it (importing mtkit/export.py for its options took 3.2 s a `mtkit --help`, 0.4 s without)."""
    (tmp_path / "hyp.txt").write_text("ein Hund läuft .\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("ein Hund rennt .\n", encoding="utf-8")
    runs = [["--help"], *([command, "--help"] for command in COMMANDS), ["score", "hyp.txt", "--ref", "ref.txt"]]
    for args in runs:
        done = subprocess.run(
            [sys.executable, "-c", WITHOUT_TORCH, *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, as tests/support/cli.py's run_cli
            timeout=120,
        )
        assert done.stderr.splitlines()[-1] == "torch imported: False", (args, done.stderr)
    assert "BLEU" in done.stdout


def test_version(cli):
    result = cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"mtkit {mtkit.__version__}"


def test_unknown_command_is_a_usage_error_without_traceback(cli):
    result = cli("transmogrify")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_ci_runs_exactly_the_readme_test_command_and_installs_torch_first():
    readme = (ROOT / "README.md").read_text()
    blocks = [b.strip() for b in re.findall(r"```bash\n(.*?)```", readme, re.S)]
    tests = [b for b in blocks if "pytest" in b]
    assert len(tests) == 1, "the README shows one test command"
    test_command = tests[0]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines
    # CI installs torch before mtkit, as the README's install lines do: any looser torch requirement resolved first
    # would take the build pip finds first (on Linux, from the default index, the CUDA one).
    installs = [line for line in ci_lines if line.startswith("python -m pip install")]
    assert "torch==" in installs[1] and "-e" in installs[2], installs
    quickstart = next(b for b in blocks if "bash recipes/" in b)
    assert quickstart.startswith("pip install torch==") and "--index-url https://download.pytorch.org/whl/cpu" in (
        quickstart
    ), "the README's quickstart installs the CPU build of torch first, from PyTorch's own index"


def test_one_log_handler_and_ranks_above_0_only_warn(monkeypatch, capsys):
    import logging

    from mtkit.cli.app import setup_logging

    log = logging.getLogger("mtkit.some.module")
    root = logging.getLogger()
    try:
        for rank in ("0", "3"):
            monkeypatch.setenv("RANK", rank)
            setup_logging(logging.INFO)
            setup_logging(logging.INFO)  # twice: still one handler
            assert sum(getattr(h, "_mtkit", False) for h in root.handlers) == 1
            log.info("progress %d", 1)
            log.warning("trouble")
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 3 and "progress 1" in lines[0] and "trouble" in lines[1]
        assert "[rank 3] trouble" in lines[2]
    finally:
        for handler in [h for h in root.handlers if getattr(h, "_mtkit", False)]:
            root.removeHandler(handler)
