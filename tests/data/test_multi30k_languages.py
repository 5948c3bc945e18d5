"""Multi30k's four languages: every English pair and its reverse, read from two mirror directories."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from mtkit.data.corpora import MULTI30K_SOURCES, default_registry
from mtkit.data.prepare import PrepareOptions, prepare
from mtkit.errors import MtkitError
from tests.support.corpora import SAMPLE, SHARED_MULTI30K


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


@pytest.mark.integration
def test_the_real_french_and_czech_files_match_the_registry(cli, tmp_path):
    fr_cs = SHARED_MULTI30K.parent / "multi30k-fr-cs"
    if not (fr_cs / "train.fr.gz").is_file() or not (SHARED_MULTI30K / "train.en.gz").is_file():
        pytest.skip(f"the Multi30k files are not at {SHARED_MULTI30K} and {fr_cs}")
    env = {"MTKIT_CACHE": str(tmp_path / "cache")}
    for name in ("multi30k-en-cs", "multi30k-fr-en"):
        out = tmp_path / name
        r = cli("prepare", name, "--mirror", SHARED_MULTI30K, "--mirror", fr_cs, "--out", out, env=env)
        assert r.returncode == 0, r.stderr
        other = "cs" if name.endswith("cs") else "fr"
        assert len((out / "raw" / f"train.{other}").read_bytes().splitlines()) == 29000
        assert (out / "raw" / f"test.{other}").read_bytes() == gzip.open(fr_cs / f"test_2016_flickr.{other}.gz").read()
