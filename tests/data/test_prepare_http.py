"""`prepare` through the real download path: a loopback HTTP server with WMT14-shaped archives."""

from __future__ import annotations

import hashlib
import json
import tarfile

import pytest

from mtkit.data.corpora import default_registry
from mtkit.data.fetch import RECORDED, VERIFIED, Fetcher
from mtkit.data.normalize import normalize
from mtkit.data.prepare import PrepareOptions, prepare
from mtkit.errors import MtkitError
from tests.support.archives import build_wmt14_de, build_wmt14_fr, make_tgz, serve


@pytest.fixture
def wmt(tmp_path, archive_server):
    fixture = build_wmt14_de(tmp_path / "archives")
    serve(fixture, archive_server)
    registry = default_registry().override(base_url=archive_server.url, sources=fixture.checksums())
    return fixture, registry


def _opts(tmp_path, **kw) -> PrepareOptions:
    return PrepareOptions(out=tmp_path / "out", cache=tmp_path / "cache", retries=2, backoff=0.01, workers=1, **kw)


def _read(path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_wmt14_en_de_end_to_end(tmp_path, wmt, archive_server):
    fixture, registry = wmt
    record = prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["prepare.json", "raw"]  # staging is gone
    assert sorted(p.name for p in (out / "raw").iterdir()) == [
        "test.de",
        "test.en",
        "train.de",
        "train.en",
        "valid.de",
        "valid.en",
    ]

    train = record["splits"]["train"]
    assert train["pairs_in"] == fixture.expect["train_in"]
    for rule, n in fixture.expect["dropped"].items():
        assert train["dropped"][rule] == n, rule
    assert train["dropped"]["duplicate"] == 0
    assert train["kept"] == train["pairs_in"] - sum(fixture.expect["dropped"].values())
    assert train["invalid_utf8_at"] == [fixture.expect["invalid_at"]]
    assert [p["name"] for p in train["parts"]] == ["europarl-v7", "commoncrawl", "news-commentary-v9"]
    en, de = _read(out / "raw/train.en"), _read(out / "raw/train.de")
    assert len(en) == len(de) == train["kept"]
    # Normalised: quotes folded, the tab gone, text otherwise kept.
    assert 'A "quoted" sentence with a tab in it .' in en
    assert normalize("Ein „zitierter“ Satz mit einem Tab\tdarin .", "de") in de
    assert not any("\t" in line for line in en + de)

    # Dev and test: as published, never normalised; SGML unescaped; En->De uses src.en + ref.de.
    assert _read(out / "raw/valid.en") == ["First  sentence with two spaces .", "Second sentence ."]
    assert _read(out / "raw/test.en") == [
        "Gutach: Increased safety for pedestrians",
        'AT&T said "yes" <really>',
        "Third ü ü segment",
    ]
    assert _read(out / "raw/test.de")[0] == "Gutach: Noch mehr Sicherheit für Fußgänger"
    assert record["splits"]["valid"]["lines"] == 2 and record["splits"]["test"]["lines"] == 3

    on_disk = json.loads((out / "prepare.json").read_text())
    assert on_disk["splits"]["train"]["dropped"] == train["dropped"]
    sources = {s["file"]: s for s in on_disk["sources"]}
    assert sources["training-parallel-europarl-v7.tgz"]["checksum"] == VERIFIED
    assert sources["training-parallel-europarl-v7.tgz"]["origin"] == "downloaded"
    assert on_disk["cleaning"]["ratio_unit"].startswith("whitespace-separated words")


def test_reverse_direction_and_rerun_fetch_nothing_again(tmp_path, wmt, archive_server):
    fixture, registry = wmt
    prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    first = len(archive_server.requests)
    assert first == len(fixture.files)
    record = prepare(
        "wmt14-de-en",
        PrepareOptions(out=tmp_path / "rev", cache=tmp_path / "cache", retries=0, workers=1),
        registry=registry,
    )
    assert len(archive_server.requests) == first  # the same downloads, from the cache
    assert {s["origin"] for s in record["sources"]} == {"cache"}
    rev = tmp_path / "rev" / "raw"
    # De->En reads newstest2014's src.de and ref.en, as sacreBLEU does.
    assert _read(rev / "test.de")[0].endswith("(src.de)")
    assert _read(rev / "test.en")[0].endswith("(ref.en)")
    assert _read(rev / "train.de") == _read(tmp_path / "out/raw/train.de")
    # Same corpus again: nothing is fetched or rewritten.
    again = prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    assert again["reused"] is True and len(archive_server.requests) == first


def test_download_resumes_after_a_cut_connection(tmp_path, wmt, archive_server):
    fixture, registry = wmt
    name = "training-parallel-europarl-v7.tgz"
    size = fixture.files[name].stat().st_size
    archive_server.cut_once[name] = size // 2
    prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    gets = archive_server.gets(name)
    assert [g.range for g in gets] == [None, f"bytes={size // 2}-"]  # resumed where it stopped
    cached = tmp_path / "cache" / "wmt" / name
    assert cached.read_bytes() == fixture.files[name].read_bytes()
    assert not cached.with_name(name + ".part").exists()


def test_checksum_mismatch_is_refused_and_the_file_deleted(tmp_path, wmt, archive_server):
    fixture, _ = wmt
    sums = fixture.checksums()
    sums["training-parallel-nc-v9.tgz"]["sha256"] = "0" * 64
    registry = default_registry().override(base_url=archive_server.url, sources=sums)
    with pytest.raises(
        MtkitError,
        match=r"training-parallel-nc-v9.tgz .* is not the expected file \(sha256 .* "
        r"instead of 0{64}\); it was deleted",
    ):
        prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    group = tmp_path / "cache" / "wmt"
    assert not (group / "training-parallel-nc-v9.tgz").exists()
    assert not (group / "training-parallel-nc-v9.tgz.part").exists()
    assert not (tmp_path / "out").exists()


def test_a_failed_rerun_keeps_the_previous_output(tmp_path, wmt, archive_server):
    fixture, registry = wmt
    prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out" / "raw").iterdir()}
    bad = fixture.dir / "bad.tgz"
    make_tgz(bad, {"training/news-commentary-v9.de-en.de": b"a\nb\n", "training/news-commentary-v9.de-en.en": b"a\n"})
    (archive_server.root / "training-parallel-nc-v9.tgz").write_bytes(bad.read_bytes())
    sums = fixture.checksums()
    sums["training-parallel-nc-v9.tgz"]["sha256"] = hashlib.sha256(bad.read_bytes()).hexdigest()
    registry = default_registry().override(base_url=archive_server.url, sources=sums)
    with pytest.raises(MtkitError, match="de-en.en in .* has 1 line but .*de-en.de in .* has 2 lines"):
        prepare("wmt14-en-de", _opts(tmp_path, force=True), registry=registry)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out" / "raw").iterdir()} == before
    assert [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")] == []


def test_unknown_checksum_is_recorded_then_checked(tmp_path, wmt, archive_server):
    fixture, _ = wmt
    sums = fixture.checksums()
    sums["dev.tgz"] = {"sha256": None, "md5": None, "size": None}
    registry = default_registry().override(base_url=archive_server.url, sources=sums)
    record = prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    dev = {s["file"]: s for s in record["sources"]}["dev.tgz"]
    assert dev["checksum"] == RECORDED
    # The record is kept with the cache; a changed cached file is dropped and fetched again.
    cached = tmp_path / "cache" / "wmt" / "dev.tgz"
    cached.write_bytes(b"corrupted")
    source = registry.get("wmt14-en-de").source("dev.tgz")
    got = Fetcher(tmp_path / "cache", retries=0).fetch(source)
    assert got.origin == "downloaded" and got.sha256 == dev["sha256"]


def test_path_traversal_member_is_refused(tmp_path, archive_server):
    fixture = build_wmt14_de(tmp_path / "archives")
    evil = tarfile.TarInfo("../../evil.txt")
    evil.size = 0
    make_tgz(
        fixture.files["training-parallel-nc-v9.tgz"],
        {"training/news-commentary-v9.de-en.de": b"a\n", "training/news-commentary-v9.de-en.en": b"b\n"},
        extra=[evil],
    )
    serve(fixture, archive_server)
    registry = default_registry().override(base_url=archive_server.url, sources=fixture.checksums())
    with pytest.raises(
        MtkitError,
        match=r"training-parallel-nc-v9.tgz holds a member '\.\./\.\./evil.txt' that would "
        r"land outside",
    ):
        prepare("wmt14-en-de", _opts(tmp_path), registry=registry)
    assert not list(tmp_path.rglob("evil.txt"))
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == []  # no raw/, no staging left (nor the --out it made)


def test_cli_refuses_files_that_do_not_match_the_real_checksums(tmp_path, wmt, archive_server, cli):
    """--base-url with the real registry: the small test archives are not the published files."""
    r = cli(
        "prepare",
        "wmt14-en-de",
        "--base-url",
        archive_server.url,
        "--cache",
        tmp_path / "cache",
        "--out",
        tmp_path / "out",
        "--retries",
        "0",
    )
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "is not the expected file" in r.stderr and "it was deleted and nothing was used" in r.stderr
    assert not (tmp_path / "out" / "raw").exists()


def test_cli_without_network_says_so_in_one_sentence(tmp_path, cli):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = cli(
        "prepare",
        "wmt14-en-de",
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--cache",
        tmp_path / "cache",
        "--out",
        tmp_path / "out",
        "--retries",
        "0",
    )
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("mtkit: error:")]
    assert len(lines) == 1
    assert "cannot download training-parallel-europarl-v7.tgz" in lines[0] and "--mirror" in lines[0]


def test_cli_mirror_names_each_missing_file_with_its_url(tmp_path, cli):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    r = cli("prepare", "wmt14-en-de", "--mirror", mirror, "--cache", tmp_path / "cache", "--out", tmp_path / "out")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "lacks 5 file(s)" in r.stderr
    europarl = "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz"
    assert f"training-parallel-europarl-v7.tgz from {europarl}" in r.stderr
    assert "test-full.tgz from https://www.statmt.org/wmt14/test-full.tgz" in r.stderr


def test_mirror_serves_the_files_without_network(tmp_path, wmt):
    fixture, registry = wmt
    offline = default_registry().override(base_url="http://127.0.0.1:9", sources=fixture.checksums())
    record = prepare("wmt14-en-de", _opts(tmp_path, mirror=fixture.dir), registry=offline)
    assert {s["origin"] for s in record["sources"]} == {"mirror"}
    assert record["splits"]["train"]["kept"] == fixture.expect["train_in"] - 4


def test_wmt14_en_fr_and_fr_en_with_giga_fren_inside_a_plain_tar(tmp_path, archive_server):
    fixture = build_wmt14_fr(tmp_path / "archives")
    serve(fixture, archive_server)
    registry = default_registry().override(base_url=archive_server.url, sources=fixture.checksums())
    record = prepare("wmt14-en-fr", _opts(tmp_path), registry=registry)
    train = record["splits"]["train"]
    assert train["pairs_in"] == train["kept"] == fixture.expect["train_in"]
    assert [p["name"] for p in train["parts"]] == [
        "europarl-v7",
        "commoncrawl",
        "un",
        "news-commentary-v9",
        "giga-fren",
    ]
    out = tmp_path / "out" / "raw"
    assert _read(out / "train.fr")[-1] == "La phrase giga numéro 5 est une bonne phrase ."
    assert _read(out / "test.en") == ["Hello & welcome"] and _read(out / "test.fr") == ["Bonjour & bienvenue"]
    rev = prepare(
        "wmt14-fr-en",
        PrepareOptions(out=tmp_path / "rev", cache=tmp_path / "cache", retries=0, workers=1),
        registry=registry,
    )
    assert {s["origin"] for s in rev["sources"]} == {"cache"}
    assert _read(tmp_path / "rev" / "raw" / "test.fr") == ["Bonjour (src.fr)"]
    assert _read(tmp_path / "rev" / "raw" / "test.en") == ["Hello (ref.en)"]
