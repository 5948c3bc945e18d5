"""Every headline figure comes from docs/figures.yaml: the pages' tables are what docs/gen_figures.py writes, and
wherever README.md, docs/*.md, the recipes' READMEs or CHANGELOG.md's Unreleased section state a measurement in
prose (the measurement's `said` patterns), they state the same figure."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
try:
    import gen_figures
finally:
    sys.path.remove(str(ROOT / "docs"))


def prose_pages() -> dict[str, str]:
    pages = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "recipes").glob("*/README.md")),
    ]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in pages}
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    texts["CHANGELOG.md (Unreleased)"] = changelog.split("\n## [", 2)[1] if "\n## [" in changelog else changelog
    return texts


@pytest.mark.parametrize("page", list(gen_figures.PAGES), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_tables_are_what_figures_yaml_gives(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert gen_figures.render(page, text) == text, "run `python docs/gen_figures.py` and commit the pages"


def test_every_measurement_has_its_machine_command_and_date() -> None:
    for m in gen_figures.measurements():
        assert m["figure"] in m["headline"], m["id"]
        for run in m["runs"]:
            assert run["machine"] and run["command"] and run["date"] and run["result"], (m["id"], run)


def stated(texts: dict[str, str]) -> dict[str, set[tuple[str, str]]]:
    """{measurement id: {(figure, page)}} for every statement the `said` patterns find."""
    found: dict[str, set[tuple[str, str]]] = {}
    for m in gen_figures.measurements():
        for pattern in m["said"]:
            for name, text in texts.items():
                for match in re.finditer(pattern, text):
                    found.setdefault(m["id"], set()).add((match[1], name))
    return found


def test_no_two_pages_state_different_figures_for_one_measurement() -> None:
    figures = {m["id"]: m["figure"] for m in gen_figures.measurements()}
    found = stated(prose_pages())
    wrong = [
        f"{page}: {figure} (figures.yaml: {figures[mid]})"
        for mid, hits in found.items()
        for figure, page in hits
        if figure != figures[mid]
    ]
    assert not wrong, "figures that disagree with docs/figures.yaml:\n" + "\n".join(sorted(wrong))
    assert {"multi30k", "quick", "train-speed", "decode-speed"} <= set(found), "the patterns find the tables at least"


def test_a_page_with_an_older_figure_fails() -> None:
    texts = {
        "README.md": "(12-25 test BLEU after its 3 minutes of training)",
        "docs/index.md": "**38.5** sacreBLEU (`small`, 25 minutes",
    }
    found = stated(texts)
    assert ("12-25", "README.md") in found["quick"] and ("38.5", "docs/index.md") in found["multi30k"]


def test_the_results_tables_are_what_their_json_gives() -> None:
    pages = gen_figures.table_pages()
    assert ROOT / "docs" / "distill.md" in pages and ROOT / "recipes" / "multi30k-distill" / "README.md" in pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert gen_figures.render_tables(text) == text, f"run `python docs/gen_figures.py` ({page.relative_to(ROOT)})"


def test_a_results_table_edited_by_hand_is_rewritten_and_an_unknown_one_refused() -> None:
    page = (ROOT / "docs" / "distill.md").read_text(encoding="utf-8")
    edited = page.replace("| 7,332 |", "| 9,999 |", 1)
    assert edited != page and gen_figures.render_tables(edited) == page
    region = f"{gen_figures.table_begin('no-such-run')}\n| x |\n<!-- table:no-such-run end -->"
    with pytest.raises(SystemExit, match="no-such-run"):
        gen_figures.render_tables(region)
    with pytest.raises(SystemExit, match="well-formed"):
        gen_figures.render_tables(region.replace("end -->", "ends -->"))
    with pytest.raises(SystemExit, match="well-formed"):
        gen_figures.render_tables(region.rsplit("\n", 1)[0])  # no end marker
