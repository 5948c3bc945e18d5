"""The built site as a user sees it (docs/check_site.py): skipped, with the reason, without Chromium or MkDocs."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_home_command_and_benchmark_pages_render_with_their_tables_and_images():
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    if not any(shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("chromium is not installed (apt-get install chromium): the built pages were not looked at")
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "check_site.py")], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
