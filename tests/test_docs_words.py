"""The pages say what a user can follow: no issue numbers, no bookkeeping of the project's own work, no path outside
the repository; tables that show what they mean on the site; the FAQ's errors as mtkit prints them.

The pages are README.md, docs/**/*.md, the recipes' READMEs and CHANGELOG.md's Unreleased section (released
sections are history as it was released). The rule for `#`: a bare `#N` is this project's tracker and is refused;
another project's issue or pull request is written with its name before the `#` (`fairseq#435`) or as a link.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mtkit.cli import app
from tests.support.cli import ROOT, run_cli

RULES = {
    "an issue of this project": r"(?i)\bissues? \d|\bissue's\b|\b(?:the|this) issue\b",
    # (`&#160;` is an HTML entity, not a number)
    "a bare #N (write another project's as owner#N or a link)": r"(?<![\w/.&-])#\d+",
    "the project's work sessions": r"(?i)(?<!ssh )(?<!login )\bsessions?\b",
    "a path outside the repository": r"(?:\.\./)+(?:shared|peers)\b",
    "the project's own machines": r"(?i)\b(?:this|the) project's (?:own )?(?:machines?|CPUs?|Xeon|EPYC)\b"
    r"|\bmachines? (?:the project|we) (?:had|has|have)\b|\bat hand\b",
    "the project's bookkeeping": r"(?i)\bmerged main\b|\bclosing note\b",
    "the workplace's terms": r"(?i)\b(?:is|are|was|were) lent\b|\blent (?:GPU|machine)|\bshared assets\b"
    r"|\bcannot be fetched here\b|\bnot (?:run|measured) here\b",
}


def pages() -> dict[str, str]:
    paths = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "recipes").glob("*/README.md")),
        ROOT / "bench" / "peers" / "README.md",
        ROOT / "mtkit" / "data" / "multi30k" / "README.md",
        ROOT / "docs" / "figures.yaml",  # the benchmarks page's tables are written from it
    ]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    texts["CHANGELOG.md (Unreleased)"] = changelog.split("\n## [", 2)[1]
    return texts


def offences(texts: dict[str, str]) -> list[str]:
    found = []
    for name, text in texts.items():
        for number, line in enumerate(text.splitlines(), 1):
            for why, pattern in RULES.items():
                found += [f"{name}:{number}: {why}: {m[0]!r}" for m in re.finditer(pattern, line)]
    return found


def test_no_page_carries_issue_numbers_bookkeeping_or_paths_outside_the_repository() -> None:
    found = offences(pages())
    assert not found, "say what a reader can follow instead:\n" + "\n".join(found)


def test_the_rules_catch_what_they_are_for_and_pass_what_is_legitimate() -> None:
    bad = {
        "a": "as issue 45 found",
        "b": "(the issue's goal)",
        "c": "finding #37.8",
        "d": "in the nineteenth session",
        "e": "--mirror ../shared/data/multi30k-en-de",
        "f": "the Xeon of this project's sessions",
        "h": "on the machines the project had at hand",
        "g": "on the merged main",
        "i": "so the call still works when a GPU is lent",
        "j": "the model file of the shared assets",
        "k": "a pretrained model, which cannot be fetched here",
    }
    assert [k for k, line in bad.items() if not offences({k: line})] == []
    good = {
        "a": "([fairseq#435](https://github.com/facebookresearch/fairseq/issues/435))",
        "b": "SIGHUP (the terminal or ssh session closed)",
        "c": "[above](#a-compiled-decoder-step-not-kept), `--mirror DIR`, /mnt/shared/data",
    }
    assert not offences(good)


def test_a_code_span_in_a_site_table_has_no_escaped_pipe() -> None:
    """Python-Markdown keeps a `|` inside a code span in its cell, and shows a `\\|` there with its backslash."""
    found = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            spans = line.split("`")[1::2] if line.lstrip().startswith("|") else []
            found += [f"{page.relative_to(ROOT)}:{number}: `{span}`" for span in spans if "\\|" in span]
    assert not found, "write `a|b` in a code span of a table, not `a\\|b`:\n" + "\n".join(found)


def rows_github_cuts(text: str) -> list[int]:
    """Lines of a table row with another number of cells than its header as GitHub reads them: GitHub splits a
    row at every unescaped `|`, inside a code span too (the site does not, so a page needs neither: no `|` in a
    table's code span, see above)."""
    cut, header, fenced = [], None, False
    for number, line in enumerate(text.splitlines(), 1):
        fenced = fenced != line.startswith("```")
        if fenced or not line.startswith("|"):
            header = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if header is None:
            header = cells
        elif cells != header:
            cut.append(number)
    return cut


def test_no_table_row_falls_apart_on_github() -> None:
    found = [f"{name}:{number}" for name, text in pages().items() for number in rows_github_cuts(text)]
    assert not found, "table rows GitHub cuts at a `|` (in a code span: rephrase; in text: `\\|`):\n" + "\n".join(found)
    assert rows_github_cuts("| a | b |\n|---|---|\n| `x|y` | z |\n") == [3]


# ---- the FAQ's errors -----------------------------------------------------------------------------------------


def faq_quotes() -> list[str]:
    """The errors the FAQ quotes: each entry's bold code span (double backticks where the message holds one)."""
    text = (ROOT / "docs" / "faq.md").read_text(encoding="utf-8")
    return [m[2] for m in re.finditer(r"^\*\*(`+) ?(?!`)((?:(?!\1).)+?) ?\1\*\*", text, re.M)]


def message_templates() -> list[tuple[str, int]]:
    """(regex, literal characters) of every string in mtkit's code; an f-string's fields match any text."""
    found = []
    for path in (ROOT / "mtkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                parts = [
                    (re.escape(v.value), len(v.value)) if isinstance(v, ast.Constant) else (".+?", 0)
                    for v in node.values
                ]
                found.append(("".join(p for p, _ in parts), sum(n for _, n in parts)))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((re.escape(node.value), len(node.value)))
    return found


def produced(tmp_path: Path) -> list[str]:
    """What mtkit prints for the FAQ's commonest mistakes, made here with the FAQ's own paths."""
    (tmp_path / "data" / "multi30k-en-de" / "raw").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    runs = [
        run_cli("bpe", "data/multi30k-en-de", cwd=tmp_path / "empty"),
        run_cli("train", "data/multi30k-en-de", "--out", "runs/small", cwd=tmp_path),
        run_cli("translate", "-m", "runs/small/averaged.pt", input="a\n", cwd=tmp_path),
        run_cli("train", "data/multi30k-en-de", "--lr", "1", cwd=tmp_path),
    ]
    assert all(r.returncode != 0 for r in runs)
    return [line.removeprefix("mtkit: error: ").strip() for r in runs for line in r.stderr.splitlines()]


def test_every_error_the_faq_quotes_is_one_mtkit_prints(tmp_path: Path) -> None:
    """A quote is checked against the message mtkit printed for the same mistake, or else against the strings of
    mtkit's code, whose f-string fields stand for the quote's example values; `...` in a quote elides text."""
    quotes = faq_quotes()
    assert len(quotes) >= 8 and any("does not exist" in q for q in quotes), "the collector finds the FAQ's errors"
    said = produced(tmp_path)
    templates = message_templates()
    stale = []
    for quote in quotes:
        elided = re.escape(quote).replace(re.escape("..."), ".*?")
        if any(re.fullmatch(elided, line) for line in said):
            continue
        # A string of the code that makes this sentence, with more of it fixed text than example values.
        if not any(literal >= len(quote) / 2 and re.fullmatch(rx, quote, re.S) for rx, literal in templates):
            stale.append(quote)
    assert not stale, "FAQ quotes that mtkit no longer prints (copy them from what it says now):\n" + "\n".join(stale)


def test_the_faq_check_refuses_a_stale_quote(tmp_path: Path) -> None:
    templates = message_templates()
    stale = "runs/small/.train.lock is held by pid 1234 on node3."  # what the FAQ quoted before the message changed
    assert not any(lit >= len(stale) / 2 and re.fullmatch(rx, stale, re.S) for rx, lit in templates)


@pytest.mark.parametrize("name", ["translate", "serve"])
def test_the_model_options_help_names_hub_models(name: str) -> None:
    import typer

    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    model = next(p for p in command.params if "--model" in p.opts)
    assert "Hugging Face Hub" in (model.help or ""), model.help
