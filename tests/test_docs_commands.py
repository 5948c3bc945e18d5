"""Every command the documentation shows is one mtkit accepts, and the blocks marked runnable run.

README.md and docs/*.md are read as a user copies from them: each `mtkit ...` of a shell block or of inline
code is parsed by mtkit's own click command (an unknown option, a wrong value or a removed command fails here,
naming the page and line), without running it. Blocks marked `<!-- docs-check: run -->` run on the shipped
sample corpus with a tiny model (tests/support/docblocks.py says how), blocks marked `<!-- docs-check: run-hub -->`
offline on a Hugging Face cache holding tiny OPUS-MT-shaped models of the Hub names they use; blocks marked
`<!-- docs-check: skip REASON -->` are only parsed, and must say why they cannot run.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer._click import exceptions as click_errors  # typer carries its own click since 0.26

from mtkit import hub
from mtkit.data import corpora, prepare
from tests.support import docblocks
from tests.support.cli import ROOT, run_cli
from tests.support.corpora import full_multi30k, read_gz, short_pairs
from tests.support.docblocks import parse
from tests.support.training import FAST

# What a runnable block's `mtkit train` gets appended so that it takes seconds (later options win in click): the
# tiny preset for a few updates on one thread, a checkpoint after each (`average --last 5` needs five).
# `bpe`: a vocabulary the few hundred sample lines can fill; `translate`: outputs cut at 16 tokens, so that an
# untrained model's search ends at once.
QUICK = {
    "train": [*FAST, "--max-steps", "6", "--save-every-steps", "1", "--valid-every", "3", "--valid-bleu", "0"],
    "bpe": ["--vocab-size", "400"],
    "translate": ["--max-len-a", "0", "--max-len-b", "16"],
}
# Options of QUICK left out where the command's own options exclude them: `train --init MODEL` takes MODEL's
# architecture (a --preset that disagrees is refused), `bpe --from MODEL` its vocabulary (no --vocab-size).
QUICK_EXCLUDED = {("train", "--init"): "--preset", ("bpe", "--from"): "--vocab-size"}


def quick(argv: list[str]) -> list[str]:
    """What a runnable block's `mtkit` command gets appended (QUICK), less what its own options exclude."""
    if "--score-only" in argv:
        return []  # scoring decodes nothing
    options = QUICK.get(argv[1], [])
    for (command, given), dropped in QUICK_EXCLUDED.items():
        if argv[1] == command and given in argv and dropped in options:
            at = options.index(dropped)
            options = options[:at] + options[at + 2 :]
    return options


def documented_commands() -> tuple[list[tuple[str, list[str], bool]], list[str]]:
    """(where, argv, partial) of every `mtkit` command in the docs (partial: inline code), and the lines that are
    not shell at all."""
    found, broken = [], []
    lines = [
        (block.where, line, False)
        for page in docblocks.pages()
        for block in docblocks.blocks(page)
        if block.lang in docblocks.SHELL
        for line in docblocks.shell_lines(block.text)
    ]
    lines += [(*item, True) for page in docblocks.pages() for item in docblocks.inline_commands(page)]
    for where, line, partial in lines:
        try:
            found += [(where, argv, partial) for argv in docblocks.commands(line)]
        except ValueError as error:
            broken.append(f"{where}: {line} ({error})")
    return found, broken


COMMANDS, BROKEN = documented_commands()


def test_every_shell_line_of_the_docs_is_shell():
    assert not BROKEN, "lines of shell blocks that a shell cannot read:\n" + "\n".join(BROKEN)


def test_the_docs_show_many_commands():
    """The collector finds what it should (a broken collector would make the next test pass on nothing)."""
    names = {argv[1] for _, argv, _ in COMMANDS if len(argv) > 1}
    assert {"prepare", "bpe", "train", "average", "translate", "score", "serve", "export", "plot", "info"} <= names
    assert len(COMMANDS) > 100


def test_every_documented_mtkit_command_parses(capsys):
    failures = []
    for where, argv, partial in COMMANDS:
        try:
            parse(argv, partial)
        except (click_errors.ClickException, AssertionError) as error:
            message = error.format_message() if isinstance(error, click_errors.ClickException) else str(error)
            failures.append(f"{where}: {shlex.join(argv)}\n    {message}")
    capsys.readouterr()
    assert not failures, "commands in the docs that mtkit refuses:\n" + "\n".join(failures)


def test_the_checker_refuses_what_mtkit_refuses():
    for argv in (["mtkit", "translat"], ["mtkit", "translate", "--bem", "4"], ["mtkit", "translate", "--beam", "x"]):
        with pytest.raises(click_errors.ClickException):
            parse(argv)


