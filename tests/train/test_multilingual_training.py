"""A multilingual run through the real CLI: pairs mixed by temperature, dev scored per pair, decoded by direction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.multilingual import prepared_pair
from tests.support.spm import BYTE_PIECES
from tests.support.training import FAST


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory) -> tuple[Path, Path, str]:
    from tests.support.cli import run_cli

    root = tmp_path_factory.mktemp("multilingual")
    dirs = [prepared_pair(root, "en", "de", 200), prepared_pair(root, "en", "fr", 60)]
    r = run_cli("bpe", *dirs, "--out", root / "en-xx", "--vocab-size", str(BYTE_PIECES + 120), "--threads", "1")
    assert r.returncode == 0, r.stderr
    run = root / "run"
    r = run_cli(
        "train", root / "en-xx", "--out", run, *FAST, "--max-steps", "4", "--valid-every", "2", "--valid-bleu", "4",
        "--log-every", "1", "--save-every-minutes", "0", "--save-every-steps", "2", "--pair-temperature", "2",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return root, run, r.stderr


def test_each_validation_scores_every_pair_and_bleu_is_their_mean(multi_run):
    _, run, stderr = multi_run
    share = (200**0.5) / (200**0.5 + 60**0.5)  # T = 2
    assert f"en-de {round(260 * share)} " in stderr and "mixed by temperature 2" in stderr
    valids = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    valids = [r for r in valids if r["event"] == "valid"]
    assert [r["step"] for r in valids] == [2, 4]
    for r in valids:
        for pair in ("en-de", "en-fr"):
            assert {f"loss.{pair}", f"nll.{pair}", f"ppl.{pair}", f"bleu.{pair}"} <= set(r)
        assert r["bleu"] == pytest.approx((r["bleu.en-de"] + r["bleu.en-fr"]) / 2)
        # The whole dev set's NLL lies between the pairs' (a token-weighted mean of them).
        assert min(r["nll.en-de"], r["nll.en-fr"]) - 1e-9 <= r["nll"] <= max(r["nll.en-de"], r["nll.en-fr"]) + 1e-9


def test_plot_draws_a_curve_for_each_pair(multi_run):
    from mtkit.plot import load_runs, panels

    _, run, _ = multi_run
    found = panels(load_runs([run]), "steps", ["bleu", "loss"])
    assert sorted(c.pair for c in found["bleu"]) == ["", "en-de", "en-fr"]
    assert sorted(c.pair for c in found["loss"] if c.event == "valid") == ["", "en-de", "en-fr"]


def test_target_lang_puts_the_token_in_front_and_is_checked(multi_run, cli):
    root, run, _ = multi_run
    model = run / "checkpoint_last.pt"
    lines = "a man runs\nthe dog sits\n"
    tagged = "".join(f">>fr<< {line}\n" for line in lines.splitlines())
    by_option = cli("translate", "-m", model, "--target-lang", "fr", "--beam", "1", input=lines)
    written = cli("translate", "-m", model, "--beam", "1", input=tagged)
    assert by_option.returncode == 0 and by_option.stdout == written.stdout and len(written.stdout.splitlines()) == 2
    # A token written in a line wins over --target-lang; --target-lang also takes >>fr<<.
    assert cli("translate", "-m", model, "--target-lang", "de", "--beam", "1", input=tagged).stdout == written.stdout
    assert cli("translate", "-m", model, "--target-lang", ">>fr<<", "--beam", "1", input=lines).stdout == written.stdout
    bad = cli("translate", "-m", model, "--target-lang", "cs", input=lines)
    assert bad.returncode == 1 and "no target-language token >>cs<<: it knows de, fr." in bad.stderr
    scored = cli("translate", "-m", model, "--score-only", "--target-lang", "fr", input="a man runs\tx y\n")
    plain = cli("translate", "-m", model, "--score-only", input=">>fr<< a man runs\tx y\n")
    assert scored.returncode == 0 and scored.stdout == plain.stdout


def test_a_huggingface_export_reads_the_token_as_one_id(multi_run, cli, tmp_path):
    pytest.importorskip("transformers")
    from transformers import MarianTokenizer

    from mtkit.data.vocab import Vocab

    root, run, _ = multi_run
    out = tmp_path / "hf"
    r = cli("export", run / "checkpoint_last.pt", "--format", "huggingface", "-o", out)
    assert r.returncode == 0, r.stderr
    vocab = Vocab.load(root / "en-xx" / "spm.model")
    tokenizer = MarianTokenizer.from_pretrained(out)
    assert tokenizer(">>fr<< a man runs").input_ids == [*vocab.encode(">>fr<< a man runs"), 3]
    assert vocab.encode(">>fr<< a man runs")[0] == vocab.language_tokens[">>fr<<"]
