"""Write the headline figures of README.md, docs/index.md and docs/benchmarks.md from docs/figures.yaml, and
every results table of a run from its JSON in docs/results/.

    python docs/gen_figures.py            # rewrite the tables between <!-- figures:begin --> and <!-- figures:end -->
    python docs/gen_figures.py --check    # exit 1 if a committed page differs (tests/test_docs_figures.py too)

README.md and docs/index.md show one row per measurement (its headline, machine and a link); docs/benchmarks.md
shows every run behind each headline with its machine, command and date. Change a figure in docs/figures.yaml,
never in a page.

A whole run's table (a recipe's results.py prints it, and its rows as JSON on the last line) is kept as
docs/results/NAME.json: the rows as printed, the command, machine and date, and `renderer`, the script whose
`table(rows, sentences, words)` wrote it. Any page (README.md, docs/, a recipe's README) shows it between
`<!-- table:NAME begin ... -->` and `<!-- table:NAME end -->`, rendered by that same function, so a table that two
pages show is one file and reads the same in both.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "figures.yaml"
BEGIN, END = (
    "<!-- figures:begin (docs/gen_figures.py writes this table from docs/figures.yaml) -->",
    "<!-- figures:end -->",
)
REGION = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
RESULTS = ROOT / "docs" / "results"
TABLE = re.compile(
    r"<!-- table:(?P<name>[\w-]+) begin \(docs/gen_figures.py writes this table from "
    r"docs/results/(?P=name)\.json\) -->\n.*?<!-- table:(?P=name) end -->",
    re.S,
)


def table_begin(name: str) -> str:
    return f"<!-- table:{name} begin (docs/gen_figures.py writes this table from docs/results/{name}.json) -->"


def measurements() -> list[dict[str, Any]]:
    import yaml

    return list(yaml.safe_load(DATA.read_text(encoding="utf-8"))["measurements"])


def _cell(text: str, site: bool = True) -> str:
    """A table cell: `|` escaped as `\\|`, except inside code spans on a page of the site, where Python-Markdown
    keeps a pipe in the cell and would show the backslash; GitHub's tables (README.md) need it escaped there too."""
    parts = str(text).strip().split("`")
    return "`".join(p if (site and i % 2) else p.replace("|", "\\|") for i, p in enumerate(parts))


def summary(link_prefix: str, site: bool = True) -> str:
    rows = ["| task | mtkit | machine | details |", "|---|---|---|---|"]
    for m in measurements():
        name = m["link"].split("#")[0].removesuffix(".md")
        rows.append(
            f"| {_cell(m['task'], site)} | {_cell(m['headline'], site)} | {_cell(m['machine'], site)} | "
            f"[{name}]({link_prefix}{m['link']}) |"
        )
    return "\n".join(rows)


def runs() -> str:
    rows = ["| measurement | machine | command | date | result |", "|---|---|---|---|---|"]
    for m in measurements():
        for run in m["runs"]:
            rows.append(
                f"| {_cell(m['task'])} | {_cell(run['machine'])} | {_cell('`' + run['command'] + '`')} | "
                f"{_cell(run['date'])} | {_cell(run['result'])} |"
            )
    return "\n".join(rows)


PAGES = {
    ROOT / "README.md": lambda: summary("docs/", site=False),
    ROOT / "docs" / "index.md": lambda: summary(""),
    ROOT / "docs" / "benchmarks.md": runs,
}


def results_table(name: str) -> str:
    """docs/results/NAME.json's rows as its renderer's `table` writes them."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"a page shows the table {name!r}, but {path.relative_to(ROOT)} does not exist")
    run = json.loads(path.read_text(encoding="utf-8"))
    spec = importlib.util.spec_from_file_location(f"renderer_{name}", ROOT / run["renderer"])
    assert spec is not None and spec.loader is not None
    renderer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(renderer)
    return str(renderer.table(run["rows"], run["sentences"], run["words"]))


def render_tables(text: str) -> str:
    """`text` with every results-table region replaced by what its docs/results/NAME.json gives; a begin marker
    without its well-formed region (a misspelt marker, a missing end) is an error, not a table left as it was."""
    regions, begins, ends = (len(re.findall(p, text)) for p in (TABLE, r"<!-- table:\S+ begin", r"<!-- table:\S+ end"))
    if not regions == begins == ends:
        raise SystemExit("a results-table marker has no well-formed region: see table_begin() and its end marker")
    return TABLE.sub(
        lambda m: f"{table_begin(m['name'])}\n{results_table(m['name'])}\n<!-- table:{m['name']} end -->", text
    )


def table_pages() -> list[Path]:
    """The pages that show a results table."""
    pages = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "recipes").glob("*/README.md")),
    ]
    return [p for p in pages if "<!-- table:" in p.read_text(encoding="utf-8")]


def render(page: Path, text: str) -> str:
    """`text` with its figures region replaced by what figures.yaml gives; a page without the region is an error."""
    if not REGION.search(text):
        raise SystemExit(f"{page.relative_to(ROOT)} has no {BEGIN} ... {END} region")
    return REGION.sub(lambda _: f"{BEGIN}\n{PAGES[page]()}\n{END}", text, count=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page differs, write nothing")
    args = parser.parse_args()
    stale = []
    for page in dict.fromkeys([*PAGES, *table_pages()]):
        text = page.read_text(encoding="utf-8")
        new = render_tables(render(page, text) if page in PAGES else text)
        if new != text:
            stale.append(str(page.relative_to(ROOT)))
            if not args.check:
                page.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"stale figures in {', '.join(stale)}: run `python docs/gen_figures.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
