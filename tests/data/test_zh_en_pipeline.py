"""A language written without spaces, end to end: English->Chinese prepared, BPE-encoded, trained, translated
and scored with sacreBLEU's zh tokenizer, through the command line, so that no step assumes spaces."""

from __future__ import annotations

import json

import pytest

from mtkit.data.dataset import open_data
from mtkit.data.vocab import Vocab
from tests.support.training import FAST
from tests.support.zh_en import HERE, pairs, write


def test_the_committed_corpus_is_the_generators_output(tmp_path):
    write(tmp_path)
    for path in sorted(HERE.iterdir()):
        assert path.read_bytes() == (tmp_path / path.name).read_bytes(), path.name
    assert {split: len(lines) for split, lines in pairs().items()} == {"train": 360, "valid": 40, "test": 40}


def test_english_to_chinese_from_prepare_to_score(cli, tmp_path):
    data, run = tmp_path / "data", tmp_path / "run"
    files = [
        x
        for split in ("train", "valid", "test")
        for side, lang in (("src", "en"), ("tgt", "zh"))
        for x in (f"--{split}-{side}", HERE / f"{split}.{lang}")
    ]
    r = cli("prepare", "custom", *files, "--out", data)
    assert r.returncode == 0, r.stderr
    # No word rule for custom data: every pair is kept (WMT14's ratio once dropped all of them).
    assert "train 360 pairs (of 360; dropped: invalid_utf8 0, empty 0)" in r.stderr

    r = cli("bpe", data, "--vocab-size", "500")
    assert r.returncode == 0, r.stderr
    vocab = Vocab.load(data / "spm.model")
    test_zh = (data / "raw" / "test.zh").read_text(encoding="utf-8").splitlines()
    for line in test_zh:  # every Chinese line comes back whole from its pieces, without spaces put in
        assert vocab.decode(vocab.encode(line)) == line
    assert open_data(data).tgt_lang == "zh"

    r = cli("train", data, "--out", run, *FAST, "--max-steps", "6", "--valid-every", "3", "--valid-bleu", "8")
    assert r.returncode == 0, r.stderr
    validations = [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "bleu" in m]
    assert validations and validations[-1]["step"] == 6, "validation BLEU was not measured at the last step"
    # It is the BLEU of greedy translations of the first 8 dev lines with sacreBLEU's zh tokenizer, the one
    # `mtkit score --lang zh` uses, not 13a's.
    head = tmp_path / "valid8.en"
    head.write_text("".join((data / "raw" / "valid.en").read_text(encoding="utf-8").splitlines(True)[:8]))
    greedy = tmp_path / "valid8.hyp.zh"
    r = cli(
        "translate",
        "--model",
        run / "checkpoint_last.pt",
        "--input",
        head,
        "--output",
        greedy,
        "--beam",
        "1",
        "--device",
        "cpu",
        "--threads",
        "1",
    )
    assert r.returncode == 0, r.stderr
    refs = (data / "raw" / "valid.zh").read_text(encoding="utf-8").splitlines()[:8]
    from sacrebleu.metrics import BLEU

    hyps = greedy.read_text(encoding="utf-8").splitlines()
    assert validations[-1]["bleu"] == pytest.approx(BLEU(tokenize="zh").corpus_score(hyps, [refs]).score, abs=1e-9)

    hyp = tmp_path / "test.hyp.zh"
    r = cli(
        "translate",
        "--model",
        run / "checkpoint_last.pt",
        "--input",
        data / "raw" / "test.en",
        "--output",
        hyp,
        "--beam",
        "2",
        "--max-len-b",
        "10",
        "--device",
        "cpu",
        "--threads",
        "1",
    )
    assert r.returncode == 0, r.stderr
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == len(test_zh)

    r = cli("score", hyp, "--ref", data / "raw" / "test.zh", "--lang", "zh", "--json")
    assert r.returncode == 0, r.stderr
    bleu = json.loads(r.stdout)["scores"][0]
    assert bleu["name"] == "BLEU" and "tok:zh" in bleu["signature"] and bleu["score"] >= 0