def test_every_marked_block_says_why_it_cannot_run():
    marked = [b for page in docblocks.pages() for b in docblocks.blocks(page) if b.mark]
    assert any(b.mark == "run" for b in marked) and any(b.mark == "run-hub" for b in marked)
    assert all(b.reason for b in marked if b.mark == "skip"), [b.where for b in marked if not b.reason]


def test_shell_lines_are_cut_into_mtkit_commands():
    line = "VAR=1 mtkit translate -m M < in.en > out.de && python -m mtkit score out.de --ref r.de  # a comment"
    assert docblocks.commands(line) == [
        ["mtkit", "translate", "-m", "M"],
        ["mtkit", "score", "out.de", "--ref", "r.de"],
    ]
    assert docblocks.commands("torchrun --nproc_per_node 8 -m mtkit train D --out R") == [
        ["mtkit", "train", "D", "--out", "R"]
    ]
    assert docblocks.shell_lines("$ mtkit a \\\n  --b\noutput\n") == ["mtkit a    --b"]


# ---- runnable blocks -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_sandbox(tmp_path_factory, trained_model: Path, toy_data: Path) -> Iterator[Path]:
    """A working directory as the docs assume one: the Multi30k that `mtkit prepare multi30k-en-de` reads offline
    (the shipped sample cut to seconds of work, in place of the full copy in mtkit/data/multi30k, its sha256
    registered; also at shared/data/multi30k-en-de for a page's `--mirror DIR`), a trained tiny model at every
    path the docs name, a run directory runs/small, text files with the names the docs use, and an `mtkit` on PATH
    that is this checkout's."""
    top = tmp_path_factory.mktemp("docs")
    mirror = top / "shared" / "data" / "multi30k-en-de"
    mirror.mkdir(parents=True)
    for path in sorted((ROOT / "tests" / "data" / "sample").glob("*.??")):  # the sample, cut to seconds of work
        if path.suffix != ".md":
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[: 300 if "train" in path.name else 30]
            (mirror / f"{path.name}.gz").write_bytes(gzip.compress("".join(lines).encode(), mtime=0))
    work = top / "work"
    done = run_cli("train", toy_data, "--out", work / "runs" / "small", *FAST, "--max-steps", "4")
    assert done.returncode == 0, done.stderr
    models = ["runs/small/averaged.pt", "runs/base/averaged.pt", "averaged.pt", "model.pt", "seed1/averaged.pt"]
    models += ["seed2/averaged.pt", "a.pt", "b.pt", "c.pt"]
    models += [f"runs/base/checkpoint_{step}.pt" for step in (1, 2, 3, 4, 5, "last")]
    for name in models:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trained_model, work / name)  # runs/small/averaged.pt: the toy model, not runs/small's
    # The toy task's sentences, which the toy model translates in a few steps each.
    for name, (seed, count) in {"test": (11, 6), "train": (12, 200), "dev": (13, 40)}.items():
        pairs = short_pairs(count * 2, seed)[:count]
        for lang, side in (("en", 0), ("de", 1)):
            (work / f"{name}.{lang}").write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    for name in ("test.hyp.de", "new.de", "old.de", "mono.de"):
        shutil.copyfile(work / "test.de", work / name)
    mtkit_on_path(top / "bin")
    sums = {
        p.name: {"sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "size": p.stat().st_size}
        for p in mirror.iterdir()
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prepare, "default_registry", lambda: corpora.default_registry().override(sources=sums))
        patch.setattr(prepare, "shipped_copy", lambda corpus: mirror if corpus.family == "multi30k-en-de" else None)
        yield work


def mtkit_on_path(bin_dir: Path) -> None:
    """BIN/mtkit: this checkout's mtkit, for the lines that run through bash."""
    bin_dir.mkdir()
    shim = bin_dir / "mtkit"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m mtkit "$@"\n')
    shim.chmod(0o755)


@pytest.fixture(scope="module")
def page_sandboxes(base_sandbox: Path, tmp_path_factory) -> Iterator[dict[Path, Path]]:
    """A copy of the sandbox for each page, shared by its blocks in order: a page's blocks see what the page made
    before them (an export, then the Python that reads it), never what another page left."""
    yield {}


def page_sandbox(block: docblocks.Block, base: Path, copies: dict[Path, Path], tmp: Path) -> Path:
    if block.page not in copies:
        top = tmp / block.page.stem
        shutil.copytree(base.parent, top, symlinks=True)
        copies[block.page] = top / "work"
        for other in docblocks.blocks(block.page):  # a training the page shows starts from nothing
            for line in docblocks.shell_lines(other.text) if other.mark == "run" and other.lang != "python" else []:
                for argv in docblocks.commands(line):
                    if argv[1] == "train" and "--out" in argv:
                        shutil.rmtree(copies[block.page] / argv[argv.index("--out") + 1], ignore_errors=True)
    return copies[block.page]


RUNNABLE = [b for page in docblocks.pages() for b in docblocks.blocks(page) if b.mark == "run"]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_runnable_block_runs(block: docblocks.Block, base_sandbox: Path, page_sandboxes, tmp_path_factory) -> None:
    sandbox = page_sandbox(block, base_sandbox, page_sandboxes, tmp_path_factory.getbasetemp())
    if block.lang == "python":
        before = os.getcwd()
        os.chdir(sandbox)
        try:
            exec(compile(block.text, block.where, "exec"), {"__name__": "__docs__"})
        finally:
            os.chdir(before)
        return
    if re.search(r"^mtkit serve .*&$", block.text, re.M):
        run_server_block(block, sandbox)
        return
    for line in docblocks.shell_lines(block.text):
        run_line(line, sandbox, block.where)


def run_server_block(block: docblocks.Block, cwd: Path) -> None:
    """A block that starts `mtkit serve ... &` runs as one bash script, HOME in the sandbox, on a free port instead
    of 5000; the runner waits for /health after the server line, checks that the last line's answer translated,
    and stops the server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lines = []
    for line in docblocks.shell_lines(block.text.replace("localhost:5000", f"localhost:{port}")):
        if re.match(r"^mtkit serve .*&$", line):
            line = line[:-1] + f"--port {port} &\nserver=$!\n"
            line += f"for _ in $(seq 600); do curl -sf localhost:{port}/health >/dev/null && break; sleep 0.1; done"
        lines.append(line)
    script = "set -euo pipefail\n" + "\n".join(lines) + "\nkill $server; wait $server || true\n"
    env = {**os.environ, "HOME": str(cwd), "PATH": f"{cwd.parent / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert done.returncode == 0 and '"translations"' in done.stdout, f"{block.where}:\n{done.stdout}\n{done.stderr}"


def run_line(line: str, cwd: Path, where: str, env: dict[str, str] | None = None) -> None:
    """A shell line as a pipeline: `mtkit` stages run in this process (seconds saved a command), other stages
    (`printf`, `paste`) through bash; `< IN` and `> OUT` at its ends. Anything else (`&&`, `;`) through bash.
    `env`: variables every stage sees (the Hub cache of a run-hub block)."""
    words = shlex.split(line, comments=True)
    if not words or words[:2] == ["pip", "install"]:
        return  # the test extra has installed every extra
    if set(words) & (docblocks.SEPARATORS - {"|"}) or words.count("<") + words.count(">") > 2:
        shell = {**os.environ, **(env or {}), "PATH": f"{cwd.parent / 'bin'}:{os.environ['PATH']}"}
        done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=cwd, env=shell, timeout=300)
        assert done.returncode == 0, f"{where}: {line}\n{done.stderr}"
        return
    stages: list[list[str]] = [[]]
    for word in words:
        stages[-1:] = [stages[-1], []] if word == "|" else [[*stages[-1], word]]
    data: str | None = None
    out = None
    stage_env = {**os.environ, **(env or {})}
    for stage in stages:
        if "<" in stage:
            data = (cwd / stage[stage.index("<") + 1]).read_text(encoding="utf-8")
        if ">" in stage:
            out = stage[stage.index(">") + 1]
        argv = [w for i, w in enumerate(stage) if w not in ("<", ">") and (i == 0 or stage[i - 1] not in ("<", ">"))]
        if argv[0] == "mtkit":
            done = run_cli(*argv[1:], *quick(argv), input=data, cwd=cwd, env=env)
        else:
            done = subprocess.run(
                shlex.join(argv), shell=True, input=data, capture_output=True, text=True, cwd=cwd, env=stage_env
            )
        assert done.returncode == 0, f"{where}: {line}\n{done.stderr}"
        data = done.stdout
    if out:
        (cwd / out).write_text(data or "", encoding="utf-8")


# ---- blocks that use OPUS-MT models from the Hugging Face Hub, offline ------------------------------------------

HUB = [b for page in docblocks.pages() for b in docblocks.blocks(page) if b.mark == "run-hub"]
# The Hub names a run-hub block may use: OPUS-MT models from English into a language Multi30k ships.
OPUS_NAME = re.compile(r"Helsinki-NLP/opus-mt-en-(de|fr|cs)")
# What a directory an export writes holds, by format.
EXPORTED = {"huggingface": ("config.json", "model.safetensors"), "ctranslate2": ("model.bin",)}


def hub_names(block: docblocks.Block) -> set[str]:
    """The `owner/name` models a block's commands read (`-m`, `--init`, `--from`, what `info` and `export` are
    given) that are not under a directory the block itself writes (`export runs/ft/averaged.pt` after
    `--out runs/ft`)."""
    argvs = [argv for line in docblocks.shell_lines(block.text) for argv in docblocks.commands(line)]
    written = {argv[i + 1].split("/")[0] for argv in argvs for i, w in enumerate(argv[:-1]) if w in ("--out", "-o")}
    models = [argv[i + 1] for argv in argvs for i, w in enumerate(argv[:-1]) if w in ("-m", "--init", "--from")]
    models += [argv[2] for argv in argvs if argv[1] in ("info", "export") and len(argv) > 2]
    return {m for m in models if hub.HUB_NAME.fullmatch(m) and m.split("/")[0] not in written}


@pytest.fixture(scope="module")
def hub_sandbox(tmp_path_factory) -> Path:
    """A working directory for run-hub blocks: HUB/, a Hugging Face cache holding a tiny OPUS-MT-shaped model
    (tests/support/opus.py) for every Hub name the blocks use, as `snapshot_download` leaves one; the shipped
    Multi30k's first lines in train, dev and test files of English and of each model's target language (the names
    the pages use: train.en, train.fr, dev.en, ...); and an `mtkit` on PATH that is this checkout's."""
    pytest.importorskip("transformers")
    pytest.importorskip("ctranslate2")  # the walk-through exports to CTranslate2; the test extra installs it
    from tests.support.opus import hub_cache, make_opus_dir

    multi30k = full_multi30k()
    if multi30k is None:
        pytest.skip("the Multi30k copy that ships with mtkit is not here")
    top = tmp_path_factory.mktemp("docs-hub")
    work = top / "work"
    work.mkdir()
    mtkit_on_path(top / "bin")
    names = sorted(set().union(*map(hub_names, HUB)))
    for name in names:
        model = make_opus_dir(top / "models" / name, tgt_lang=name[-2:])
        hub_cache(top / "hub", name, model)
    for split, source, count in (("train", "train", 300), ("dev", "val", 40), ("test", "test_2016_flickr", 6)):
        for lang in sorted({"en", *(name[-2:] for name in names)}):
            lines = read_gz(multi30k / f"{source}.{lang}.gz", count)
            (work / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return work


@pytest.fixture(scope="module")
def hub_page_sandboxes() -> dict[Path, Path]:
    """A copy of `hub_sandbox` for each page, shared by its run-hub blocks in order."""
    return {}


def promised_outputs(block: docblocks.Block) -> list[tuple[str, str]]:
    """(line, path) of what a block's commands say they write: each `--out`/`-o` target, each path a comment names
    (`# runs/ft/averaged.pt, as for any run`), and inside an export's directory the files of its format."""
    promised = []
    for line in docblocks.shell_lines(block.text):
        comment = line.partition("  #")[2]
        promised += [(line, path) for path in re.findall(r"\b(?:[\w.-]+/)+[\w-]+\.(?:pt|json|bin|model)\b", comment)]
        for argv in docblocks.commands(line):
            value = {w: argv[i + 1] for i, w in enumerate(argv[:-1]) if w.startswith("-")}
            out = value.get("--out", value.get("-o"))
            if out:
                promised.append((line, out))
                promised += [(line, f"{out}/{name}") for name in EXPORTED.get(value.get("--format", ""), ())]
    return promised


def test_every_run_hub_block_names_models_the_offline_cache_holds():
    """A run-hub block reads Hub names, and only names `hub_sandbox` builds (another would fail offline as 'not in
    the Hugging Face cache', which would not say what to change here)."""
    assert HUB, "no block is marked run-hub"
    for block in HUB:
        names = hub_names(block)
        assert names, f"{block.where}: a run-hub block that reads no Hub model"
        assert all(OPUS_NAME.fullmatch(name) for name in names), f"{block.where}: {names}"


def test_a_run_hub_block_that_installs_mtkit_installs_the_extras_its_commands_need():
    """The test extra has every extra, so a run cannot see a missing one: a Hub name needs `hf`, a CTranslate2
    export `ct2` (each says so in one sentence when missing)."""
    for block in HUB:
        lines = docblocks.shell_lines(block.text)
        installed = {x for line in lines if line.startswith("pip install") for x in re.findall(r"\.\[([\w,]+)\]", line)}
        if not installed:
            continue  # a later block of a page that installed them above
        given = set(",".join(installed).split(","))
        formats = {
            argv[i + 1]
            for line in lines
            for argv in docblocks.commands(line)
            for i, w in enumerate(argv[:-1])
            if w == "--format"
        }
        needed = {"hf"} | ({"ct2"} if "ctranslate2" in formats else set())
        assert needed <= given, f"{block.where}: installs .[{','.join(sorted(given))}], its commands need {needed}"


def test_what_a_block_reads_and_writes_is_found():
    text = (
        "mtkit train data/d --init Helsinki-NLP/opus-mt-en-fr --out runs/ft\n"
        "mtkit average runs/ft --last 5   # runs/ft/averaged.pt, as for any run\n"
        "mtkit export runs/ft/averaged.pt --format ctranslate2 -o runs/ft/ct2\n"
    )
    block = docblocks.Block(ROOT / "docs" / "adapt.md", 1, "bash", text, "run-hub", "")
    assert hub_names(block) == {"Helsinki-NLP/opus-mt-en-fr"}
    assert [path for _, path in promised_outputs(block)] == [
        "runs/ft",
        "runs/ft/averaged.pt",
        "runs/ft/ct2",
        "runs/ft/ct2/model.bin",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("block", HUB, ids=[b.where for b in HUB])
def test_run_hub_block_runs_offline(
    block: docblocks.Block, hub_sandbox: Path, hub_page_sandboxes: dict[Path, Path], tmp_path_factory
) -> None:
    """Every command of the block exits 0, its Hub names read from the offline cache (`HF_HUB_OFFLINE=1`: nothing
    is fetched), and what the block says it writes is there."""
    if block.page not in hub_page_sandboxes:
        top = tmp_path_factory.getbasetemp() / f"{block.page.stem}-hub"
        shutil.copytree(hub_sandbox.parent, top, symlinks=True)
        hub_page_sandboxes[block.page] = top / "work"
    sandbox = hub_page_sandboxes[block.page]
    env = {"HF_HUB_CACHE": str(sandbox.parent / "hub"), "HF_HUB_OFFLINE": "1"}
    for line in docblocks.shell_lines(block.text):
        run_line(line, sandbox, block.where, env=env)
    missing = [f"{line}\n    {path}" for line, path in promised_outputs(block) if not (sandbox / path).exists()]
    assert not missing, f"{block.where}: not written:\n" + "\n".join(missing)


def test_every_code_block_is_marked_run_or_skip_with_its_reason():
    unmarked = [
        b.where
        for page in docblocks.pages()
        for b in docblocks.blocks(page)
        if (b.lang in docblocks.SHELL or b.lang == "python") and b.mark is None
    ]
    assert not unmarked, f"blocks without <!-- docs-check: run|run-hub|skip REASON|dry-run -->: {unmarked}"


DRY = [b for page in docblocks.pages() for b in docblocks.blocks(page) if b.mark == "dry-run"]


@pytest.mark.parametrize("block", DRY, ids=[b.where for b in DRY])
def test_recipe_lines_say_what_their_dry_run_does(block: docblocks.Block, tmp_path: Path) -> None:
    """Each `bash recipes/R/run.sh ARGS  # N minutes of training ...` runs with --dry-run: every command it prints
    parses, its training budget is the comment's, and the options the page's prose names are the ones it runs."""
    prose = block.page.read_text(encoding="utf-8")
    for line in docblocks.shell_lines(block.text):
        words = shlex.split(line, comments=True)
        assert words[0] == "bash" and words[1].startswith("recipes/"), line
        done = subprocess.run(
            ["bash", str(ROOT / words[1]), *words[2:], "--dry-run"], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, f"{block.where}: {line}\n{done.stderr}"
        printed = [argv for out in done.stdout.splitlines() for argv in docblocks.commands(out)]
        for argv in printed:
            parse(argv)
        train = next(argv for argv in printed if argv[1] == "train")
        value = {w: train[i + 1] for i, w in enumerate(train[:-1]) if w.startswith("--")}
        said = re.search(r"#\s*(\d+) minutes of training", line)
        if said:
            assert float(value["--max-minutes"]) == float(said[1]), f"{block.where}: {line}"
        tokens = f"{int(value['--max-tokens']):,}"
        assert f"{tokens} tokens" in prose and f"{value['--warmup']} warmup" in prose, (block.where, tokens)
