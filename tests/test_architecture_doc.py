"""docs/architecture.md is a map that is checked: its layer table and diagram are what docs/gen_architecture.py
makes from pyproject.toml's import-linter contract (which `lint-imports` enforces), the package docstrings point
there instead of copying the order, and each row of the paper table names code that exists and cites its section."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

import mtkit.kernels
import mtkit.runtime

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
SECTIONS = {"3.1", "3.2.1", "3.2.2", "3.3", "3.4", "3.5", "5.1", "5.3", "5.4", "6.1"}


def gen():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_architecture
    finally:
        sys.path.remove(str(ROOT / "docs"))
    return gen_architecture


def test_the_layer_table_and_diagram_are_the_import_linter_contract() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert gen().render(text) == text, "run `python docs/gen_architecture.py` and commit docs/architecture.md"


def test_the_generated_table_follows_a_changed_contract(monkeypatch) -> None:
    module = gen()
    monkeypatch.setattr(module, "layers", lambda: [(["cli"], "|"), (["train", "decode"], "|")])
    table = module.generate()
    assert (
        "| 1 | `mtkit.cli` |" in table and "| 2 | `mtkit.train`, `mtkit.decode` (independent of each other) |" in table
    )
    assert "mtkit.cli\n  └─> mtkit.train | mtkit.decode" in table


@pytest.mark.parametrize("package", [mtkit.runtime, mtkit.kernels], ids=lambda p: p.__name__)
def test_package_docstrings_point_at_the_map_instead_of_copying_it(package) -> None:
    doc = package.__doc__ or ""
    assert "docs/architecture.md" in doc
    assert not re.search(r"mtkit\.\w+ > mtkit\.\w+", doc), "the layer order lives in pyproject.toml and the page"


def paper_rows() -> list[tuple[str, str, str, list[str]]]:
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## The paper, section by section") :].split("\n\n")[2]
    rows = []
    for line in table.splitlines()[2:]:
        section, _, code = [c.strip() for c in line.strip("|").split(" | ")]
        path, symbols = code.strip("`").split(":")
        rows.append((section, line, path, [s.strip() for s in symbols.split(",")]))
    return rows


def test_the_paper_table_has_a_row_for_every_section() -> None:
    assert {section for section, *_ in paper_rows()} == SECTIONS


@pytest.mark.parametrize("row", paper_rows(), ids=lambda r: f"{r[0]}:{r[2]}")
def test_each_paper_row_names_code_that_exists_and_cites_its_section(row) -> None:
    section, line, path, symbols = row
    assert (ROOT / path).is_file(), line
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    cites = re.compile(rf"(?<![\d.]){re.escape(section)}(?![\d])")
    for name in symbols:
        assert hasattr(module, name), f"{path} has no {name}"
        docs = (inspect.getdoc(getattr(module, name)) or "") + (module.__doc__ or "")
        assert cites.search(docs), f"{path}:{name} (or its module) does not cite section {section}"
