"""Every figure a page shows comes from a record under docs/results/: the tables are what docs/gen_figures.py
renders from the records, each record says how it was measured (its command still parses, its commit exists, its
date and machine are real), and a measurement stated anywhere in README.md, docs/ or a recipe's README, outside
the generated tables and the clearly marked historical regions, is a figure some record holds."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.recipes import dry_run, load_script, parse_line, parse_mtkit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
try:
    import gen_figures
finally:
    sys.path.remove(str(ROOT / "docs"))

RECORDS = sorted(gen_figures.RESULTS.glob("*.json"))
# A machine as a record names it (a bench's CPU model from /proc/cpuinfo, or in words): its maker or architecture.
MAKER = re.compile(r"\b(?:Intel|AMD|EPYC|Xeon|Apple|Arm|aarch64|arm64|Graviton|Ampere|x86_64)\b", re.I)
# Regions of a page whose figures are not mtkit's measurements of today, each opening with its label where a reader
# sees it: what was measured before records were kept, and what a page quotes (a paper's table) or estimates.
UNRECORDED = re.compile(r"<!-- (?P<kind>unrecorded|quoted):begin -->\n(?P<body>.*?)<!-- (?P=kind):end -->", re.S)
LABELS = {"unrecorded": "*Historical, unrecorded:", "quoted": "*Quoted or estimated, not measured by mtkit:"}
UNRECORDED_LABEL = LABELS["unrecorded"]
GENERATED = re.compile(f"{gen_figures.REGION.pattern}|{gen_figures.TABLE.pattern}", re.S)
NUMBER = r"\d[\d,]*(?:\.\d+)?"
# What a page states as a measurement: a ratio (5.45x, 1.14-1.78x), a number with a unit of speed, time or size,
# a decimal beside BLEU, or a score's shape anywhere (two digits and one or two decimals: 36.73, 21.3, but not a
# version's 2.13.0). Settings are written as options (`--batch-wait-ms 5`, in code) or in words.
FIGURE = re.compile(
    rf"(?P<a>{NUMBER})(?:-(?P<b>{NUMBER}))?(?:x\b| ?(?:ms|us|s/update|MiB|MB|GB|GiB|KiB|tok/s|tokens/s|"
    rf"target tokens/s|sentences/s|sent/s|words/s)\b)|(?P<c>\d+\.\d+)(?= (?:test )?(?:sacre)?BLEU)"
    r"|(?<![\d.])(?P<d>[1-9]\d\.\d{1,2})(?![\d.]*\d)"
)
# Figures that are settings or facts of a format, not measurements, each with why.
NOT_MEASURED = {
    "1.25x": "--precision auto's margin around its bar (docs/training.md)",
    "1.2x": "--precision auto's bar for a training pass",
    "1.1x": "--precision auto's bar for a product",
    "300 MB": "the size of an OPUS-MT model on the Hub, a file's size",
    "80 GB": "a GPU's memory, as its maker states it",
    "63.1": "`base`'s parameters in millions, counted from its architecture",
    "100 MB": "the size of a fault test's input line",
    "64 MiB": "the most mtkit reads of a model directory's small file, a limit",
    "31 MB": "`small`'s model file: its parameters, 4 bytes each",
    "92 MB": "`small`'s checkpoint: its parameters and Adam's two moments, 4 bytes each",
    "256 MiB": "the largest document `translate` reads, a limit",
}
# Pages whose figures are not checked yet, each with why.
UNCHECKED = {
    "docs/reference/cli.md": "generated from the command line's help: its numbers are options' defaults",
    "docs/serving.md": "being rewritten beside the server's adapters; its figures are checked once that lands",
}


def pages() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in gen_figures.all_pages()}


def prose(text: str) -> str:
    """What a page states in its own words: without generated tables, historical regions, code blocks and spans."""
    text = GENERATED.sub("", text)
    text = UNRECORDED.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def numbers(value: object) -> set[str]:
    """A record's figures as a page may print them: each number at 0-3 decimals, commas taken out."""
    found: set[str] = set()
    if isinstance(value, dict):  # raw passes are what figures are made of, not figures: a page states the results
        for key, v in value.items():
            found |= set() if key in ("passes", "commit", "machine", "date") else numbers(v)
    elif isinstance(value, list):
        for v in value:
            found |= numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found |= {f"{value:.{d}f}" for d in range(4)} | {str(value)}
    return found


def recorded() -> set[str]:
    """Every figure the records hold, and every figure the tables rendered from them show."""
    found: set[str] = set()
    for path in RECORDS:
        found |= numbers(json.loads(path.read_text(encoding="utf-8")))
    for text in pages().values():
        for region in GENERATED.finditer(text):
            found |= {n.replace(",", "") for n in re.findall(NUMBER, region[0])}
    return found


