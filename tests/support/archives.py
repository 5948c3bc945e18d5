"""Small archives in the WMT14 shapes, and a loopback HTTP server that serves them, for the data tests.

The server (127.0.0.1, port 0, a thread of the test) serves files from a directory, honours
`Range: bytes=N-`, logs every request, and can be told to cut the connection once, mid-file,
for a given file.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path


# --------------------------------------------------------------------------- WMT-shaped archives
def add_text(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tf.addfile(info, io.BytesIO(data))


def make_tgz(path: Path, members: dict[str, bytes], extra: list[tarfile.TarInfo] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info in extra or []:
            tf.addfile(info)
        for name, data in members.items():
            add_text(tf, name, data)
    return path


def lines(*items: str) -> bytes:
    return "".join(f"{x}\n" for x in items).encode("utf-8")


def parallel(n: int, tag: str) -> tuple[list[str], list[str]]:
    """n clean pairs of plausible sentences with a distinct tag, German side first."""
    de = [f"Der {tag} Satz Nummer {i} ist ein guter Satz für die Prüfung ." for i in range(n)]
    en = [f"The {tag} sentence number {i} is a good sentence for the test ." for i in range(n)]
    return de, en


def sgml(lang: str, setid: str, segs: list[str], kind: str) -> bytes:
    head = (
        f'<{kind}set setid="{setid}" srclang="any" trglang="{lang}">\n'
        if kind == "ref"
        else f'<{kind}set setid="{setid}" srclang="{lang}">\n'
    )
    body = '<doc sysid="ref" docid="d1" genre="news" origlang="en">\n<p>\n'
    body += "".join(f'<seg id="{i + 1}">{s}</seg>\n' for i, s in enumerate(segs))
    return (head + body + f"</p>\n</doc>\n</{kind}set>\n").encode("utf-8")


@dataclass
class WmtFixture:
    dir: Path
    files: dict[str, Path]
    expect: dict

    def checksums(self) -> dict[str, dict]:
        """Registry overrides: the real file names with these files' sums (size and md5 unknown)."""
        out = {}
        for name, path in self.files.items():
            out[name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "size": None, "md5": None}
        return out


def build_wmt14_de(root: Path) -> WmtFixture:
    """Small archives with the names and member layout of WMT14 En-De's real ones."""
    root.mkdir(parents=True, exist_ok=True)
    ep_de, ep_en = parallel(40, "europarl")
    # Lines every rule must drop (de, en): empty side, too long, bad ratio, invalid UTF-8 added below.
    ep_de += ["", "zu lang " * 130, "Kurz .", "Ein „zitierter“ Satz mit einem Tab\tdarin ."]
    ep_en += [
        "An orphan line .",
        "too long " * 130,
        "This English side is much much longer than the German one .",
        "A \u201cquoted\u201d sentence with a tab\tin it .",
    ]
    ep_de_bytes = lines(*ep_de) + b"Ung\xfcltiges UTF-8 hier .\n"  # Latin-1 byte: not UTF-8
    ep_en_bytes = lines(*ep_en) + lines("Invalid UTF-8 here .")
    cc_de, cc_en = parallel(30, "commoncrawl")
    cc_de.append(cc_de[0])  # a duplicate pair: only --dedup drops it
    cc_en.append(cc_en[0])
    nc_de, nc_en = parallel(20, "news")
    files = {
        "training-parallel-europarl-v7.tgz": make_tgz(
            root / "training-parallel-europarl-v7.tgz",
            {
                "training/europarl-v7.cs-en.cs": lines("Nepoužito ."),
                "training/europarl-v7.de-en.de": ep_de_bytes,
                "training/europarl-v7.de-en.en": ep_en_bytes,
                "training/europarl-v7.fr-en.fr": lines("Pas utilisé ."),
            },
        ),
        "training-parallel-commoncrawl.tgz": make_tgz(
            root / "training-parallel-commoncrawl.tgz",
            {
                "commoncrawl.de-en.de": lines(*cc_de),
                "commoncrawl.de-en.en": lines(*cc_en),
                "commoncrawl.de-en.annotation": lines(*["x"] * len(cc_de)),
            },
        ),
        "training-parallel-nc-v9.tgz": make_tgz(
            root / "training-parallel-nc-v9.tgz",
            {
                "training/news-commentary-v9.de-en.de": lines(*nc_de),
                "training/news-commentary-v9.de-en.en": lines(*nc_en),
            },
        ),
        "dev.tgz": make_tgz(
            root / "dev.tgz",
            {
                "dev/newstest2013.de": lines("Erster  Satz mit zwei Leerzeichen .", "Zweiter Satz ."),
                "dev/newstest2013.en": lines("First  sentence with two spaces .", "Second sentence ."),
                "dev/newstest2013-src.de.sgm": sgml("de", "newstest2013", ["Erster Satz ."], "src"),
            },
        ),
        "test-full.tgz": make_tgz(
            root / "test-full.tgz",
            {
                "test-full/newstest2014-deen-src.en.sgm": sgml(
                    "en",
                    "newstest2014",
                    [
                        "Gutach: Increased safety for pedestrians",
                        "AT&amp;T said &quot;yes&quot; &lt;really&gt;",
                        "Third &#252; &#xFC; segment",
                    ],
                    "src",
                ),
                "test-full/newstest2014-deen-ref.de.sgm": sgml(
                    "de",
                    "newstest2014",
                    [
                        "Gutach: Noch mehr Sicherheit für Fußgänger",
                        "AT&amp;T sagte &quot;ja&quot; &lt;wirklich&gt;",
                        "Drittes Segment",
                    ],
                    "ref",
                ),
                "test-full/newstest2014-deen-src.de.sgm": sgml(
                    "de",
                    "newstest2014",
                    ["Gutach: Noch mehr Sicherheit für Fußgänger (src.de)", "AT&amp;T sagte ja", "Drittes Segment"],
                    "src",
                ),
                "test-full/newstest2014-deen-ref.en.sgm": sgml(
                    "en",
                    "newstest2014",
                    ["Gutach: Increased safety for pedestrians (ref.en)", "AT&amp;T said yes", "Third segment"],
                    "ref",
                ),
            },
        ),
    }
    expect = {
        "train_in": 45 + 31 + 20,
        "dropped": {"invalid_utf8": 1, "empty": 1, "too_long": 1, "ratio": 1},
        "invalid_at": "training/europarl-v7.de-en.de in training-parallel-europarl-v7.tgz:45",
        "valid": 2,
        "test": 3,
    }
    return WmtFixture(root, files, expect)


