"""Archive safety, SGML, line counting, the registry, and the binarized arrays."""

from __future__ import annotations

import io
import tarfile
import zipfile

import numpy as np
import pytest

from mtkit.data.binarize import BinaryWriter, IndexedDataset
from mtkit.data.corpora import default_registry
from mtkit.data.extract import read_sgml, stage_members, unescape_xml, unsafe_member
from mtkit.errors import MtkitError
from mtkit.files import count_lines


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "C:/x", "..\\x", ""])
def test_unsafe_member_names(name):
    assert unsafe_member(name) is not None


def test_safe_member_names():
    assert unsafe_member("training/europarl-v7.de-en.de") is None
    assert unsafe_member("./dev/newstest2013.de") is None


def _tar(path, infos):
    with tarfile.open(path, "w:gz") as tf:
        for info, data in infos:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name, data=b"x\n"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_tar_member_stage_reads_only_what_is_wanted(tmp_path):
    _tar(
        tmp_path / "a.tgz",
        [_file("./training/a.de", b"eins\n"), _file("training/a.en", b"one\n"), _file("other/big.txt", b"y" * 1000)],
    )
    got = stage_members(tmp_path / "a.tgz", "tar", {"training/a.de", "training/a.en"}, tmp_path / "stage")
    assert got["training/a.de"].read_bytes() == b"eins\n"
    assert not (tmp_path / "stage" / "other").exists()
    with pytest.raises(MtkitError, match="a.tgz has no member training/missing"):
        stage_members(tmp_path / "a.tgz", "tar", {"training/missing"}, tmp_path / "stage2")


def _symlink(name, target):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, None


@pytest.mark.parametrize(
    "entry",
    [_file("../outside.txt"), _file("/abs/outside.txt"), _symlink("training/link", "../../etc/passwd")],
    ids=["dotdot", "absolute", "symlink"],
)
def test_tar_traversal_is_refused(tmp_path, entry):
    _tar(tmp_path / "evil.tgz", [entry, _file("training/a.de")])
    with pytest.raises(MtkitError, match="would land outside the extraction directory"):
        stage_members(tmp_path / "evil.tgz", "tar", {"training/a.de"}, tmp_path / "stage")
    assert not (tmp_path / "outside.txt").exists()


def test_zip_traversal_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as zf:
        zf.writestr("ok.txt", "fine\n")
        zf.writestr("../../evil.txt", "bad\n")
    with pytest.raises(MtkitError, match="evil.zip holds a member '../../evil.txt'"):
        stage_members(tmp_path / "evil.zip", "zip", {"ok.txt"}, tmp_path / "stage")
    with zipfile.ZipFile(tmp_path / "good.zip", "w") as zf:
        zf.writestr("dir/ok.txt", "fine\n")
    staged = stage_members(tmp_path / "good.zip", "zip", {"dir/ok.txt"}, tmp_path / "s2")
    assert staged["dir/ok.txt"].read_text() == "fine\n"


def test_sgml_segments_are_unescaped(tmp_path):
    path = tmp_path / "t.sgm"
    path.write_text(
        '<srcset setid="x" srclang="en">\n<doc docid="1">\n<seg id="1"> A &amp; B </seg>\n'
        '<seg id="2">&lt;tag&gt; &quot;q&quot; &apos;a&apos; &#233;&#xe9;</seg>\n'
        '<seg id="3">&para and &copy stay</seg>\n</doc>\n</srcset>\n',
        encoding="utf-8",
    )
    assert read_sgml(path, "t.sgm") == ["A & B", "<tag> \"q\" 'a' éé", "&para and &copy stay"]
    assert unescape_xml("AT&T") == "AT&T"
    empty = tmp_path / "e.sgm"
    empty.write_text("<srcset>\n</srcset>\n")
    with pytest.raises(MtkitError, match="holds no <seg>"):
        read_sgml(empty, "e.sgm")


def test_count_lines(tmp_path):
    for data, n in [(b"", 0), (b"a", 1), (b"a\n", 1), (b"a\nb", 2), (b"\n\n", 2)]:
        (tmp_path / "f").write_bytes(data)
        assert count_lines(tmp_path / "f") == n


def test_registry_directions_share_files():
    reg = default_registry()
    assert set(reg.names()) >= {
        "wmt14-en-de",
        "wmt14-de-en",
        "wmt14-en-fr",
        "wmt14-fr-en",
        "multi30k-en-de",
        "multi30k-de-en",
    }
    fwd, rev = reg.get("wmt14-en-de"), reg.get("wmt14-de-en")
    assert (rev.src, rev.tgt) == ("de", "en")
    assert {s.filename for s in fwd.sources} == {s.filename for s in rev.sources}
    assert fwd.vocab_size == 37000 and reg.get("wmt14-en-fr").vocab_size == 32000
    assert reg.get("multi30k-en-de").vocab_size == 8000
    fr = reg.get("wmt14-en-fr")
    assert [p.name for p in fr.parts("train")] == [
        "europarl-v7",
        "commoncrawl",
        "un",
        "news-commentary-v9",
        "giga-fren",
    ]
    assert fr.parts("test")[0].member("fr").path == "test-full/newstest2014-fren-ref.fr.sgm"
    with pytest.raises(MtkitError, match="unknown corpus 'wmt15'; known corpora: wmt14-en-de, .*custom"):
        reg.get("wmt15")


def test_binary_writer_streams_offsets_and_keeps_the_format(tmp_path):
    prefix = tmp_path / "x"
    sents = [[5, 6, 7], [], [8], list(range(4, 40))]
    with BinaryWriter(prefix, 1000, buffer_tokens=4) as w:
        w.add_many([sents[0]])
        w.add_many(sents[1:3])
        w.add_many([np.asarray(sents[3])])
    ds = IndexedDataset(prefix)
    assert len(ds) == 4 and [ds[i].tolist() for i in range(4)] == sents
    assert ds.dtype == np.uint16 and ds.sizes.tolist() == [3, 0, 1, 36]
    assert np.fromfile(tmp_path / "x.idx", dtype=np.int64).tolist() == [0, 3, 3, 4, 40]
    with pytest.raises(MtkitError, match="out of range"):
        with BinaryWriter(tmp_path / "y", 10) as w:
            w.add_many([[1], [10]])
    assert not (tmp_path / "y.bin").exists() and not list(tmp_path.glob("*y.*tmp"))  # no temporary is left
    with BinaryWriter(tmp_path / "z", 70000) as w:
        w.add_many([[69999]])
    assert IndexedDataset(tmp_path / "z").dtype == np.int32
