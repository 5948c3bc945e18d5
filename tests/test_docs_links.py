"""Every page's links and scripts lead somewhere: a relative link names a file of the repository and, after `#`, a
heading of that page; a `python bench/...`, `python recipes/...` or `bash ...` command names a script that exists,
and a bench's own parser accepts what the page gives it; a recipe README's `mtkit` commands parse as the other
pages' do (tests/test_docs_commands.py)."""

from __future__ import annotations

import re
import shlex
import subprocess
import unicodedata
from pathlib import Path

import pytest
from typer._click import exceptions as click_errors

from tests.support import docblocks
from tests.support.cli import ROOT
from tests.support.docblocks import parse
from tests.support.recipes import load_script

PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "recipes").glob("*/README.md")),
    ROOT / "bench" / "peers" / "README.md",
]
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
SCRIPT = re.compile(
    r"(?:^|[\s`(])(?P<runner>python3?|bash) (?P<script>(?:bench|recipes)/[\w./-]+\.(?:py|sh))(?P<args>[^`\n|]*)"
)


def slugs(text: str) -> set[str]:
    """The anchors a page's headings get: Python-Markdown's (the site) and GitHub's (README.md, the recipes)."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
        ascii_ = unicodedata.normalize("NFKD", plain).encode("ascii", "ignore").decode("ascii")
        found.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_).strip().lower()))
        found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", plain.strip().lower())))
    return found


def broken_links(page: Path, text: str) -> list[str]:
    wrong = []
    for match in LINK.finditer(re.sub(r"```.*?```", "", text, flags=re.S)):
        target = match["target"]
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            wrong.append(f"{page.relative_to(ROOT)}: {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in slugs(file.read_text(encoding="utf-8")):
            wrong.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    return wrong


def test_every_link_names_a_file_and_a_heading_that_exist() -> None:
    wrong = [line for page in PAGES for line in broken_links(page, page.read_text(encoding="utf-8"))]
    assert not wrong, "links to nothing:\n" + "\n".join(wrong)


def test_a_link_to_a_missing_heading_or_file_is_caught() -> None:
    page = ROOT / "docs" / "index.md"
    text = "[a](benchmarks.md#no-such-heading) [b](no-such-page.md) [c](benchmarks.md#how-to-measure) [d](#mtkit)"
    assert broken_links(page, text + "\n# mtkit\n") == [
        "docs/index.md: benchmarks.md#no-such-heading: no such heading",
        "docs/index.md: no-such-page.md: no such file",
    ]


def scripts() -> list[tuple[str, str, str]]:
    """(page, script, its arguments) of every bench or recipe script a page runs."""
    found = []
    for page in PAGES:  # a historical region's commands are history: its scripts may have left (it says so)
        text = re.sub(
            r"<!-- unrecorded:begin -->.*?<!-- unrecorded:end -->", "", page.read_text(encoding="utf-8"), flags=re.S
        )
        gone = departed(text)
        for match in SCRIPT.finditer(text):
            if match["script"] in gone:  # the page says where it is kept; the records test parses it there
                continue
            args = match["args"].split("#")[0].split("&&")[0].split("|")[0].split(";")[0].strip(" `)")
            found.append((str(page.relative_to(ROOT)), match["script"], args))
    return found


def departed(text: str) -> set[str]:
    """The scripts a page says have left, each with the commit that keeps it (`since removed ...: `git show
    SHA:PATH``), checked to be there and gone from the tree."""
    gone = set()
    said = r"since\s+removed[^`]*`git show ([0-9a-f]{7,40}):((?:bench|recipes)/[\w./-]+)`"
    for sha, script in re.findall(said, text):
        kept = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{sha}:{script}"], capture_output=True)
        assert kept.returncode == 0 and not (ROOT / script).exists(), f"{script} at {sha}: not as the page says"
        gone.add(script)
    return gone


def test_every_script_a_page_runs_exists_and_its_parser_takes_the_pages_arguments() -> None:
    found = scripts()
    assert any(script == "bench/translate_speed.py" for _, script, _ in found)  # the collector finds them
    wrong = []
    for page, script, args in found:
        if not (ROOT / script).is_file():
            wrong.append(f"{page}: {script}: no such script")
            continue
        if script.startswith("bench/") and script.endswith(".py"):
            parse_args = getattr(load_script(script), "parse_args", None)
            if parse_args is None:
                continue
            try:
                argv = shlex.split(args.replace("...", ""))
                parse_args([a for a in argv if not a.startswith((">", "<", "2>"))])
            except (SystemExit, ValueError) as error:
                wrong.append(f"{page}: {script} {args}: refused ({error})")
    assert not wrong, "\n".join(wrong)


def test_every_mtkit_command_of_a_recipes_readme_parses(capsys) -> None:
    failures, seen = [], 0
    for page in sorted((ROOT / "recipes").glob("*/README.md")):
        lines = [
            (line, False)
            for b in docblocks.blocks(page)
            if b.lang in docblocks.SHELL
            for line in docblocks.shell_lines(b.text)
        ]
        lines += [(span, True) for _, span in docblocks.inline_commands(page)]  # inline: a command named, not run
        for line, partial in lines:
            for argv in docblocks.commands(line):
                seen += 1
                try:
                    parse(argv, partial)
                except (click_errors.ClickException, AssertionError) as error:
                    failures.append(f"{page.relative_to(ROOT)}: {shlex.join(argv)}: {error}")
    capsys.readouterr()
    assert seen and not failures, "\n".join(failures)


@pytest.mark.parametrize("command", ["python bench/no_such_bench.py --x", "python bench/static_step.py --rounds x"])
def test_a_missing_script_or_refused_arguments_fail_the_check(command: str, tmp_path: Path, monkeypatch) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"`{command}`\n", encoding="utf-8")
    match = SCRIPT.search(page.read_text())
    assert match is not None
    script = match["script"]
    if not (ROOT / script).is_file():
        return  # the test above names it
    with pytest.raises(SystemExit):
        load_script(script).parse_args(shlex.split(match["args"].strip(" `")) + ["--model", "m", "--src", "s"])
