"""Multi30k's four languages: every English pair and its reverse, read from two mirror directories or from the
copy that ships with mtkit (mtkit/data/multi30k), offline."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from mtkit.data.corpora import MULTI30K_SOURCES, SHIPPED_MULTI30K, default_registry, shipped_copy
from mtkit.data.prepare import PrepareOptions, prepare
from mtkit.errors import MtkitError
from tests.support.corpora import SAMPLE


def test_every_english_pair_and_its_reverse_is_registered_with_only_its_own_files():
    reg = default_registry()
    for other in ("de", "fr", "cs"):
        fwd, rev = reg.get(f"multi30k-en-{other}"), reg.get(f"multi30k-{other}-en")
        assert (fwd.src, fwd.tgt, rev.src, rev.tgt) == ("en", other, other, "en")
        files = {s.filename for s in fwd.sources}
        assert files == {f"{stem}.{lang}.gz" for stem in ("train", "val", "test_2016_flickr") for lang in ("en", other)}
        assert files == {s.filename for s in rev.sources}
        assert fwd.parts("test")[0].member(other).source == f"test_2016_flickr.{other}.gz"
        assert fwd.vocab_size == 8000
    # One cache group: the English files an En-De run fetched serve En-Fr and En-Cs too.
    assert len({s.group for s in MULTI30K_SOURCES}) == 1 and all(s.pinned == "sha256" for s in MULTI30K_SOURCES)


def _mirrors(tmp_path):
    """The shipped English sample in one directory, a made-up French side in another, with their checksums."""
    en_de, fr_cs = tmp_path / "en-de", tmp_path / "fr-cs"
    en_de.mkdir()
    fr_cs.mkdir()
    sums = {}
    for stem in ("train", "val", "test_2016_flickr"):
        english = (SAMPLE / f"{stem}.en").read_text(encoding="utf-8").splitlines()
        french = [f"une phrase {i} ." for i in range(len(english))]
        for directory, lang, lines in ((en_de, "en", english), (fr_cs, "fr", french)):
            data = gzip.compress("".join(line + "\n" for line in lines).encode("utf-8"), mtime=0)
            (directory / f"{stem}.{lang}.gz").write_bytes(data)
            sums[f"{stem}.{lang}.gz"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    return en_de, fr_cs, default_registry().override(sources=sums)


def test_en_fr_and_fr_en_read_two_mirror_directories(tmp_path):
    en_de, fr_cs, registry = _mirrors(tmp_path)
    for name, src, tgt in (("multi30k-en-fr", "en", "fr"), ("multi30k-fr-en", "fr", "en")):
        out = tmp_path / name
        opts = PrepareOptions(out=out, cache=tmp_path / "cache", mirror=[en_de, fr_cs], workers=1)
        record = prepare(name, opts, registry=registry)
        assert (record["src_lang"], record["tgt_lang"]) == (src, tgt)
        for split, stem in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
            assert (out / "raw" / f"{split}.fr").read_bytes() == gzip.open(fr_cs / f"{stem}.fr.gz").read()
            assert (out / "raw" / f"{split}.en").read_bytes() == gzip.open(en_de / f"{stem}.en.gz").read()


def test_a_file_in_neither_mirror_is_named(tmp_path):
    en_de, _, registry = _mirrors(tmp_path)
    opts = PrepareOptions(out=tmp_path / "out", cache=tmp_path / "cache", mirror=[en_de], workers=1)
    with pytest.raises(MtkitError, match=r"lacks 3 file\(s\) that multi30k-en-cs needs; download train.cs.gz"):
        prepare("multi30k-en-cs", opts, registry=registry)


def test_the_shipped_copy_is_the_registrys_files_and_its_readme_lists_them():
    readme = (SHIPPED_MULTI30K / "README.md").read_text(encoding="utf-8")
    for source in MULTI30K_SOURCES:
        data = (SHIPPED_MULTI30K / source.filename).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (source.sha256, source.size), source.filename
        assert f"| {source.filename} |" in readme and f"`{source.sha256}`" in readme
    assert "https://github.com/multi30k/dataset" in readme and "non-commercial" in readme


def test_only_multi30k_as_registered_reads_the_shipped_copy():
    registry = default_registry()
    for name in ("multi30k-en-de", "multi30k-de-en", "multi30k-en-fr", "multi30k-cs-en"):
        assert shipped_copy(registry.get(name)) == SHIPPED_MULTI30K
    assert shipped_copy(registry.get("wmt14-en-de")) is None
    # A registry pointed at another server, or with other checksums (as the tests make one), fetches as it says.
    moved = registry.override(base_url="https://mirror.example.org/m30k").get("multi30k-en-de")
    assert shipped_copy(moved) is None


@pytest.mark.integration
def test_the_named_corpora_prepare_offline_from_the_shipped_copy(cli, tmp_path):
    """No --mirror, no network (an unreachable proxy would fail any download): the shipped files are read."""
    env = {
        "MTKIT_CACHE": str(tmp_path / "cache"),
        "https_proxy": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    for name in ("multi30k-en-cs", "multi30k-fr-en"):
        out = tmp_path / name
        r = cli("prepare", name, "--out", out, "--workers", "1", env=env)
        assert r.returncode == 0, r.stderr
        assert "ships with mtkit" in r.stderr
        other = "cs" if name.endswith("cs") else "fr"
        assert len((out / "raw" / f"train.{other}").read_bytes().splitlines()) == 29000
        shipped = gzip.open(SHIPPED_MULTI30K / f"test_2016_flickr.{other}.gz").read()
        assert (out / "raw" / f"test.{other}").read_bytes() == shipped
