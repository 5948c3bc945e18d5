"""Fault sweep: run every test in tests/faults/ and print what mtkit survives as a table "fault | expected | got".

    python bench/faults.py                 # all of tests/faults/
    python bench/faults.py -k train        # only the training faults
    python bench/faults.py -k serve        # only the server's (issue 37 rows 1-4: Origin, Host, key, bodies, hook)

Each test drives the real `mtkit` command (`python -m mtkit` with this interpreter, the same
code the installed console script runs) with tiny models, signals sent by the test, damaged
files or a mocked full disk. A test whose docstring reads "fault: ...; expected: ..." gives
its row those words; any other is named by its file and function. "got" is "as expected"
when the test passed, else the first line of its failure. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "faults"
sys.path.insert(0, str(ROOT))  # the tests import `tests.*`; a script's sys.path[0] is bench/, not the checkout
DOCSTRING = re.compile(r"fault:\s*(?P<fault>.+?);\s*expected:\s*(?P<expected>.+?)\.?\s*$", re.S)


def _sentence(name: str) -> str:
    return name.removeprefix("test_").replace("_", " ")


class _Collector:
    """A pytest plugin that keeps each test's docstring and outcome."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:  # after -k deselection
            doc = " ".join((getattr(item, "function", None).__doc__ or "").split())  # type: ignore[union-attr]
            m = DOCSTRING.search(doc)
            module = _sentence(Path(str(item.fspath)).stem)
            fault = m["fault"] if m else f"{module}: {_sentence(item.name.split('[')[0])}"
            if hasattr(item, "callspec"):
                fault += f" [{item.callspec.id}]"
            self.rows[item.nodeid] = {
                "fault": fault,
                "expected": m["expected"] if m else "the test passes",
                "got": "not run",
                "passed": False,
            }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.rows.get(report.nodeid)
        if row is None or (report.when != "call" and report.passed):
            return
        if report.passed:
            row.update(got="as expected", passed=True)
        elif report.skipped:
            row.update(got="skipped", passed=False)
        else:
            first = str(report.longrepr).strip().splitlines()
            row.update(got=f"FAILED ({report.when}): {first[-1][:100] if first else ''}", passed=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="Only the faults whose test names match (pytest -k).")
    args = parser.parse_args()
    collector = _Collector()
    start = time.monotonic()
    pytest_args = [str(FAULTS), "-q", "-p", "no:cacheprovider", "--no-header", "-rN"]
    code = pytest.main([*pytest_args, *(["-k", args.k] if args.k else [])], plugins=[collector])
    rows = list(collector.rows.values())
    width = max((len(r["fault"]) for r in rows), default=5)
    print(f"\n{'fault':<{width}} | expected | got")
    for r in rows:
        print(f"{r['fault']:<{width}} | {r['expected']} | {r['got']}")
    survived = sum(r["passed"] for r in rows)
    print(
        json.dumps(
            {
                "bench": "faults",
                "python": sys.executable,
                "faults": len(rows),
                "survived": survived,
                "failed": [r["fault"] for r in rows if not r["passed"]],
                "seconds": round(time.monotonic() - start, 1),
                "pytest_exit": int(code),
            }
        )
    )
    return 0 if survived == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
