"""The built site as a user sees it (docs/check_site.py): each page 1280 and 390 px wide, with its tables and
images, no code block cut at the right edge; skipped, with the reason, without Chromium or MkDocs."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_pages_render_with_their_tables_and_images_and_nothing_cut_at_laptop_and_phone_widths():
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    if not any(shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("chromium is not installed (apt-get install chromium): the built pages were not looked at")
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "check_site.py")], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
