"""The reference pages say what the code does: docs/environment.md names every environment variable mtkit reads,
and the Python API reference's config tables (docs/hooks.py) list every field with its default and help."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from mtkit.config import DecodeConfig, ModelConfig, SamplingConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def variables_read() -> set[str]:
    """Names the code reads from the environment: `os.environ.get("X")`, `os.environ["X"]`, and the `*_ENV`
    constants those reads use."""
    names = set()
    for path in [*(ROOT / "mtkit").rglob("*.py"), ROOT / "recipes" / "slurm" / "train.sbatch"]:
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"os\.environ(?:\.get)?[\[(]\"([A-Z][A-Z0-9_]*)\"", text))
        names |= set(re.findall(r"^[A-Z_]*ENV\w* = \"([A-Z][A-Z0-9_]*)\"", text, re.M))
        names |= set(re.findall(r"\$\{?(MTKIT_[A-Z0-9_]+)", text))
        for group in re.findall(r"^[A-Z_]*ENV\w* = \(([^)]*)\)", text, re.M):
            names |= set(re.findall(r"\"([A-Z][A-Z0-9_]*)\"", group))
        for group in re.findall(r"for name in \(([^)]*)\):\n\s+value = os\.environ", text):
            names |= set(re.findall(r"\"([A-Z][A-Z0-9_]*)\"", group))
    return names


def test_every_environment_variable_mtkit_reads_is_on_the_page() -> None:
    page = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    names = variables_read()
    assert {"MTKIT_CACHE", "MTKIT_CPU_MATMUL", "MTKIT_SERVE_API_KEY", "WORLD_SIZE", "GLIBC_TUNABLES"} <= names
    missing = sorted(n for n in names if f"`{n}`" not in page)
    assert not missing, f"docs/environment.md does not list {missing}"


@pytest.mark.parametrize("cls", [ModelConfig, TrainConfig, DecodeConfig, SamplingConfig], ids=lambda c: c.__name__)
def test_the_api_reference_tables_show_every_field_with_default_and_help(cls: type) -> None:
    pytest.importorskip("mkdocs")
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    rows = hooks.field_table(f"{cls.__module__}.{cls.__name__}").splitlines()[2:]
    fields = dataclasses.fields(cls)
    assert len(rows) == len(fields)
    for row, f in zip(rows, fields):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[0] == f"`{f.name}`" and cells[2] == f"`{f.default!r}`", row
        if "help" in f.metadata:
            assert cells[3] == f"`--{f.name.replace('_', '-')}`", row
            assert f.metadata["help"] in row.replace("\\|", "|"), row
    helped = [r for r in rows if r.rstrip(" |").split(" | ")[-1].strip()]
    assert len(helped) >= len(fields) - 1, "every field says what it is (its help, or its comment in the source)"
