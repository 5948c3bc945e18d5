"""prepare's cleaning: the fast normaliser equals sacremoses', each rule drops what it should, workers change
nothing."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from sacremoses import MosesPunctNormalizer

from mtkit.data.clean import RULES, CleanConfig
from mtkit.data.normalize import PunctNormalizer, normalize, remove_non_printing
from mtkit.data.runner import Runner, Stats
from mtkit.errors import MtkitError

# Every character some normalisation rule looks for, and the neighbours its patterns need.
TRIGGERS = list("\r()%:;`'\"„“”–—´‘’‚…«»,.!?º0123456789 nCcm<") + ["\u00a0", "  ", "''", "´´", "nº", "ºC"]
PLAIN = list("abcXYZ äöüß") + ["word", "Haus", "c'est", "l'été"]


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pool = TRIGGERS * 3 + PLAIN
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30))) for _ in range(n)]


@pytest.mark.parametrize("lang", ["en", "de", "fr", "cs"])
def test_fast_normalizer_equals_sacremoses_on_adversarial_text(lang):
    fast, ref = PunctNormalizer(lang), MosesPunctNormalizer(lang=lang)
    for text in _random_texts(3000, seed=hash(lang) % 1000):
        assert fast.normalize(text) == ref.normalize(text), repr(text)


@pytest.mark.parametrize("lang", ["en", "de"])
def test_fast_normalizer_equals_sacremoses_on_multi30k(multi30k, lang):
    fast, ref = PunctNormalizer(lang), MosesPunctNormalizer(lang=lang)
    with gzip.open(multi30k / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")[:5000]
    assert [fast.normalize(x) for x in lines] == [ref.normalize(x) for x in lines]


def test_non_printing_characters_become_spaces():
    assert remove_non_printing("plain text") == "plain text"
    assert remove_non_printing("a\tb\x00c\u200bd") == "a b c d"  # controls and a format character
    assert remove_non_printing("\ufeffstart  end\u2028x") == "start end x"  # BOM, line separator
    assert normalize("„Hallo“ – sagte\ter …", "de") == '"Hallo" - sagte er ...'


def _clean(tmp_path: Path, src: list[bytes], tgt: list[bytes], config=CleanConfig(), workers=1, chunk=3):
    a, b = tmp_path / "in.en", tmp_path / "in.de"
    a.write_bytes(b"".join(x + b"\n" for x in src))
    b.write_bytes(b"".join(x + b"\n" for x in tgt))
    stats, en, de = Stats.of(RULES), [], []
    with Runner(config.rules(), config.text("en", "de"), workers=workers, chunk_pairs=chunk, counted=RULES) as runner:
        for batch in runner.run(a, b):
            stats.add(batch.stats)
            en += batch.lines[0]
            de += batch.lines[1]
    return stats, en, de


def test_each_rule_counts_what_it_drops(tmp_path):
    words = lambda n, w="w": " ".join([w] * n).encode()  # noqa: E731
    src = [b"ok one", b"", b"   ", words(251), words(250), words(3), words(2), b"bad \xff byte", b"ok one"]
    tgt = [b"gut eins", b"leer", b"leer", words(5), words(250), words(2), words(4), b"kaputt", b"gut eins"]
    stats, en, de = _clean(tmp_path, src, tgt)
    assert stats.pairs_in == 9
    assert stats.dropped == {
        "invalid_utf8": 1,
        "empty": 2,
        "too_long": 1,
        "ratio": 1,
        "too_long_chars": 0,
        "char_ratio": 0,
        "duplicate": 0,
    }
    # 250 words is allowed, 251 is not; 3/2 = 1.5 is allowed, 4/2 = 2 is not.
    assert en == ["ok one", words(250).decode(), "w w w", "ok one"]
    assert de == ["gut eins", words(250).decode(), "w w", "gut eins"]
    assert stats.kept == 4
    assert stats.invalid_utf8_at == [f"{tmp_path / 'in.en'}:8"]


def test_length_limits_can_be_switched_off(tmp_path):
    src, tgt = [b"a b c d e f", b" ".join([b"x"] * 300)], [b"eins", b"y"]
    stats, en, _ = _clean(tmp_path, src, tgt, CleanConfig(max_words=0, max_ratio=0))
    assert stats.kept == 2 and stats.dropped["ratio"] == stats.dropped["too_long"] == 0


def test_dedup_keeps_first_occurrences_across_chunks(tmp_path):
    src = [b"a", b"b", b"a", b"a", b"c"]
    tgt = [b"x", b"y", b"x", b"z", b"x"]
    stats, en, de = _clean(tmp_path, src, tgt, CleanConfig(dedup=True), chunk=2)
    assert stats.dropped["duplicate"] == 1 and stats.kept == 4
    assert list(zip(en, de)) == [("a", "x"), ("b", "y"), ("a", "z"), ("c", "x")]


def test_worker_processes_give_the_same_output(tmp_path, multi30k):
    with gzip.open(multi30k / "val.en.gz", "rb") as f:
        en = f.read().split(b"\n")[:-1]
    with gzip.open(multi30k / "val.de.gz", "rb") as f:
        de = f.read().split(b"\n")[:-1]
    en[5] = b"\xc3("  # invalid
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _clean(tmp_path / "a", en, de, workers=1, chunk=100)
    two = _clean(tmp_path / "b", en, de, workers=2, chunk=100)
    assert one[1:3] == two[1:3]
    assert one[0].dropped == two[0].dropped and one[0].kept == two[0].kept
    assert two[0].invalid_utf8_at == [f"{tmp_path / 'b' / 'in.en'}:6"]


def test_character_rules_count_code_points_of_any_script(tmp_path):
    # zh has no spaces: words would be 1 a side, characters are what can be compared.
    src = ["我爱你".encode(), "今天天气很好".encode(), ("长" * 31).encode(), "好".encode()]
    tgt = [b"I love you", b"The weather is nice today", b"long", b"good"]
    config = CleanConfig(max_words=0, max_ratio=0, max_chars=30, max_char_ratio=4)
    stats, zh, en = _clean(tmp_path, src, tgt, config=config)
    # 10/3 = 3.3 passes; 25/6 = 4.2 does not; 31 characters is over 30; 4/1 = 4 passes.
    assert stats.dropped["too_long_chars"] == 1 and stats.dropped["char_ratio"] == 1
    assert zh == ["我爱你", "好"] and en == ["I love you", "good"]
    assert config.active() == ("invalid_utf8", "empty", "too_long_chars", "char_ratio")


@pytest.mark.parametrize("lang", ["zh", "ja", "th", "zh-Hans", "zh_TW"])
def test_word_rules_are_refused_for_a_language_without_spaces(lang):
    with pytest.raises(MtkitError, match="--max-ratio counts whitespace-separated words.*--max-char-ratio"):
        CleanConfig(max_words=0, max_ratio=1.5).check_script("en", lang)
    with pytest.raises(MtkitError, match="--max-words counts"):
        CleanConfig(max_words=250, max_ratio=0).check_script(lang, "en")
    CleanConfig(max_words=0, max_ratio=0, max_char_ratio=3).check_script("en", lang)
    CleanConfig().check_script("en", "de")
