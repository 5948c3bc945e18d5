"""Write every figure the pages show from the records under docs/results/: the headline tables of README.md,
docs/index.md and docs/benchmarks.md (each headline's values taken from its record, as docs/figures.yaml says
where), and every results table of a run.

    python docs/gen_figures.py            # rewrite the generated regions of every page
    python docs/gen_figures.py --check    # exit 1 if a committed page differs (tests/test_docs_figures.py too)

A record is the JSON a script wrote when it measured (bench/harness.py's `Record`, or a recipe's results.py for
its table): the command, the commit, the date, the machine, the settings, the raw passes. README.md and
docs/index.md show one row per headline (its figures, the machine and a link); docs/benchmarks.md shows each
headline's record: command, commit, date, machine. A page shows a whole run's table between
`<!-- table:NAME begin ... -->` and `<!-- table:NAME end -->`: rendered by the record's `renderer` (a script
whose `table(rows, sentences, words)` printed it, or `docs/tables.py::NAME` for a bench that has left) or, for
a bench's record, as its results field by field.
Change a figure by measuring again, never in a page.
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


def record(name: str) -> dict[str, Any]:
    path = RESULTS / name
    if not path.is_file():
        raise SystemExit(f"docs/figures.yaml or a page names the record {name!r}, but {path} does not exist")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def lookup(data: Any, path: str) -> Any:
    """A value of a record by a dotted path; a list of rows is indexed by a row's "name", which may hold dots
    itself (`score / length^1.4`): the shortest run of the path's parts that names a row."""
    parts = path.split(".")
    while parts:
        if isinstance(data, list):
            names = {row.get("name"): row for row in data}
            n = next(n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in names)
            data, parts = names[".".join(parts[:n])], parts[n:]
        else:
            data, parts = data[parts[0]], parts[1:]
    return data


def value(data: dict[str, Any], spec: dict[str, Any]) -> str:
    """One figure of a headline, as figures.yaml's `values` entry says: `path` (dotted, through rows by name), or
    `ratio` [path a, path b] (a / b); times `scale`; formatted by `format` (a format spec, e.g. ".2f"); from
    `record`, another record than the headline's (another seed's run of the same script), where it names one."""
    if "record" in spec:
        data = record(spec["record"])
    if "ratio" in spec:
        a, b = (float(lookup(data, path)) for path in spec["ratio"])
        number: Any = a / b
    else:
        number = lookup(data, spec["path"])
    if "scale" in spec:
        number = float(number) * float(spec["scale"])
    return format(number, spec.get("format", ""))


def headline(m: dict[str, Any]) -> str:
    data = record(m["record"])
    return str(m["headline"]).format(**{name: value(data, spec) for name, spec in m.get("values", {}).items()})


def machine(data: dict[str, Any]) -> str:
    """A record's machine in words: a string as older records give it, else CPU, flags, cores and load."""
    facts = data["machine"]
    if isinstance(facts, str):
        return facts
    flags = ", ".join(facts.get("cpu_flags") or []) or "no flags read"
    gpu = f"{facts['gpu']}, " if facts.get("gpu") else ""
    return f"{gpu}{facts['cpu']} ({flags}), {facts['cores']} cores, load {facts['load_1min']} at start"


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
            f"| {_cell(m['task'], site)} | {_cell(headline(m), site)} | {_cell(machine(record(m['record'])), site)} "
            f"| [{name}]({link_prefix}{m['link']}) |"
        )
    return "\n".join(rows)


def runs() -> str:
    rows = ["| measurement | result | command | commit | date | machine | record |", "|---|---|---|---|---|---|---|"]
    for m in measurements():
        data = record(m["record"])
        sha = (data.get("commit") or {}).get("commit", "")[:7] or "not recorded"
        link = f"[{m['record']}](results/{m['record']})"
        rows.append(
            f"| {_cell(m['task'])} | {_cell(headline(m))} | {_cell('`' + data['command'] + '`')} | {sha} | "
            f"{_cell(str(data['date'])[:10])} | {_cell(machine(data))} | {link} |"
        )
    return "\n".join(rows)


PAGES = {
    ROOT / "README.md": lambda: summary("docs/", site=False),
    ROOT / "docs" / "index.md": lambda: summary(""),
    ROOT / "docs" / "benchmarks.md": runs,
}


def results_table(name: str) -> str:
    """docs/results/NAME.json as a table: its rows as its renderer's `table` writes them, or a bench's record
    field by field."""
    run = record(f"{name}.json")
    if "renderer" not in run:
        lines = ["| | |", "|---|---|", f"| command | `{run['command']}` |", f"| date | {str(run['date'])[:10]} |"]
        lines += [f"| machine | {_cell(machine(run))} |"]
        lines += [f"| {key} | {_cell(json.dumps(v) if isinstance(v, (dict, list)) else v)} |" for key, v in
                  run["results"].items()]  # fmt: skip
        return "\n".join(lines)
    path, _, function = run["renderer"].partition("::")  # a script's `table`, or docs/tables.py::NAME
    spec = importlib.util.spec_from_file_location(f"renderer_{name}", ROOT / path)
    assert spec is not None and spec.loader is not None
    renderer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(renderer)
    return str(getattr(renderer, function or "table")(run["rows"], run["sentences"], run["words"]))


def render_tables(text: str) -> str:
    """`text` with every results-table region replaced by what its docs/results/NAME.json gives; a begin marker
    without its well-formed region (a misspelt marker, a missing end) is an error, not a table left as it was."""
    regions, begins, ends = (len(re.findall(p, text)) for p in (TABLE, r"<!-- table:\S+ begin", r"<!-- table:\S+ end"))
    if not regions == begins == ends:
        raise SystemExit("a results-table marker has no well-formed region: see table_begin() and its end marker")
    return TABLE.sub(
        lambda m: f"{table_begin(m['name'])}\n{results_table(m['name'])}\n<!-- table:{m['name']} end -->", text
    )


def all_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "recipes").glob("*/README.md"))]


def table_pages() -> list[Path]:
    """The pages that show a results table."""
    return [p for p in all_pages() if "<!-- table:" in p.read_text(encoding="utf-8")]


def render(page: Path, text: str) -> str:
    """`text` with its figures region replaced by what the records give; a page without the region is an error."""
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