@dataclass
class Request:
    path: str
    range: str | None


@dataclass
class ArchiveServer:
    root: Path
    requests: list[Request] = field(default_factory=list)
    cut_once: dict[str, int] = field(default_factory=dict)  # file name -> bytes sent before cutting
    url: str = ""

    def gets(self, name: str) -> list[Request]:
        return [r for r in self.requests if r.path == f"/{name}"]


def handler(server: ArchiveServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def do_GET(self) -> None:
            server.requests.append(Request(self.path, self.headers.get("Range")))
            path = server.root / self.path.lstrip("/")
            if not path.is_file():
                self.send_error(404)
                return
            data = path.read_bytes()
            start = 0
            m = re.match(r"bytes=(\d+)-$", self.headers.get("Range") or "")
            if m:
                start = int(m.group(1))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            name = path.name
            if name in server.cut_once:
                cut = server.cut_once.pop(name) - start
                self.wfile.write(body[: max(cut, 0)])
                self.wfile.flush()
                self.close_connection = True
                return  # the connection closes with the body incomplete
            self.wfile.write(body)

    return Handler


def serve(fixture: WmtFixture, server: ArchiveServer) -> None:
    for name, path in fixture.files.items():
        (server.root / name).write_bytes(path.read_bytes())


def gz(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    return path


def make_tar(path: Path, members: dict[str, bytes]) -> Path:
    """A plain (uncompressed) tar, as training-giga-fren.tar is."""
    with tarfile.open(path, "w") as tf:
        for name, data in members.items():
            add_text(tf, name, data)
    return path


def build_wmt14_fr(root: Path) -> WmtFixture:
    """Small archives in the shapes of WMT14 En-Fr's: five training corpora, giga-fren as .gz inside a tar."""
    root.mkdir(parents=True, exist_ok=True)

    def pair(n: int, tag: str) -> tuple[bytes, bytes]:
        fr = [f"La phrase {tag} numéro {i} est une bonne phrase ." for i in range(n)]
        en = [f"The {tag} sentence number {i} is a good sentence ." for i in range(n)]
        return lines(*fr), lines(*en)

    ep, cc, un, nc, giga = pair(5, "europarl"), pair(4, "commoncrawl"), pair(3, "un"), pair(2, "news"), pair(6, "giga")
    files = {
        "training-parallel-europarl-v7.tgz": make_tgz(
            root / "training-parallel-europarl-v7.tgz",
            {"training/europarl-v7.fr-en.fr": ep[0], "training/europarl-v7.fr-en.en": ep[1]},
        ),
        "training-parallel-commoncrawl.tgz": make_tgz(
            root / "training-parallel-commoncrawl.tgz", {"commoncrawl.fr-en.fr": cc[0], "commoncrawl.fr-en.en": cc[1]}
        ),
        "training-parallel-un.tgz": make_tgz(
            root / "training-parallel-un.tgz", {"un/undoc.2000.fr-en.fr": un[0], "un/undoc.2000.fr-en.en": un[1]}
        ),
        "training-parallel-nc-v9.tgz": make_tgz(
            root / "training-parallel-nc-v9.tgz",
            {"training/news-commentary-v9.fr-en.fr": nc[0], "training/news-commentary-v9.fr-en.en": nc[1]},
        ),
        "training-giga-fren.tar": make_tar(
            root / "training-giga-fren.tar",
            {
                "giga-fren.release2.fixed.fr.gz": gzip.compress(giga[0], mtime=0),
                "giga-fren.release2.fixed.en.gz": gzip.compress(giga[1], mtime=0),
            },
        ),
        "dev.tgz": make_tgz(
            root / "dev.tgz",
            {
                "dev/newstest2013.fr": lines("Bonjour .", "Au revoir ."),
                "dev/newstest2013.en": lines("Hello .", "Goodbye ."),
            },
        ),
        "test-full.tgz": make_tgz(
            root / "test-full.tgz",
            {
                "test-full/newstest2014-fren-src.en.sgm": sgml("en", "newstest2014", ["Hello &amp; welcome"], "src"),
                "test-full/newstest2014-fren-ref.fr.sgm": sgml(
                    "fr", "newstest2014", ["Bonjour &amp; bienvenue"], "ref"
                ),
                "test-full/newstest2014-fren-src.fr.sgm": sgml("fr", "newstest2014", ["Bonjour (src.fr)"], "src"),
                "test-full/newstest2014-fren-ref.en.sgm": sgml("en", "newstest2014", ["Hello (ref.en)"], "ref"),
            },
        ),
    }
    return WmtFixture(root, files, {"train_in": 5 + 4 + 3 + 2 + 6, "valid": 2, "test": 1})