def unrecorded(texts: dict[str, str]) -> list[str]:
    """'page: figure' for every measurement stated outside the tables and historical regions that no record holds."""
    known = recorded()
    wrong = []
    for name, text in texts.items():
        if name in UNCHECKED:
            continue
        for match in FIGURE.finditer(prose(text)):
            if match[0] in NOT_MEASURED:
                continue
            for figure in filter(None, (match["a"], match["b"], match["c"], match["d"])):
                if figure.replace(",", "") not in known:
                    wrong.append(f"{name}: {match[0]}")
    return wrong


@pytest.mark.parametrize("page", list(gen_figures.PAGES), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_headline_tables_are_what_the_records_give(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert gen_figures.render(page, text) == text, "run `python docs/gen_figures.py` and commit the pages"


def test_no_page_states_a_measurement_that_no_record_holds() -> None:
    wrong = unrecorded(pages())
    assert not wrong, "figures without a record (measure them with --record, or move them to a marked region):\n" + (
        "\n".join(wrong)
    )


def test_a_page_with_a_figure_no_record_holds_fails_and_a_marked_region_passes() -> None:
    stated = "The student runs 9.87x the teacher, 123.4 sentences/s, and scores 40.12 sacreBLEU."
    assert unrecorded({"page.md": stated}) == ["page.md: 9.87x", "page.md: 123.4 sentences/s", "page.md: 40.12"]
    marked = f"<!-- unrecorded:begin -->\n{UNRECORDED_LABEL} old.*\n{stated}\n<!-- unrecorded:end -->"
    assert unrecorded({"page.md": marked}) == [] and unrecorded({"page.md": "`--beam 4` and 36.73 BLEU"}) == []


def test_every_historical_or_quoted_region_says_so_where_a_reader_sees_it() -> None:
    for name, text in pages().items():
        for kind in LABELS:
            assert text.count(f"<!-- {kind}:begin -->") == text.count(f"<!-- {kind}:end -->"), name
        for region in UNRECORDED.finditer(text):
            assert region["body"].lstrip().startswith(LABELS[region["kind"]]), f"{name}: a region without its label"


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_every_record_has_its_command_commit_date_machine_and_passes(path: Path) -> None:
    """What a reader needs to trust a figure and rerun it. A commit a record names (every bench's does,
    bench/harness.py) is one of this repository's, made no later than the record's date; every machine names its
    CPU. A bench's record (bench/harness.py's format, with a `renderer` or not) gives the machine as facts (the CPU,
    its flags, cores, the load at start) and keeps its raw passes; a recipe's table record (with its `renderer`)
    came before the writer, may name the machine in words, and keeps each row's passes."""
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["command"].split()[0] in ("python", "bash", "mtkit"), data["command"]
    date = dt.date.fromisoformat(str(data["date"])[:10])
    assert dt.date(2026, 1, 1) <= date <= dt.date.today(), date
    named = data.get("commit")  # a bench's {"commit": sha, "dirty": ...}, or a table record's sha
    sha = named.get("commit") if isinstance(named, dict) else named
    if sha is not None:  # one of this repository's, made before the figure was measured at it
        made = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--date=format-local:%Y-%m-%d", "--format=%ad", f"{sha}^{{commit}}"],
            capture_output=True,
            text=True,
            env={**os.environ, "TZ": "UTC"},
        )
        assert re.fullmatch(r"[0-9a-f]{7,40}", sha) and made.returncode == 0, f"{sha} is no commit of this repository"
        assert date >= dt.date.fromisoformat(made.stdout.strip()), f"dated {date}, before its commit {sha} was made"
    cpu = data["machine"] if isinstance(data["machine"], str) else data["machine"]["cpu"]
    assert MAKER.search(cpu), f"the machine names no CPU: {cpu!r}"
    if "renderer" in data:
        path, _, function = data["renderer"].partition("::")
        assert (ROOT / path).is_file() and data["machine"] and data["rows"]
        assert not function or f"def {function}(" in (ROOT / path).read_text(encoding="utf-8"), data["renderer"]
        if data.get("format") != "mtkit-bench-record":  # a recipe's table: each row keeps the passes it was made of
            one = data.get("timing") == "one timed pass"  # its seconds are the pass
            assert all(row.get("passes") or one for row in data["rows"]), "every row keeps its raw passes"
            return
    assert data["format"] == "mtkit-bench-record" and data["passes"] and data["settings"] is not None
    assert re.fullmatch(r"[0-9a-f]{40}", data["commit"]["commit"]), data["commit"]
    facts = data["machine"]
    assert isinstance(facts["cpu_flags"], list) and facts["cores"] >= 1
    assert isinstance(facts["load_1min"], (int, float))


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_every_records_command_parses_at_the_current_command_line(path: Path, tmp_path: Path, monkeypatch) -> None:
    """A bench's command with the bench's own parser; a recipe's with its dry run, each `mtkit` line it prints with
    mtkit's typer app; an `mtkit` command with the app itself. A bench script that has left (its question
    settled) is parsed as it was last, before the commit that removed it."""
    data = json.loads(path.read_text(encoding="utf-8"))
    argv = shlex.split(data["command"])
    if argv[0] == "python" and not (ROOT / argv[1]).is_file():
        removed = subprocess.run(  # the commit that removed it: its parent holds the script's last version
            ["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--diff-filter=D", "--", argv[1]],
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert removed, f"{argv[1]} is neither in the tree nor in its history"
        kept = subprocess.run(["git", "-C", str(ROOT), "archive", f"{removed}^", "bench"], capture_output=True)
        assert kept.returncode == 0, kept.stderr  # bench/ as it was: the script and the scripts it imported
        tarfile.open(fileobj=io.BytesIO(kept.stdout)).extractall(tmp_path, filter="data")
        for name, module in list(sys.modules.items()):  # today's bench/ modules hidden while it imports its own
            if Path(getattr(module, "__file__", None) or "/").parent == ROOT / "bench":
                monkeypatch.delitem(sys.modules, name)
        monkeypatch.setattr(sys, "path", [str(tmp_path / "bench"), *sys.path])
        try:
            script = load_script(str(tmp_path / argv[1]))
            script.parse_args(argv[2:])
        finally:  # and its own leave with it: the next test imports today's
            for name, module in list(sys.modules.items()):
                if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
                    del sys.modules[name]
    elif argv[0] == "python":
        script = load_script(argv[1])
        script.parse_args(argv[2:])
    elif argv[0] == "bash":
        recipe = Path(argv[1]).parent.name
        for line in dry_run(recipe, *argv[2:], cwd=tmp_path):
            if line.startswith(("mtkit ", "torchrun ")):
                parse_mtkit(parse_line(line)[0])
    else:
        parse_mtkit(argv)


def test_a_command_the_current_parsers_refuse_fails_the_check(tmp_path: Path) -> None:
    bench = load_script("bench/static_step.py")
    with pytest.raises(SystemExit):
        bench.parse_args(["--model", "m.pt", "--src", "x", "--steps", "eager,static"])  # a step that left
    with pytest.raises(AssertionError):
        dry_run("multi30k-distill", "--preset", "small", cwd=tmp_path)


def test_every_headline_names_a_record_and_fills_its_sentence_from_it() -> None:
    for m in gen_figures.measurements():
        assert (gen_figures.RESULTS / m["record"]).is_file(), m["id"]
        text = gen_figures.headline(m)
        assert "{" not in text and all(gen_figures.value(gen_figures.record(m["record"]), v) in text
                                       for v in m.get("values", {}).values())  # fmt: skip


def test_a_value_may_come_from_another_record_than_its_headlines() -> None:
    """A headline over two runs of one script (two seeds): a value naming its `record` is read from that one."""
    other = {"record": "fairseq-same-search.json", "path": "settings.seed"}
    assert gen_figures.value({"settings": {"seed": 7}}, other) == "1"
    assert gen_figures.value({"settings": {"seed": 7}}, {"path": "settings.seed"}) == "7"


def test_the_results_tables_are_what_their_json_gives() -> None:
    pages_ = gen_figures.table_pages()
    assert ROOT / "docs" / "distill.md" in pages_ and ROOT / "recipes" / "multi30k-distill" / "README.md" in pages_
    for page in pages_:
        text = page.read_text(encoding="utf-8")
        assert gen_figures.render_tables(text) == text, f"run `python docs/gen_figures.py` ({page.relative_to(ROOT)})"


def test_a_results_table_edited_by_hand_is_rewritten_and_an_unknown_one_refused() -> None:
    page = (ROOT / "docs" / "distill.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| teacher, mtkit fp32, beam 4 |"))
    edited = page.replace(row, row.replace(" | ", " | 99.99 | ", 1), 1)  # a cell typed in by hand
    assert edited != page and gen_figures.render_tables(edited) == page
    region = f"{gen_figures.table_begin('no-such-run')}\n| x |\n<!-- table:no-such-run end -->"
    with pytest.raises(SystemExit, match="no-such-run"):
        gen_figures.render_tables(region)
    with pytest.raises(SystemExit, match="well-formed"):
        gen_figures.render_tables(region.replace("end -->", "ends -->"))
    with pytest.raises(SystemExit, match="well-formed"):
        gen_figures.render_tables(region.rsplit("\n", 1)[0])  # no end marker
