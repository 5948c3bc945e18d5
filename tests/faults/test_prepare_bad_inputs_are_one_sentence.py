"""Bad inputs to `prepare` end in one sentence and exit 1, never a traceback; odd lines never shift pairs."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from mtkit.data.corpora import default_registry, unpinned
from tests.support.cli import ROOT


def _error(done) -> str:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("mtkit: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def _custom(cli, tmp_path: Path, files: dict[str, bytes]):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    names = {split: [n for n in files if n.startswith(split)] for split in ("train", "valid")}
    args = []
    for split, (src, tgt) in ((s, sorted(n, key=lambda x: ".de" in x)) for s, n in names.items()):
        args += [f"--{split}-src", tmp_path / src, f"--{split}-tgt", tmp_path / tgt]
    return cli("prepare", "custom", "--out", tmp_path / "out", "--src-lang", "en", "--tgt-lang", "de", *args)


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not gzip"])
@pytest.mark.parametrize("split", ["train", "valid"])
def test_a_damaged_gz_is_one_sentence_naming_the_file(cli, tmp_path, damage, split):
    good = gzip.compress(b"".join(b"a small house number %d .\n" % i for i in range(2000)), mtime=0)
    bad = {
        "truncated": good[: len(good) // 2],
        "corrupt": good[:30] + b"\xff" * 40 + good[70:],
        "not gzip": b"plain text, not gzip\n",
    }[damage]
    files = {"train.en.gz": good, "train.de.gz": good, "valid.en.gz": good, "valid.de.gz": good}
    files[f"{split}.de.gz"] = bad
    line = _error(_custom(cli, tmp_path, files))
    assert f"cannot read {tmp_path / f'{split}.de.gz'}" in line
    assert not (tmp_path / "out" / "raw").exists()


def test_a_base_url_without_a_scheme_is_one_sentence(cli, tmp_path):
    line = _error(
        cli(
            "prepare",
            "wmt14-en-de",
            "--base-url",
            "mirror.example.org/wmt14",
            "--out",
            tmp_path / "o",
            "--cache",
            tmp_path / "cache",
        )
    )
    assert "--base-url 'mirror.example.org/wmt14' is not a URL" in line and "--mirror" in line


def test_a_dev_line_with_an_inner_carriage_return_shifts_no_pair(cli, tmp_path):
    done = _custom(
        cli,
        tmp_path,
        {
            "train.en": b"a b\nc d\n",
            "train.de": b"x y\nz w\n",
            "valid.en": b"one\r\nsplit\rhere\nthree\r\n",
            "valid.de": b"eins\nzwei\ndrei\n",
        },
    )
    assert done.returncode == 0, done.stderr
    assert "line break inside" in done.stderr
    raw = tmp_path / "out" / "raw"
    for lang, expect in (("en", ["one", "split here", "three"]), ("de", ["eins", "zwei", "drei"])):
        # Universal newlines (Python's default), splitlines and a split at "\n" all see the same three lines.
        with open(raw / f"valid.{lang}", encoding="utf-8") as f:
            assert [line.rstrip("\n") for line in f] == expect
        text = (raw / f"valid.{lang}").read_text(encoding="utf-8")
        assert text.splitlines() == text.split("\n")[:-1] == expect


def test_torch_is_required_at_a_version_where_weights_only_is_safe():
    pins = re.findall(r'"torch>=(\d+)\.(\d+)', (ROOT / "pyproject.toml").read_text())
    assert pins and all((int(a), int(b)) >= (2, 10) for a, b in pins)  # CVE-2025-32434 (2.6), CVE-2026-24747 (2.10)


def test_wmt_downloads_use_https_and_list_says_which_are_unpinned(cli):
    sources = {s.filename: s for c in default_registry() for s in c.sources}
    assert all(s.url.startswith("https://") for s in sources.values())
    loose = unpinned(default_registry())
    assert set(loose) == {"dev.tgz", "training-parallel-un.tgz", "training-giga-fren.tar", "test-full.tgz"}
    assert all(sources[name].sha256 for name in set(sources) - set(loose))
    listing = " ".join(cli("prepare", "--list").stdout.split())
    assert "unpinned downloads" in listing
    for name, why in loose.items():
        assert f"{name} ({why})" in listing
    assert "training-parallel-europarl-v7.tgz (" not in listing
