"""SIGTERM while validating (the dev loss, or --valid-bleu's decoding): validation stops at the next batch, the run
saves checkpoint_last.pt and exits 143, within a preemption's grace rather than after the whole validation.
The resumed run does that validation first, so best and patience see the scores an unbroken run sees; so too
when the signal came during the update a validation was due after.

The hook sends the signal from inside the first batch of the chosen stage and counts the batches
computed; the validation's other batches are never computed and it records no score.
"""

from __future__ import annotations

import textwrap

import pytest

from mtkit import checkpoint
from mtkit.data.batching import plan_batches
from mtkit.data.dataset import open_data
from tests.support.cli import run_cli
from tests.support.metrics import records
from tests.support.training import FAST, start_training

SIGTERM_IN_VALIDATION = textwrap.dedent("""
    import os, signal, sys
    from mtkit import cli
    from mtkit.decode import translator
    from mtkit.train import trainer, validation
    validation.BLEU_CHUNK_LINES = 2  # --valid-bleu 8: 4 chunks of decoding, a signal read after each
    def counted(real, stage):
        sent = []
        def batch(*args, **kwargs):
            print(f"validation batch: {stage}", file=sys.stderr, flush=True)
            if stage == os.environ["SIGTERM_IN"] and not sent:
                sent.append(stage)
                os.kill(os.getpid(), signal.SIGTERM)  # a preemption in the middle of this stage
            return real(*args, **kwargs)
        return batch
    validation.batch_loss = counted(validation.batch_loss, "loss")  # validation's only: training's is forward's
    translator.search_batch = counted(translator.search_batch, "bleu")  # one decoding batch (a module function)
    trainer.accumulate = counted(trainer.accumulate, "update")  # one training update's batches
    sys.argv = ["mtkit", *sys.argv[1:]]
    cli.main()
""")

MAX_TOKENS = 200  # the 40 dev sentences make several validation batches
ARGS = ("--max-tokens", str(MAX_TOKENS), "--max-steps", "100000", "--valid-every", "1", "--save-every-steps", "0")


def _validation_batches(stderr: str) -> list[str]:
    return [s for line in stderr.splitlines() if line.startswith("validation batch: ") and (s := line[18:]) != "update"]


@pytest.mark.parametrize("stage", ["loss", "bleu"])
def test_sigterm_during_validation_stops_it_between_batches_saves_and_exits_143(toy_data, tmp_path, stage) -> None:
    """fault: SIGTERM in the dev loss / --valid-bleu decoding; expected: no further batch, saved, exit 143."""
    run = tmp_path / "run"
    process = start_training(
        toy_data, run, *ARGS, "--valid-bleu", "8", script=SIGTERM_IN_VALIDATION, env={"SIGTERM_IN": stage}
    )
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr and stderr.count("mtkit: SIGTERM: saved") == 1
    batches = _validation_batches(stderr)
    valid = open_data(toy_data).split("valid")
    loss_batches = len(plan_batches(valid.src_sizes, valid.tgt_sizes, MAX_TOKENS, 5))
    assert loss_batches > 1
    if stage == "loss":
        assert batches == ["loss"]  # one of the loss batches, and no decoding at all
    else:
        assert batches == ["loss"] * loss_batches + ["bleu"]  # the whole loss, one of 4 decoding batches
    events = records(run)
    assert "valid" not in [r["event"] for r in events]  # a validation cut short has no score
    done = events[-1]
    assert done["event"] == "done" and (done["stopped"], done["step"]) == ("SIGTERM", 1)
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 1
    assert not (run / "checkpoint_best.pt").exists()


def test_a_validation_that_finishes_scores_every_batch(toy_data, tmp_path) -> None:
    """The hook's counts without a signal: what the test above says was left out is there to leave out."""
    run = tmp_path / "run"
    process = start_training(
        toy_data,
        run,
        *ARGS[:2],
        "--max-steps",
        "1",
        "--valid-every",
        "1",
        "--valid-bleu",
        "8",
        script=SIGTERM_IN_VALIDATION,
        env={"SIGTERM_IN": "none"},
    )
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    batches = _validation_batches(stderr)
    assert batches.count("bleu") == 4 and batches.count("loss") > 1
    assert [r["event"] for r in records(run)].count("valid") == 1


@pytest.mark.parametrize("stage", ["loss", "update"])
def test_the_resumed_run_first_does_the_validation_the_signal_kept_from_running(toy_data, tmp_path, stage) -> None:
    """fault: SIGTERM in the dev loss, or in the update a validation is due after; expected: resuming validates
    at that step first, with the scores of a run never interrupted, and keeps the best checkpoint."""
    args = (*ARGS[:2], "--valid-every", "1", "--save-every-steps", "0")
    unbroken = start_training(
        toy_data, tmp_path / "unbroken", *args, "--max-steps", "1", script=SIGTERM_IN_VALIDATION, env={"SIGTERM_IN": ""}
    )
    _, stderr = unbroken.communicate(timeout=300)
    assert unbroken.returncode == 0, stderr[-3000:]
    expected = [r for r in records(tmp_path / "unbroken") if r["event"] == "valid"]

    run = tmp_path / "run"
    cut = start_training(
        toy_data, run, *args, "--max-steps", "1", script=SIGTERM_IN_VALIDATION, env={"SIGTERM_IN": stage}
    )
    _, stderr = cut.communicate(timeout=300)
    assert cut.returncode == 143 and "valid" not in [r["event"] for r in records(run)], stderr[-3000:]
    assert checkpoint.load(run / "checkpoint_last.pt")["progress"]["valid_due"] is True
    assert not (run / "checkpoint_best.pt").exists()

    resumed = run_cli("train", toy_data, "--out", run, *FAST, *args, "--max-steps", "1")  # the run had ended there
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr[-3000:]
    valid = [r for r in records(run) if r["event"] == "valid"]
    assert [(r["step"], r["loss"], r["nll"], r["best"]) for r in valid] == [
        (r["step"], r["loss"], r["nll"], r["best"]) for r in expected
    ]
    assert records(run)[-1]["stopped"] == "max_steps"
    best = checkpoint.load(run / "checkpoint_best.pt")
    assert best["step"] == 1 and best["progress"]["valid_due"] is False
    assert checkpoint.load(run / "checkpoint_last.pt")["progress"]["valid_due"] is False
