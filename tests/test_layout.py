"""The shape of the house (docs/architecture.md): one concept a file, each comfortably readable.

The layers themselves and the absence of import cycles are checked by import-linter (`lint-imports`,
configured in pyproject.toml and run by .ci/run), which reads every import, those inside functions too.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
# A concept is not cut to meet the count: a module may run past MAX_LINES, up to LONGEST, when it is one idea
# that reads best whole. Each entry says why; the lead adds entries at review.
LONGEST = 450
ALLOWED: dict[str, str] = {
    # "mtkit/path/module.py": "why this concept is one file of more than 400 lines",
    "mtkit/data/bpe.py": (
        "one resumable step with its record: the vocabulary (learned, reused, or a model's own with --from, "
        "per-language sampling for several pairs) and every split encoded with it"
    ),
    "mtkit/train/trainer.py": (
        "the training loop of section 5 and train(), its composition root: what is left once settings, plans "
        "(the language pairs' mix included), validation, resume, the run's configs and fine-tuning live in "
        "their own modules"
    ),
}


def lines_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_mtkit_or_bench_is_over_400_lines_unless_allowed_with_a_reason() -> None:
    files = sorted([*(ROOT / "mtkit").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    assert len(files) > 50  # the walk found the packages
    long = {str(f.relative_to(ROOT)): n for f in files if (n := lines_of(f)) > MAX_LINES}
    unexplained = {name: n for name, n in long.items() if name not in ALLOWED or n > LONGEST}
    assert not unexplained, (
        f"split these by concept (at most {MAX_LINES} lines each), or give a whole concept of up to {LONGEST} "
        f"lines an entry with its reason in ALLOWED: {unexplained}"
    )


def test_each_allowed_module_exists_is_long_and_says_why() -> None:
    for name, why in ALLOWED.items():
        path = ROOT / name
        assert path.is_file(), f"{name} is allowed but does not exist: remove its entry"
        assert lines_of(path) > MAX_LINES, f"{name} is back under {MAX_LINES} lines: remove its entry"
        assert len(why.split()) >= 5, f"{name}: say why it is one concept of more than {MAX_LINES} lines"


def test_tests_share_code_through_tests_support_only() -> None:
    """A test module or a conftest is never imported as a library: shared helpers live in tests/support/."""
    pattern = re.compile(r"^\s*(?:from|import)\s+tests\.(?!support\b)([\w.]+)", re.M)
    found = {
        str(f.relative_to(ROOT)): pattern.findall(f.read_text(encoding="utf-8")) for f in (ROOT / "tests").rglob("*.py")
    }
    assert len(found) > 50
    assert not {name: hits for name, hits in found.items() if hits}
