"""MkDocs hooks: what the site shows that the code already says, added at build time, not copied.

(The Multi30k recipe's learning curves are a file of the site, docs/img/multi30k-curves.png, which the recipe's
README embeds from there: an image the site alone served was missing wherever the Markdown is read.)

- `<!-- config-fields: mtkit.config.ModelConfig -->` in a page becomes a table of that config's fields: name,
  type, default, the command-line flag, and the help (the `option(default, help)` text, else the comment
  beside the field in the source), so the Python API reference shows what `--help` shows and cannot drift.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[1]
FIELDS = re.compile(r"^<!-- config-fields: ([\w.]+) -->$", re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return FIELDS.sub(lambda m: field_table(m[1]), markdown)


def _comments(cls: type) -> dict[str, str]:
    """The trailing `# comment` of each field line in the class's source."""
    found = {}
    for line in inspect.getsource(cls).splitlines():
        match = re.match(r"^    (\w+): [^=]+=.*?#\s*(.+)$", line)
        if match:
            found[match[1]] = match[2].strip()
    return found


def _cell(text: str) -> str:
    """`|` escaped for a table cell, except inside code spans, where Python-Markdown keeps it in the cell and would
    show the backslash."""
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(text.split("`")))


def field_table(dotted: str) -> str:
    if str(ROOT) not in sys.path:  # `mkdocs build` from a checkout where mtkit is not installed
        sys.path.insert(0, str(ROOT))
    module, name = dotted.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    comments = _comments(cls)
    rows = ["| field | type | default | flag | what it is |", "|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        helped = "help" in f.metadata
        flag = f"`--{f.name.replace('_', '-')}`" if helped else ""
        text = f.metadata["help"] if helped else comments.get(f.name, "")
        if f.metadata.get("choices"):
            text += f" Choices: {', '.join(f.metadata['choices'])}."
        kind = str(f.type).replace(" | ", " or ")
        rows.append(f"| `{f.name}` | `{kind}` | `{default!r}` | {flag} | {_cell(text)} |")
    return "\n".join(rows)
