"""The Multi30k recipe's dry run: every command parses with mtkit's own parsers, the budget and the
averaging window agree, and nothing is created. (The recipe's real run is the README's main job.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtkit import checkpoint
from mtkit.device import cpu_name
from tests.support.models import save_checkpoints
from tests.support.recipes import ROOT, decode_config, dry_run, load_script, parse_line, parse_mtkit, run_recipe

ORDER = ["prepare", "bpe", "train", "plot", "average"] + ["translate", "score"] * 4
# --quick translates only what its result needs: the test set with the last checkpoint, nothing averaged.
QUICK_ORDER = ["prepare", "bpe", "train", "plot", "translate", "score"]


@pytest.mark.parametrize(
    "args, minutes, save_every, last, out_name",
    [
        ([], 25, 1, 5, "out"),
        (["--quick"], 3, 0.5, 3, "out-quick"),
        (["--minutes", "40"], 40, 1.6, 5, "out"),
        (["--minutes", "1.5"], 1.5, 0.06, 5, "out"),  # a GPU's budget: still 5 checkpoints in the last fifth
        (["--seed", "7"], 25, 1, 5, "out"),
    ],
)
def test_dry_run_commands_parse_and_keep_the_recipes_promises(
    args, minutes, save_every, last, out_name, tmp_path: Path
) -> None:
    folder = ROOT / "recipes" / "multi30k-en-de"
    mirror = tmp_path / "mir ror"
    parsed = []
    for line in dry_run("multi30k-en-de", *args, "--mirror", str(mirror), cwd=tmp_path):
        argv, torchrun, target = parse_line(line)
        assert torchrun is None
        parsed.append((*parse_mtkit(argv), target))
    quick = "--quick" in args
    order = QUICK_ORDER if quick else ORDER
    assert [name for name, _, _ in parsed] == order
    steps = {name: params for name, params, _ in parsed}
    out = folder / out_name
    data = out / "data"
    assert steps["prepare"]["name"] == "multi30k-en-de" and list(steps["prepare"]["mirror"]) == [mirror]
    assert steps["prepare"]["out"] == data and steps["bpe"]["vocab_size"] == 8000

    train = steps["train"]
    assert (train["data"], train["out"], train["preset"]) == (data, out / "run", "small")
    assert train["max_minutes"] == minutes and train["valid_bleu"] > 0
    assert train["lr_cooldown"] == 0.2 and train["max_steps"] > 100_000, "the cooldown ends with the minutes"
    assert train["seed"] == (int(args[args.index("--seed") + 1]) if "--seed" in args else 1)
    assert train["keep_last"] == last
    # The averaged checkpoints are the last `last` saved: with one every budget / 25 they span the last fifth.
    assert train["save_every_minutes"] == pytest.approx(save_every) and train["save_every_steps"] == 0
    # --quick: smaller batches and a longer warmup for its few hundred updates (run.sh says why).
    # --max-tokens is "<int|auto>" on the command line: TrainConfig reads the number.
    assert (int(train["max_tokens"]), train["warmup"]) == ((768, 600) if quick else (2048, 400))
    if not quick:
        assert steps["average"]["last"] == last, "average exactly the checkpoints kept"
        assert [str(p) for p in steps["average"]["paths"]] == [str(out / "run")]
        assert str(steps["average"]["output"]) == str(out / "averaged.pt")
    assert [str(p) for p in steps["plot"]["runs"]] == [str(out / "run")] and steps["plot"]["x"] == "minutes"
    assert {s.value for s in steps["plot"]["y"]} == {"bleu", "loss", "ppl"}
    assert str(steps["plot"]["output"]) == str(out / "curves.png")

    pairs = [(parsed[i][1], parsed[i + 1]) for i in range(order.index("translate"), len(parsed), 2)]
    seen = set()
    for translate, (_, score, target) in pairs:
        decode = decode_config(translate)
        expected = (4, 0.6, "gnmt", "patience") if quick else (4, 1.4, "gnmt", "exact")  # run.sh says why
        assert (decode.beam, decode.alpha, decode.lenpen, decode.early_stop) == expected
        split = Path(translate["input"]).name.split(".")[0]
        assert translate["input"] == str(data / "raw" / f"{split}.en") and score["hyp"] == translate["output"]
        assert score["ref"] == [str(data / "raw" / f"{split}.de")] and score["json_out"]
        assert Path(target).parent == out
        assert len(translate["model"]) == 1, "one model, not an ensemble"
        seen.add((split, translate["model"][0]))
    last_checkpoint = str(out / "run" / "checkpoint_last.pt")
    if quick:
        assert seen == {("test", last_checkpoint)}
    else:
        assert seen == {(s, m) for s in ("valid", "test") for m in (last_checkpoint, str(out / "averaged.pt"))}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--minutes"], "--minutes needs a value"),
        (["--minutes", "soon"], "--minutes must be a number"),
        (["--minutes", "0.0"], "--minutes must be above 0"),
        (["--fast"], "unknown argument '--fast'"),
        (["--seed", "one"], "--seed must be a whole number"),
    ],
)
def test_bad_arguments_are_one_clear_line(args, message, tmp_path: Path) -> None:
    done = run_recipe("multi30k-en-de", *args, "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("run.sh: error: ") and message in done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_results_md_names_the_search_the_translate_steps_ran() -> None:
    results = load_script("recipes/multi30k-en-de/results.py")
    full = ["mtkit train d --out r", "mtkit translate --model m.pt --input x --beam 4 --alpha 1.4 --early-stop exact"]
    assert results.decoding(full) == "Beam 4, GNMT length penalty alpha 1.4, exact stop"
    assert (
        results.decoding(["mtkit translate --model m.pt --beam 5"])
        == "Beam 5, GNMT length penalty alpha 0.6, patience stop"
    )


def test_results_md_of_a_run_shorter_than_one_log_window_says_so_and_names_the_machine(tmp_path: Path) -> None:
    """A run stopped before its first training log line (a short --minutes on a slow machine) still gets its
    results.md and model.pt; the title says which device trained (the log's last start record)."""
    results = load_script("recipes/multi30k-en-de/results.py")
    out, run = tmp_path / "out", tmp_path / "out" / "run"
    run.mkdir(parents=True)
    save_checkpoints(run, [21])
    records = [
        {"event": "start", "time": 0.0, "device": "cpu", "precision": "bf16"},
        {"event": "valid", "time": 30.0, "step": 21, "epoch": 1, "loss": 8.0, "ppl": 2581.2, "bleu": 0.01},
        {"event": "done", "time": 31.0, "step": 21, "epochs_done": 0, "stopped": "max_minutes", "hours": 0.0082},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    scores = {
        "scores": [
            {"name": "BLEU", "score": 0.01, "signature": "nrefs:1"},
            {"name": "chrF2", "score": 5.0, "signature": "nc:6"},
        ]
    }
    (out / "scores.test.last.json").write_text(json.dumps(scores))
    text = results.main([str(out), str(run), "0.3", "mtkit translate --model m.pt", "--", "| train | 0:00:31 |"])
    assert text.startswith("# Multi30k En-De, small Transformer, 0.3 minutes of training on this CPU\n")
    assert f"CPU cores ({cpu_name()}); training precision bf16." in text
    assert "stopped by `max_minutes` after 0.5 minutes of training wall-clock; no log window" in text
    model = checkpoint.load(out / "model.pt")  # the last checkpoint's weights, without the training state
    assert model["kind"] == "model" and "optimizer" not in model and model["taken_from"]["step"] == 21
