"""The code of the documentation (README.md, docs/*.md) as tests see it: fenced blocks with their marks, and the
`mtkit ...` commands in them and in inline code, each cut into the argv that mtkit's own parser takes.

A block's mark is an HTML comment on the line above its fence (invisible on the site and on GitHub):

    <!-- docs-check: run -->            the block runs in tests/test_docs_commands.py (sample corpus, tiny model)
    <!-- docs-check: run-hub -->        the same, for a block that names OPUS-MT models on the Hugging Face Hub: it
                                        runs offline on a Hub cache holding tiny OPUS-MT-shaped models of those
                                        names, with English-French Multi30k lines in test/train/dev.{en,fr}
    <!-- docs-check: skip REASON -->    the block cannot run here; REASON says why (a GPU, the internet, hours)
    <!-- docs-check: dry-run -->        recipe lines: run with --dry-run, compared with what the page says

A runnable block's `pip install` lines are passed over (the test extra has every extra installed), and its
`mtkit train`, `bpe` and `translate` get options appended that make them take seconds (QUICK in the test), less
those the command's own options exclude (`train --init MODEL` keeps MODEL's architecture: no `--preset tiny`;
`bpe --from MODEL` its vocabulary: no `--vocab-size`).

Every shell and Python block has a mark (a test checks), and every `mtkit` command of every block and of inline
code must parse.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import typer
from typer._click import exceptions as click_errors  # typer carries its own click since 0.26

from mtkit.cli import app
from mtkit.errors import MtkitError
from tests.support.cli import ROOT

MARK = re.compile(r"<!--\s*docs-check:\s*(run-hub|run|skip|dry-run)\b\s*(.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)\s*$")
SHELL = {"bash", "sh", "shell", "console", ""}
# Words that end one command and start the next on a shell line.
SEPARATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {"<", ">", ">>", "2>", "2>>", "&>", "2>&1", "<<<"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    mark: str | None  # "run", "run-hub", "skip", "dry-run" or None
    reason: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """README.md and the site's pages; the CLI reference is left out: docs/gen_cli.py writes it from the app."""
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "cli.md")]


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of one Markdown page, with the mark of the line above each."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, start = fence["indent"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        above = lines[start - 1] if start else ""
        mark = MARK.search(above)
        found.append(
            Block(
                page,
                start + 1,
                fence["lang"],
                "\n".join(body) + "\n",
                mark[1] if mark else None,
                mark[2] if mark else "",
            )
        )
        i += 1
    return found


def inline_commands(page: Path) -> list[tuple[str, str]]:
    """(where, text) of inline code spans outside fences that start with `mtkit `."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^([ \t]*)```.*?^\1```", lambda m: "\n" * m[0].count("\n"), text, flags=re.S | re.M)
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", line):
            if re.match(r"^(mtkit|torchrun) (?!\S*: )", span):  # not a message: `mtkit train: usage error: ...`
                found.append((f"{page.relative_to(ROOT)}:{number}", span))
    return found


def shell_lines(text: str) -> list[str]:
    """A shell block's logical lines: `\\` continuations joined, `$ ` prompts dropped, output lines of a console
    block (lines without a prompt when the block has prompts) left out."""
    raw = text.splitlines()
    prompted = any(line.startswith("$ ") for line in raw)
    joined: list[str] = []
    carry = ""
    for line in raw:
        if prompted and not carry:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if line.rstrip().endswith("\\"):
            carry += line.rstrip()[:-1] + " "
            continue
        joined.append(carry + line)
        carry = ""
    return joined


def commands(line: str) -> list[list[str]]:
    """The `mtkit` commands of one shell line, as mtkit's argv (["mtkit", SUBCOMMAND, ...]): the line is split at
    `&&`, `|`, `;`, redirections and their targets are dropped, `...` (a documented "and so on") is dropped,
    `python -m mtkit` and `torchrun ... -m mtkit` count as mtkit."""
    words = shlex.split(line, comments=True)  # ValueError: not a shell line (an unclosed quote)
    found = []
    current: list[str] = []
    for word in [*words, ";"]:
        if word in SEPARATORS:
            argv = _as_mtkit(current)
            if argv:
                found.append(argv)
            current = []
        else:
            current.append(word)
    return found


def _as_mtkit(words: list[str]) -> list[str] | None:
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in REDIRECTS:
            skip = word != "2>&1"
            continue
        if re.match(r"^(\d?>>?|<)\S+$", word) and not word.startswith("<>"):
            continue  # >out.de, 2>log, <in.en
        if word == "...":
            continue
        kept.append(word)
    while kept and re.match(r"^[A-Z_][A-Z0-9_]*=", kept[0]):
        kept = kept[1:]  # VAR=value mtkit ...
    if kept[:1] == ["mtkit"]:
        return kept
    if kept[:3] in (["python", "-m", "mtkit"], ["python3", "-m", "mtkit"]):
        return ["mtkit", *kept[3:]]
    if kept[:1] == ["torchrun"] and "-m" in kept and kept[kept.index("-m") + 1 :][:1] == ["mtkit"]:
        return ["mtkit", *kept[kept.index("-m") + 2 :]]
    return None


def parse(argv: list[str], partial: bool = False) -> None:
    """Parse `mtkit ...` down to its (sub)command with mtkit's own click command; raise click's error.

    `partial`: inline code in a sentence (`mtkit translate --beam 1`) names a command and some options, not all
    that a run needs; a missing argument, or an option named without its value, is then not an error."""
    command = typer.main.get_command(app)
    if partial and argv == ["mtkit"]:
        return  # `torchrun ... -m mtkit`: the launcher, naming mtkit
    ctx = None
    rest = argv[1:]
    name = "mtkit"
    while True:
        try:
            ctx = command.make_context(name, list(rest), parent=ctx, resilient_parsing=False)
        except (typer.Exit, SystemExit) as stop:  # --help, --version, completion: parsed, then the command stops
            assert getattr(stop, "exit_code", getattr(stop, "code", 0)) in (0, None)
            return
        except (click_errors.MissingParameter, click_errors.BadOptionUsage) as error:
            if partial and (isinstance(error, click_errors.MissingParameter) or "requires an argument" in str(error)):
                return
            raise
        except MtkitError as error:  # `--config FILE` is read while parsing: a file of the docs' example
            assert str(error).startswith("cannot read the config file"), error
            return
        if not hasattr(command, "resolve_command"):
            assert not ctx.args, f"arguments left unparsed: {ctx.args}"
            return
        rest = [*ctx._protected_args, *ctx.args]  # click keeps the subcommand name aside
        if not rest:
            return
        name, command, rest = command.resolve_command(ctx, rest)
        assert command is not None
