"""`mtkit prepare` / `mtkit bpe` from the command line: bad input, custom corpora, Multi30k end to end."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from mtkit.data.dataset import open_data
from mtkit.data.vocab import Vocab


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _one_error_line(r) -> str:
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("mtkit: error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def _custom(cli, tmp_path, train=(b"a b\n", b"x y\n"), valid=(b"v\n", b"w\n"), *extra):
    ts = _write(tmp_path / "train.en", train[0])
    tt = _write(tmp_path / "train.de", train[1])
    vs = _write(tmp_path / "valid.en", valid[0])
    vt = _write(tmp_path / "valid.de", valid[1])
    return cli(
        "prepare",
        "custom",
        "--train-src",
        ts,
        "--train-tgt",
        tt,
        "--valid-src",
        vs,
        "--valid-tgt",
        vt,
        "--out",
        tmp_path / "out",
        *extra,
    )


def test_unknown_corpus_lists_the_known_ones(cli):
    line = _one_error_line(cli("prepare", "wmt19-en-de"))
    assert "unknown corpus 'wmt19-en-de'" in line
    for name in (
        "wmt14-en-de",
        "wmt14-de-en",
        "wmt14-en-fr",
        "wmt14-fr-en",
        "multi30k-en-de",
        "multi30k-de-en",
        "custom",
    ):
        assert name in line


def test_list_shows_every_corpus(cli):
    r = cli("prepare", "--list")
    assert r.returncode == 0
    for name in ("wmt14-en-de", "wmt14-fr-en", "multi30k-de-en", "custom", "newstest2014", "37000", "4.5M"):
        assert name in r.stdout
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if line.count("│") > 2}
    assert "shipped" in rows["multi30k-en-cs"] and "shipped" not in rows["wmt14-en-de"], "Multi30k is no download"


def test_unequal_line_counts_name_both_files_and_counts(cli, tmp_path):
    line = _one_error_line(_custom(cli, tmp_path, (b"a\nb\nc\n", b"x\ny\n")))
    assert f"{tmp_path / 'train.en'} has 3 lines but {tmp_path / 'train.de'} has 2" in line
    assert not (tmp_path / "out" / "raw").exists()
    line = _one_error_line(_custom(cli, tmp_path, (b"a\n", b"x\n"), (b"v\n", b"w\nz\n")))
    assert f"{tmp_path / 'valid.en'} has 1 line but {tmp_path / 'valid.de'} has 2" in line


def test_empty_files_are_an_error(cli, tmp_path):
    line = _one_error_line(_custom(cli, tmp_path, (b"", b"")))
    assert f"{tmp_path / 'train.en'} and {tmp_path / 'train.de'} are empty" in line
    line = _one_error_line(_custom(cli, tmp_path, (b"a\n", b"x\n"), (b"", b"")))
    assert "valid.en and" in line and "are empty" in line


def test_invalid_utf8_training_lines_are_skipped_and_counted(cli, tmp_path):
    r = _custom(cli, tmp_path, (b"good one\nbad \xff\ngood two\n", b"gut eins\nschlecht\ngut zwei\n"))
    assert r.returncode == 0, r.stderr
    assert "1 training pair(s) with invalid UTF-8 were skipped" in r.stderr
    record = json.loads((tmp_path / "out" / "prepare.json").read_text())
    train = record["splits"]["train"]
    assert train["dropped"]["invalid_utf8"] == 1 and train["kept"] == 2
    assert train["invalid_utf8_at"] == [f"{tmp_path / 'train.en'}:2"]
    assert (tmp_path / "out" / "raw" / "train.en").read_text() == "good one\ngood two\n"


def test_invalid_utf8_in_dev_or_test_is_an_error_with_file_and_line(cli, tmp_path):
    line = _one_error_line(_custom(cli, tmp_path, (b"a\n", b"x\n"), (b"ok\nok\nbad \xe9 here\n", b"1\n2\n3\n")))
    assert f"{tmp_path / 'valid.en'}: line 3 is not valid UTF-8" in line
    assert not (tmp_path / "out" / "raw").exists()


def test_custom_options_are_checked(cli, tmp_path):
    assert "--train-src/--valid-src/--test-src" in _one_error_line(cli("prepare", "multi30k-en-de", "--train-src", "x"))
    assert "needs --train-src and --train-tgt" in _one_error_line(cli("prepare", "custom"))
    ts = _write(tmp_path / "corpus_a", b"a\n")
    tt = _write(tmp_path / "corpus_b", b"b\n")
    line = _one_error_line(
        cli(
            "prepare",
            "custom",
            "--train-src",
            ts,
            "--train-tgt",
            tt,
            "--valid-src",
            ts,
            "--valid-tgt",
            tt,
            "--out",
            tmp_path / "o",
        )
    )
    assert "cannot tell the language of" in line and "--src-lang" in line


def test_custom_corpus_prepare_and_bpe(cli, tmp_path):
    rows = [(f"the house number {i} is small .", f"das Haus Nummer {i} ist klein .") for i in range(300)]
    train = ("".join(a + "\n" for a, _ in rows).encode(), "".join(b + "\n" for _, b in rows).encode())
    r = _custom(
        cli,
        tmp_path,
        train,
        (b"the house is small .\n", b"das Haus ist klein .\n"),
        "--src-lang",
        "en",
        "--tgt-lang",
        "de",
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    assert "at least" in _one_error_line(cli("bpe", out, "--vocab-size", "120"))  # 256 byte pieces + characters
    r = cli("bpe", out, "--vocab-size", "320")
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "bpe.json").read_text())
    assert info["settings"]["vocab_size"] == 320 and set(info["splits"]) == {"train", "valid"}
    line = _one_error_line(cli("bpe", out, "--vocab-size", "100000"))
    assert "cannot learn a vocabulary of 100000" in line and "at most" in line
    assert "run `mtkit prepare" in _one_error_line(cli("bpe", tmp_path / "nowhere"))


@pytest.mark.slow
@pytest.mark.integration
def test_multi30k_prepare_and_bpe_round_trip(cli, tmp_path, multi30k_full):
    multi30k = multi30k_full
    env = {"MTKIT_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "m30"
    r = cli("prepare", "multi30k-en-de", "--mirror", multi30k, "--out", out, env=env)
    assert r.returncode == 0, r.stderr
    counts = {
        split: len((out / "raw" / f"{split}.en").read_bytes().splitlines()) for split in ("train", "valid", "test")
    }
    assert counts == {"train": 29000, "valid": 1014, "test": 1000}
    for split, lang, stem in (("valid", "de", "val"), ("test", "en", "test_2016_flickr")):
        # Dev and test are written byte for byte as published.
        assert (out / "raw" / f"{split}.{lang}").read_bytes() == gzip.open(multi30k / f"{stem}.{lang}.gz").read()

    r = cli("bpe", out, env=env)
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "bpe.json").read_text())
    assert info["settings"]["vocab_size"] == 8000 and info["model"]["pieces"] == 8000
    vocab = Vocab.load(out / "spm.model")
    for split in ("train", "valid", "test"):
        pair = open_data(out).split(split)
        src, tgt = pair.src, pair.tgt
        assert len(src) == len(tgt) == info["splits"][split]["sentences"] == counts[split]
        assert src.dtype == np.uint16 and src.num_tokens == info["splits"][split]["tokens"]["en"]
        for lang, ds in (("en", src), ("de", tgt)):
            lines = (out / "raw" / f"{split}.{lang}").read_text(encoding="utf-8").split("\n")[:-1]
            decoded = [vocab.decode(ds[i]) for i in range(len(ds))]
            # What holds exactly: decoding gives SentencePiece's normalised text (NFKC, single spaces) ...
            assert decoded == [vocab.normalize(line) for line in lines]
            # ... which for this text is the text itself but for whitespace: runs of spaces (dev/test
            # are not Moses-normalised) and non-breaking spaces become one plain space.
            differ = [(a, b) for a, b in zip(decoded, lines) if a != b]
            assert all(" ".join(b.split()) == a for a, b in differ)
            assert len(differ) < 0.01 * len(lines)
            assert not any(1 in ds[i] for i in range(len(ds)))  # byte fallback: no <unk> at all

    # Same settings: everything reused. New settings: relearned.
    r = cli("bpe", out, env=env)
    assert r.returncode == 0 and "reused" in r.stderr
    assert json.loads((out / "bpe.json").read_text())["reused_model"] is True
    model = (out / "spm.model").read_bytes()
    r = cli("bpe", out, "--vocab-size", "4000", env=env)
    assert r.returncode == 0 and "learned" in r.stderr
    assert Vocab.load(out / "spm.model").sp.get_piece_size() == 4000
    # Determinism: back to the old settings, with other threads: the very same model bytes.
    r = cli("bpe", out, "--threads", "1", env=env)
    assert r.returncode == 0 and (out / "spm.model").read_bytes() == model


def _custom_pair(cli, tmp_path, src_lang, tgt_lang, train, *extra):
    paths = {}
    for split in ("train", "valid"):
        for lang, text in zip((src_lang, tgt_lang), train):
            paths[split, lang] = _write(tmp_path / f"{split}.{lang}", text.encode())
    args = [f"--{split}-{side}" for split in ("train", "valid") for side in ("src", "tgt")]
    files = [paths[split, lang] for split in ("train", "valid") for lang in (src_lang, tgt_lang)]
    return cli("prepare", "custom", *[x for pair in zip(args, files) for x in pair], "--out", tmp_path / "out", *extra)


ZH = "我爱你\n今天天气很好\n一只狗在草地上奔跑\n"
EN = "I love you\nThe weather is nice today\nA dog runs on the grass\n"


def test_custom_data_gets_no_word_rules_so_a_language_without_spaces_keeps_every_pair(cli, tmp_path):
    r = _custom_pair(cli, tmp_path, "en", "zh", (EN, ZH))
    assert r.returncode == 0, r.stderr
    assert "train 3 pairs (of 3; dropped: invalid_utf8 0, empty 0)" in r.stderr
    record = json.loads((tmp_path / "out" / "prepare.json").read_text())
    assert record["cleaning"]["rules"] == ["invalid_utf8", "empty"]
    assert record["cleaning"]["max_ratio"] == "off" and record["cleaning"]["max_words"] == "off"
    assert record["splits"]["train"]["dropped"]["ratio"] == 0


def test_word_ratio_for_chinese_is_refused_and_character_rules_are_counted(cli, tmp_path):
    line = _one_error_line(_custom_pair(cli, tmp_path, "en", "zh", (EN, ZH), "--max-ratio", "1.5"))
    assert "--max-ratio counts whitespace-separated words, which 'zh' text does not have" in line
    r = _custom_pair(cli, tmp_path, "en", "zh", (EN, ZH), "--max-char-ratio", "3", "--max-chars", "24")
    assert r.returncode == 0, r.stderr
    # 25 characters are over 24; 10 against 3 is a ratio of 3.3 > 3; 23 against 9 (2.6) is kept.
    assert "train 1 pairs (of 3; dropped: invalid_utf8 0, empty 0, too_long_chars 1, char_ratio 1)" in r.stderr
    record = json.loads((tmp_path / "out" / "prepare.json").read_text())
    assert record["splits"]["train"]["dropped"]["char_ratio"] == 1
    assert record["cleaning"]["char_unit"].startswith("Unicode code points")


def test_an_empty_result_names_the_filter_and_the_option_that_turns_it_off(cli, tmp_path):
    line = _one_error_line(_custom_pair(cli, tmp_path, "en", "zh", (EN, ZH), "--max-char-ratio", "1.1"))
    assert "no training pair of custom-en-zh is left after cleaning: the char_ratio filter dropped 3 of 3" in line
    assert "--max-char-ratio 0" in line


def test_own_files_without_custom_ask_did_you_mean(cli, tmp_path):
    line = _one_error_line(cli("prepare", "--train-src", tmp_path / "a.en", "--train-tgt", tmp_path / "a.de"))
    assert "did you mean `mtkit prepare custom --train-src ...`?" in line
    line = _one_error_line(cli("prepare", "multi30k-en-de", "--train-src", tmp_path / "a.en"))
    assert "did you mean `mtkit prepare custom ...`?" in line
