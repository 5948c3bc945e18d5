"""The fine-tuning recipe's dry run: every mtkit command parses with mtkit's own parsers, the two runs get equal
updates in alternating rounds (A B B A), only the fine-tuned one starts from the En-De model, both translate
the same test set the same way, and nothing is created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.recipes import decode_config, dry_run, load_script, parse_line, parse_mtkit, run_recipe


def _dry_run(tmp_path: Path, *args: str) -> tuple[Path, list[str]]:
    out = tmp_path / "o u t"
    return out, dry_run("finetune-multi30k-en-fr", *args, "--out", str(out), cwd=tmp_path)


@pytest.mark.parametrize("args, pairs, updates", [([], 3000, 400), (["--pairs", "500", "--updates", "60"], 500, 60)])
def test_dry_run_trains_both_on_the_same_first_pairs_at_equal_updates(args, pairs, updates, tmp_path: Path) -> None:
    a, b = tmp_path / "en de", tmp_path / "fr cs"  # never created: the dry run reads nothing
    out, lines = _dry_run(tmp_path, *args, "--mirror", str(a), "--mirror", str(b))
    base = out / "run-en-de" / "checkpoint_last.pt"
    steps = []
    for line in lines:
        argv, torchrun, target = parse_line(line)
        assert torchrun is None
        if argv[0] == "head":  # the first N pairs, cut from the prepared corpus
            assert argv[1:3] == ["-n", str(pairs)] and Path(target).name == Path(argv[3]).name
            continue
        steps.append(parse_mtkit(argv))
    prepares = [p for name, p in steps if name == "prepare"]
    assert [p["name"] for p in prepares[:2]] == ["multi30k-en-de", "multi30k-en-fr"]
    assert all(p["mirror"] == [a, b] for p in prepares[:2])
    assert {(p["train_src"], p["train_tgt"], p["test_src"]) for p in prepares[2:]} == {
        (out / "data" / "pairs" / "train.en", out / "data" / "pairs" / "train.fr", out / "data/en-fr/raw/test.en")
    }
    bpe = {p["data_dirs"][0].name: p for name, p in steps if name == "bpe"}
    assert bpe["en-de"]["vocab_size"] == 8000 and bpe["en-de"]["from_model"] is None
    assert bpe["finetuned"]["from_model"] == str(base) and bpe["scratch"]["from_model"] is None
    trains = [(p["out"].name, p["max_steps"], p) for name, p in steps if name == "train"]
    half = updates // 2
    assert trains[0][:2] == ("run-en-de", 600) and trains[0][2]["lr_cooldown"] == 0.2
    trains = trains[1:]
    assert [(run, n) for run, n, _ in trains] == [
        ("run-finetuned", half),
        ("run-scratch", half),
        ("run-scratch", updates),
        ("run-finetuned", updates),
    ]
    for run, _, p in trains:
        assert (p["init"] == str(base)) == (run == "run-finetuned") and p["data"].name == run[4:]
        assert p["lr_cooldown"] is None, "no cooldown: its schedule would depend on the round's --max-steps"
    shared = ("max_tokens", "update_freq", "warmup", "lr_scale", "dropout", "label_smoothing", "seed")
    assert len({tuple(p[k] for k in shared) for *_, p in trains}) == 1, "the runs differ only in where they start"
    # one batch an update: without it `--init` takes the default preset's 25,000 tokens (33 batches of 768)
    assert trains[0][2]["update_freq"] == 1
    translations = [p for name, p in steps if name == "translate"]
    assert [Path(p["model"][0]).parent.name for p in translations] == ["run-finetuned", "run-scratch"]
    assert len({(decode_config(p), p["input"]) for p in translations}) == 1
    assert decode_config(translations[0]).beam == 4


def test_a_given_base_model_is_fine_tuned_and_no_en_de_model_is_trained(tmp_path: Path) -> None:
    _, lines = _dry_run(tmp_path, "--base", "my model.pt")
    assert not any("en-de" in line for line in lines)
    inits = {parse_mtkit(parse_line(line)[0])[1]["init"] for line in lines if line.startswith("mtkit train")}
    assert inits == {"my model.pt", None}


@pytest.mark.parametrize(
    "args", [["--updates", "7"], ["--base-updates", "1.5"], ["--pairs", "0"], ["--vocab-size", "x"], ["--bogus"]]
)
def test_a_bad_option_is_one_sentence(args, tmp_path: Path) -> None:
    done = run_recipe("finetune-multi30k-en-fr", *args, "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("run.sh: error: ") and done.stderr.count("\n") == 1


def test_results_md_gives_both_runs_bleu_and_training_time(tmp_path: Path) -> None:
    results = load_script("recipes/finetune-multi30k-en-fr/results.py")
    for system, bleu in (("finetuned", 30.5), ("scratch", 10.25)):
        scores = {"scores": [{"name": "BLEU", "score": bleu}, {"name": "chrF2", "score": 50.0}]}
        (tmp_path / f"scores.{system}.json").write_text(json.dumps(scores))
    times = ["| train finetuned to 50 | 0:01:10 |", "| train scratch to 50 | 0:00:55 |"]
    times += ["| train scratch to 100 | 0:01:00 |", "| train finetuned to 100 | 0:01:05 |"]
    text = results.main([str(tmp_path), "base.pt", "3000", "100", "2000", "--", *times])
    assert "| En-De model fine-tuned | 100 | 2:15 | 30.50 | 50.0 |" in text
    assert "| from scratch | 100 | 1:55 | 10.25 | 50.0 |" in text
