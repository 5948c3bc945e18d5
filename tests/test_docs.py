"""The documentation keeps its promises: the CLI reference is the app's own help, the README stays one screenful
in the issue's order, the CHANGELOG has a section for the version `mtkit --version` prints."""

import re
import subprocess
import sys
from pathlib import Path

import mtkit

ROOT = Path(__file__).resolve().parents[1]


def test_cli_reference_is_what_the_app_generates():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_cli
    finally:
        sys.path.remove(str(ROOT / "docs"))
    committed = gen_cli.PAGE.read_text(encoding="utf-8") if gen_cli.PAGE.exists() else ""
    assert committed == gen_cli.generate(), (
        "docs/reference/cli.md differs from the app's --help: run `python docs/gen_cli.py` and commit the page"
    )


def test_cli_reference_does_not_depend_on_the_terminal(tmp_path):
    """Generated in a narrow, colourless terminal and in a wide, coloured one: the same page."""
    pages = []
    for env in ({"COLUMNS": "40", "NO_COLOR": "1", "TERM": "dumb"}, {"COLUMNS": "250", "FORCE_COLOR": "1"}):
        done = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, 'docs'); import gen_cli; print(gen_cli.generate())"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        pages.append(done.stdout)
    assert pages[0] == pages[1]


def test_readme_is_one_screenful_of_commands_in_the_issues_order():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    headings = re.findall(r"^## (.+)$", readme, re.M)
    order = ["Install", "Two commands", "A tour", "Results", "Where to go next"]
    assert [h for h in headings if h in order] == order, headings
    quickstart = next(b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "bash recipes/" in b)
    assert readme.index("mtkit translate -m Helsinki-NLP/") < readme.index("## Install"), "translating comes first"
    script = re.search(r"bash (recipes/\S+/run\.sh)", quickstart)
    assert script and (ROOT / script[1]).is_file(), "the quickstart runs a recipe that exists"


def test_readme_links_point_at_files_that_exist():
    """The site's own links are checked by `mkdocs build --strict` (.ci/run); the README is not part of the site."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        assert "://" in target or (ROOT / target).exists(), target


def test_changelog_has_unreleased_then_the_current_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert versions[:2] == ["Unreleased", mtkit.__version__], versions
    kinds = set(re.findall(r"^### (.+)$", changelog, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds


def test_the_package_version_is_read_from_mtkit():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'version = { attr = "mtkit.__version__" }' in pyproject
