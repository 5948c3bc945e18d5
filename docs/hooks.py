"""MkDocs hooks: files the site shows that live elsewhere in the repository, added at build time, not copied.

The Multi30k recipe's learning curves stay in recipes/multi30k-en-de/ (its README embeds them); the site
serves the same file as img/multi30k-curves.png, so `mkdocs build --strict` can check the link to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = {"img/multi30k-curves.png": ROOT / "recipes" / "multi30k-en-de" / "curves.png"}


def on_files(files: Files, config: Any) -> Files:
    for uri, source in OUTSIDE.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files
