"""Look at the built documentation as a user would: build it, open pages in headless Chromium, check what rendered.

    python docs/check_site.py                    # build into a temporary directory, check, keep nothing
    python docs/check_site.py --out shots/       # also keep a screenshot of each page (PNG) and its DOM

Each page is looked at 1280 px wide (a laptop) and 390 px wide (a phone): nothing may run past the page's
right edge, and no code block may hide part of a line (a script added to a copy of the page measures both in
the browser and writes what it found into the DOM).

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
    "getting-started/index.html": (2, 0, "Quickstart"),
    "faq/index.html": (0, 0, "troubleshooting"),
    "environment/index.html": (2, 0, "MTKIT_CACHE"),
    "reference/api/index.html": (4, 0, "max_tokens"),
    "gpus/index.html": (0, 0, "scontrol requeue"),
}
WIDTHS = (1280, 390)
# Counts, in the browser after layout, the code blocks whose lines are cut (wider than their box and not
# wrapped) and whether the page is wider than the window; writes both into the DOM for --dump-dom.
MEASURE = """<script>
window.addEventListener("load", () => {
  const cut = [...document.querySelectorAll("pre > code")].filter(c => c.scrollWidth > c.clientWidth + 1);
  const report = document.createElement("div");
  report.id = "overflow-report";
  report.textContent = `cut-code:${cut.length} page-wider:${document.documentElement.scrollWidth > innerWidth}`;
  document.body.appendChild(report);
});
</script>"""


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


def browse(browser: str, page: Path, shot: Path, width: int) -> str:
    """The page's DOM after its scripts ran (with the overflow report), and a screenshot `width` px wide."""
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},1600"]
    measured = page.with_name(f".measure-{width}.html")
    measured.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    wait = ["--virtual-time-budget=3000"]
    dom = subprocess.run(
        [*base, *wait, "--dump-dom", measured.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    measured.unlink()
    subprocess.run([*base, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
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
    report = re.search(r'<div id="overflow-report">cut-code:(\d+) page-wider:(\w+)</div>', dom)
    if report is None:
        found.append("the overflow measurement did not run")
    else:
        if int(report[1]):
            found.append(f"{report[1]} code blocks cut at the right edge")
        if report[2] == "true":
            found.append("the page is wider than the window")
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
            for width in WIDTHS:
                name = (url.replace("/index.html", "").replace(".html", "") or "index").replace("/", "-")
                shot = out / f"{name}-{width}.png"
                dom = browse(browser, site / url, shot, width)
                if args.out:
                    (out / f"{name}-{width}.html").write_text(dom, encoding="utf-8")
                found = problems(site, url, dom, shot)
                failed += bool(found)
                print(f"{url} at {width} px: " + ("; ".join(found) if found else "renders, nothing cut"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
