"""`mtkit clean`: each rule drops what it is for and is counted; bounded hashes; an interrupted run resumes."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from mtkit.data import webclean
from mtkit.data.dedup import HashSet
from mtkit.data.rules import letters
from mtkit.data.webclean import WebCleanConfig, clean_files
from mtkit.errors import MtkitError

PAIRS = [
    ("A dog runs on the grass.", "Ein Hund rennt über das Gras."),  # kept
    ("A dog runs on the grass.", "Ein Hund rennt über das Gras."),  # duplicate
    ("a dog runs on the grass", "ein Hund rennt über das Gras!"),  # near_duplicate
    ("<p>Two men talk.</p>", "<p>Zwei Männer reden.</p>"),  # markup
    ("Fish &amp; chips", "Fisch und Pommes"),  # markup (entity)
    ("A bell\x07 rings.", "Eine Glocke läutet."),  # control
    ("Mojibake \ufffd here.", "Zeichensalat hier."),  # control
    ("The children play in the park.", "The children play in the park!"),  # copy
    ("Yes.", "Ja, das ist eine sehr lange Antwort auf eine kurze Frage."),  # char_ratio
    ("A woman is cooking dinner in the kitchen.", "Une femme prépare le dîner dans la cuisine."),  # langid
    ("", "Leer."),  # empty
]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _files(tmp_path: Path, pairs=PAIRS) -> tuple[Path, Path]:
    return _write(tmp_path / "in.en", [s for s, _ in pairs]), _write(tmp_path / "in.de", [t for _, t in pairs])


def test_each_rule_drops_its_noise_and_is_counted(tmp_path):
    pytest.importorskip("py3langid")
    src, tgt = _files(tmp_path)
    config = WebCleanConfig(True, True, True, 0, 3.0, True, True, True)
    record = clean_files(src, tgt, "en", "de", tmp_path / "out" / "c", config)
    assert record["dropped"] == {
        "invalid_utf8": 0,
        "empty": 1,
        "control": 2,
        "markup": 2,
        "copy": 1,
        "char_ratio": 1,
        "duplicate": 1,
        "near_duplicate": 1,
        "langid": 1,
    }
    assert (record["pairs_in"], record["kept"]) == (len(PAIRS), 1)
    assert (tmp_path / "out" / "c.en").read_text(encoding="utf-8") == PAIRS[0][0] + "\n"
    assert json.loads((tmp_path / "out" / "c.clean.json").read_text())["kept"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["c.clean.json", "c.de", "c.en"]


def test_rules_off_keep_everything_but_empty_and_invalid_lines(tmp_path):
    pairs = [*PAIRS, ("bad", "x")]
    src, tgt = _files(tmp_path, pairs)
    tgt.write_bytes(tgt.read_bytes().replace(b"x\n", b"\xff\n"))
    record = clean_files(src, tgt, "en", "de", tmp_path / "c", WebCleanConfig())
    assert record["rules"] == ["invalid_utf8", "empty"]
    assert record["dropped"] == {"invalid_utf8": 1, "empty": 1} and record["kept"] == len(PAIRS) - 1
    assert (tmp_path / "c.de").read_bytes() == "".join(t + "\n" for s, t in PAIRS if s).encode()


def test_hash_set_keeps_first_occurrences_as_a_python_set_would():
    rng = np.random.default_rng(1)
    seen, ours = set(), HashSet()
    for _ in range(50):
        batch = rng.integers(0, 300, size=int(rng.integers(1, 40)), dtype=np.uint64)
        expected = []
        for h in batch.tolist():
            expected.append(h not in seen)
            seen.add(h)
        assert ours.first_seen(batch).tolist() == expected
    assert len(ours) == len(seen)
    assert len(ours.runs) <= int(np.log2(len(seen))) + 1  # merged like a binary counter


def test_an_interrupted_run_resumes_to_the_same_files(tmp_path, monkeypatch):
    rng = random.Random(3)
    words = ["dog", "cat", "man", "runs", "sits", "red", "big", "the", "a", "on"]
    pairs = []
    for i in range(500):
        s = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        pairs.append((s, s.upper() if i % 7 else f"<b>{s}</b>"))
    pairs += pairs[:100]  # duplicates across chunks
    src, tgt = _files(tmp_path, pairs)
    config = WebCleanConfig(markup=True, dedup=True, near_dedup=True)
    whole = clean_files(src, tgt, "en", "de", tmp_path / "whole", config, chunk_pairs=37)

    calls = []

    def stop_after_five(done, total):
        calls.append(done)
        if len(calls) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        clean_files(
            src, tgt, "en", "de", tmp_path / "cut", config, chunk_pairs=37, checkpoint_s=0, progress=stop_after_five
        )
    state = json.loads((tmp_path / "cut.clean-state.json").read_text())
    assert state["pairs_done"] == 4 * 37  # the fifth chunk's text is written, its checkpoint is not
    assert not (tmp_path / "cut.en").exists()
    seen = []
    resumed = clean_files(
        src, tgt, "en", "de", tmp_path / "cut", config, chunk_pairs=37, progress=lambda d, t: seen.append(d)
    )
    assert seen[0] == 5 * 37  # it went on from the checkpoint, not from the start
    for lang in ("en", "de"):
        assert (tmp_path / f"cut.{lang}").read_bytes() == (tmp_path / f"whole.{lang}").read_bytes()
    assert resumed["dropped"] == whole["dropped"] and resumed["kept"] == whole["kept"]
    assert not (tmp_path / "cut.clean-state.json").exists() and not list(tmp_path.glob("*.part"))


def test_langid_without_its_package_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "py3langid", None)
    src, tgt = _files(tmp_path)
    with pytest.raises(MtkitError, match=r"--langid needs py3langid: pip install 'mtkit\[langid\]'"):
        clean_files(src, tgt, "en", "de", tmp_path / "c", WebCleanConfig(langid=True))


def test_the_command_reports_every_rule(cli, tmp_path):
    src, tgt = _files(tmp_path)
    r = cli("clean", src, tgt, "--out", tmp_path / "c", "--markup", "--dedup", "--max-char-ratio", "3")
    assert r.returncode == 0, r.stderr
    assert "kept 6 of 11 pairs (dropped: invalid_utf8 0, empty 1, markup 2, char_ratio 1, duplicate 1)" in r.stderr
    r = cli("clean", src, tgt, "--out", tmp_path / "in")
    assert r.returncode == 1 and "would overwrite an input" in r.stderr and "Traceback" not in r.stderr


def test_letters_is_the_normal_form_of_copies():
    assert letters("Two men, 2 dogs!") == letters("two MEN 3 dogs") == "twomendogs"


def test_the_dual_xent_sample_is_drawn_from_what_the_duplicate_rules_keep_in_the_whole_input(tmp_path, monkeypatch):
    """--dual-xent-drop's sample: every k-th pair the other rules keep. A near duplicate of a pair outside the sample
    is no new pair; sampling the raw input would keep it (its original unseen) and skew the threshold."""
    monkeypatch.setattr(webclean, "DUAL_XENT_SAMPLE", 40)
    names = [chr(97 + n // 26) + chr(97 + n % 26) for n in range(40)]  # letters: the near-dedup form drops digits
    pairs = [(f"A dog named {name} runs.", f"Ein Hund namens {name} rennt.") for name in names]
    repeats = [(s.lower(), t.lower()) for s, t in pairs[1::2]]  # near duplicates of the odd pairs, after them all
    src, tgt = _files(tmp_path, pairs + repeats)
    scored: list[tuple[str, str]] = []

    def scorer(sources: list[str], targets: list[str]) -> list[float]:
        scored.extend(zip(sources, targets))
        return [float(len(s)) for s in sources]

    config = WebCleanConfig(dedup=True, near_dedup=True, dual_xent_drop=0.1)
    threshold, reusing = webclean.estimate_threshold(src, tgt, "en", "de", config, scorer, len(pairs + repeats))
    assert scored == pairs[::2]  # 60 pairs, every 2nd of the 40 kept: the even ones, no repeat
    assert threshold == pytest.approx(np.quantile([len(s) for s, _ in pairs[::2]], 0.9))
    assert reusing([pairs[0][0], pairs[1][0]], [pairs[0][1], pairs[1][1]]) == [len(pairs[0][0]), len(pairs[1][0])]
    assert scored[-1] == pairs[1]  # the sampled pair's score was reused; only the other one was scored again


def test_workers_count_each_pair_under_the_rule_a_single_sequential_pass_names(tmp_path):
    """The runner decides PAIR rules in the workers and the duplicate rules in order in the main process; a pair
    dropped both as a duplicate and by a later rule (langid, here a stand-in of markup after dedup) must be counted
    as the rules one after the other count it, whatever the workers and chunks."""
    pytest.importorskip("py3langid")
    from mtkit.data.runner import first_drops

    rng = random.Random(5)
    pairs = [PAIRS[rng.randrange(len(PAIRS))] for _ in range(300)]  # every kind of noise, repeated across chunks
    src, tgt = _files(tmp_path, pairs)
    config = WebCleanConfig(True, True, True, 60, 3.0, True, True, True)
    reference = first_drops(config.rules("en", "de"), [s for s, _ in pairs], [t for _, t in pairs])
    for workers, chunk in ((1, 300), (2, 7), (2, 1)):
        record = clean_files(
            src, tgt, "en", "de", tmp_path / f"c{workers}-{chunk}", config, workers=workers, chunk_pairs=chunk
        )
        assert record["dropped"] == {rule: reference.count(rule) for rule in config.active()}
        kept = [s for (s, _), rule in zip(pairs, reference) if rule is None]
        assert (tmp_path / f"c{workers}-{chunk}.en").read_text(encoding="utf-8") == "".join(s + "\n" for s in kept)
