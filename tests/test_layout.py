"""The shape of the house (docs/architecture.md): one concept a file, each comfortably readable.

The layers themselves and the absence of import cycles are checked by import-linter (`lint-imports`,
configured in pyproject.toml and run by .ci/run), which reads every import, those inside functions too.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400


def test_no_module_of_mtkit_or_bench_is_over_400_lines() -> None:
    files = sorted([*(ROOT / "mtkit").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    assert len(files) > 50  # the walk found the packages
    long = {
        str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concept (at most {MAX_LINES} lines each): {long}"


def test_tests_share_code_through_tests_support_only() -> None:
    """A test module or a conftest is never imported as a library: shared helpers live in tests/support/."""
    pattern = re.compile(r"^\s*(?:from|import)\s+tests\.(?!support\b)([\w.]+)", re.M)
    found = {
        str(f.relative_to(ROOT)): pattern.findall(f.read_text(encoding="utf-8")) for f in (ROOT / "tests").rglob("*.py")
    }
    assert len(found) > 50
    assert not {name: hits for name, hits in found.items() if hits}
