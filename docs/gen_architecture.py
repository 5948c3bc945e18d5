"""Write docs/architecture.md's layer table and diagram from pyproject.toml's import-linter contract.

    python docs/gen_architecture.py            # rewrite the region between the <!-- layers:... --> marks
    python docs/gen_architecture.py --check    # exit 1 if the committed page differs (tests/test_architecture_doc.py)

The order of the layers and which packages share one are the contract's (what `lint-imports` enforces in CI);
what each package does is said once, in WHAT below. A package the contract names without a line in WHAT is an
error, so a new layer cannot reach the page undescribed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layers:begin (docs/gen_architecture.py writes this from pyproject.toml's import-linter contract) -->"
END = "<!-- layers:end -->"
REGION = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)

WHAT = {
    "cli": (
        "the typer app: parses options, builds a config, calls one library function, turns `MtkitError` into "
        "one sentence and an exit code"
    ),
    "serve": "HTTP serving",
    "export": "CTranslate2 and Transformers export",
    "info": "`mtkit info` as text: what mtkit/sources/ says a model, a run or an export is",
    "documents": (
        "files translated with their structure kept (`translate_document`): one module a format (paragraphs, "
        "HTML, Markdown, subtitles, gettext, XLIFF, .docx), for `translate -i FILE` and the server"
    ),
    "train": (
        "the training loop: accumulation, precision, DDP, validation, checkpoint cadence, resume, signals, "
        "the run directory"
    ),
    "distill": ("sequence-level distillation: a teacher's translations of a data directory as a new one, resumable"),
    "shortlist": "a model file that carries its lexical shortlist, learnt from a data directory",
    "decode": (
        "the engines (mtkit's search, CTranslate2) behind one interface, found once, checked once and opened with "
        "their runtime decided once (`loading`), "
        "beam search, sampling, ensembles, prefixes, scoring pairs, the `Translator` text pipeline"
    ),
    "runtime": (
        "decisions about how to run: precision, the fp32 matmul backend, weight packing, kernel-cache caps, "
        "int8; each a value made once by an entry point and applied once"
    ),
    "average": "model files made of checkpoints: the average of the last N, one checkpoint without its training state",
    "sources": (
        "what a model name is, asked once: an mtkit file, a run directory, a Marian or OPUS-MT directory, a "
        "CTranslate2 export, a Hub name; each kind a class (claims, engine, checkpoint, decode_defaults, describe)"
    ),
    "marian": (
        "Marian as Transformers holds it, in and out: weights, the OPUS-MT reader, config sizes, "
        "the Hugging Face export and its model card"
    ),
    "checkpoint": "the file format: atomic save, safe load, the model rebuilt from its config",
    "model": "the Transformer of the paper, sections 3.1-3.5, class by class; the decoder's key/value cache",
    "kernels": (
        "oneDNN linear, packed weights, attention paths, the dropout mask: how to compute, with no decisions "
        "and no timings"
    ),
    "data": "corpora registry, download, extraction, cleaning, the tokenizers (SentencePiece, OPUS-MT's), binarized "
    "arrays, batching",
    "base": "small modules the rest shares",
    "interrupts": "SIGTERM as Ctrl-C, and both signals held back over the lines that make a file and its cleanup",
}


def layers() -> list[tuple[list[str], str]]:
    """The contract's layers, top first: (module names, "|" independent or ":" allowed to import each other)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    found = []
    for layer in contract["layers"]:
        sep = ":" if ":" in layer else "|"
        found.append(([name.strip() for name in layer.split(sep)], sep))
    return found


def _what(names: list[str]) -> str:
    key = "base" if len(names) > 3 else None
    if key:
        return f"{WHAT[key]}: " + ", ".join(f"`{n}`" for n in names)
    missing = [n for n in names if n not in WHAT]
    if missing:
        raise SystemExit(f"docs/gen_architecture.py: say in WHAT what {', '.join(missing)} does")
    return "; ".join(f"`mtkit.{n}`: {WHAT[n]}" if len(names) > 1 else WHAT[n] for n in names)


def generate() -> str:
    rows = ["| layer | package | what it does |", "|---|---|---|"]
    diagram = []
    for number, (names, sep) in enumerate(layers(), 1):
        if len(names) > 3:
            package = "base modules" + (" (may import each other)" if sep == ":" else "")
        else:
            package = ", ".join(f"`mtkit.{n}`" for n in names) + (
                " (independent of each other)" if len(names) > 1 and sep == "|" else ""
            )
        rows.append(f"| {number} | {package} | {_what(names)} |")
        indent = "  " * (number - 1) + ("└─> " if number > 1 else "")
        if len(names) > 3:  # the base layer: its names six to a line
            lines = [", ".join(names[i : i + 6]) for i in range(0, len(names), 6)]
            diagram.append(indent + "base: " + lines[0])
            diagram += [" " * (len(indent) + 6) + line for line in lines[1:]]
        else:
            diagram.append(indent + f" {sep} ".join(f"mtkit.{n}" for n in names))
    return "\n".join([*rows, "", "```text", *diagram, "```"])


def render(text: str) -> str:
    if not REGION.search(text):
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no {BEGIN} ... {END} region")
    return REGION.sub(lambda _: f"{BEGIN}\n{generate()}\n{END}", text, count=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs, write nothing")
    args = parser.parse_args()
    text = PAGE.read_text(encoding="utf-8")
    new = render(text)
    if args.check:
        if new != text:
            print("docs/architecture.md's layers differ from pyproject.toml: run `python docs/gen_architecture.py`")
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
