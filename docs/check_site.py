"""Look at the built documentation as a user would: build it, open pages in headless Chromium, check what rendered.

    python docs/check_site.py                    # build into a temporary directory, check, keep nothing
    python docs/check_site.py --out shots/       # also keep a screenshot of each page (PNG) and its DOM

For each page it opens the built HTML (file://) in Chromium, takes the DOM after the page's scripts ran and a
screenshot, and checks that the theme rendered (Material's content area and navigation), that the page has the
tables it should, and that every image it shows resolves to a PNG inside the site. Chromium comes from Debian's
packages (`apt-get install chromium`); without it the script says so and exits 3. tests/test_docs_site.py runs it
when Chromium is there and skips with that reason when it is not.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_CHROMIUM = 3

# page (its URL under the site) -> (tables at least, images at least, a phrase the page must show)
PAGES = {
    "index.html": (2, 0, "Where to start"),
    "plots-info/index.html": (0, 1, "Learning curves"),
    "decoding/index.html": (1, 0, "The search"),
    "benchmarks/index.html": (10, 0, "What did not help"),
    "recipes/index.html": (3, 1, "Multi30k"),
}


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


def build(site: Path) -> None:
    """`mkdocs build --strict` into `site` (the same build .ci/run makes)."""
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        check=True,
        timeout=600,
    )


def browse(browser: str, page: Path, shot: Path) -> str:
    """The page's DOM after its scripts ran, and a screenshot of its first 1280 x 1600 pixels."""
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1600"]
    url = page.as_uri()
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    subprocess.run([*base, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=True)
    return dom


def problems(site: Path, url: str, dom: str, shot: Path) -> list[str]:
    tables, images, phrase = PAGES[url]
    found: list[str] = []
    if 'class="md-content"' not in dom or "md-nav" not in dom:
        found.append("the Material theme did not render (no md-content or md-nav)")
    if dom.count("<table") < tables:
        found.append(f"{dom.count('<table')} tables, expected at least {tables}")
    if phrase not in dom:
        found.append(f"the page does not show {phrase!r}")
    sources = [s for s in re.findall(r'<img [^>]*src="([^"]+)"', dom) if not s.startswith(("data:", "http"))]
    if len(sources) < images:
        found.append(f"{len(sources)} images, expected at least {images}")
    for src in sources:
        target = ((site / url).parent / src).resolve()
        if not target.is_file() or target.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            found.append(f"image {src} does not resolve to a PNG in the site")
    if not shot.is_file() or shot.stat().st_size < 10_000:  # a blank page compresses to a few kB
        found.append("the screenshot is missing or blank")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="Keep the screenshots and DOMs here.")
    args = parser.parse_args()
    browser = chromium()
    if browser is None:
        print("chromium is not installed (apt-get install chromium): the site was not looked at.", file=sys.stderr)
        return NO_CHROMIUM
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build(site)
        out = args.out or Path(tmp) / "shots"
        out.mkdir(parents=True, exist_ok=True)
        failed = 0
        for url in PAGES:
            name = url.replace("/index.html", "").replace(".html", "") or "index"
            shot = out / f"{name}.png"
            dom = browse(browser, site / url, shot)
            if args.out:
                (out / f"{name}.html").write_text(dom, encoding="utf-8")
            found = problems(site, url, dom, shot)
            failed += bool(found)
            print(f"{url}: " + ("; ".join(found) if found else "renders, with its tables and images"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
