"""Multi-node resume where RUN is not on a disk every node sees: the ranks compare what they found and refuse.

On one machine, a node whose disk lacks RUN's files is a rank whose --out names another
(missing) directory: the same path on another node's own disk. Rank 0 would resume from
its checkpoint and rank 1 start at step 0 with empty Adam moments; DDP syncs only the
weights, so the replicas would drift apart silently. Both ranks must refuse in one sentence.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.torchrun import torchrun as launch
from tests.support.training import FAST

ANOTHER_NODES_DISK = textwrap.dedent("""
    import os, sys
    from mtkit import cli
    args = sys.argv[1:]
    if os.environ["RANK"] == "1" and os.environ.get("RANK1_OUT"):  # rank 1's node: RUN's path, its own disk
        args[args.index("--out") + 1] = os.environ["RANK1_OUT"]
    sys.argv = ["mtkit", *args]
    cli.main()
""")

STEPS = ("--max-tokens", "400", "--valid-every", "100", "--save-every-steps", "0", "--log-every", "1")


def torchrun(script: Path, data: Path, run: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return launch(script, "train", data, "--out", run, *FAST, *STEPS, *args, **env)


@pytest.mark.slow
def test_ranks_that_see_different_run_directories_refuse_to_resume_and_agreeing_ones_resume(toy_data, tmp_path) -> None:
    """fault: torchrun resume with RUN on rank 0's disk only; expected: every rank refuses in one sentence, exit 1.
    The same resume with RUN seen by both ranks continues from the checkpoint on both."""
    run, script = tmp_path / "run", tmp_path / "rank.py"
    script.write_text(ANOTHER_NODES_DISK)
    first = run_cli("train", toy_data, "--out", run, *FAST, *STEPS, "--max-steps", "2")
    assert first.returncode == 0, first.stderr

    refused = torchrun(script, toy_data, run, "--max-steps", "4", RANK1_OUT=str(tmp_path / "node1" / "run"))
    assert refused.returncode != 0
    said = [line for line in refused.stderr.splitlines() if line.startswith("mtkit: error:")]
    assert len(said) == 2, refused.stderr[-3000:]  # each rank says it, neither waits for the other
    found = r"rank 0: the checkpoint of step 2, \d+ s into its run; rank 1: no checkpoint"
    assert all(re.search(found, line) for line in said), said
    assert all("RUN must be on a filesystem every node sees" in line for line in said), said
    assert not [line for line in refused.stderr.splitlines() if 'File "' in line and "/mtkit/" in line]
    assert sorted(p.name for p in run.glob("checkpoint_[0-9]*.pt")) == ["checkpoint_2.pt"]  # nothing trained

    agreed = torchrun(script, toy_data, run, "--max-steps", "4")
    assert agreed.returncode == 0, agreed.stderr[-3000:]
    assert "resume | step 2" in agreed.stderr and "world_size 2" in agreed.stderr
    assert sorted(p.name for p in run.glob("checkpoint_[0-9]*.pt")) == ["checkpoint_2.pt", "checkpoint_4.pt"]


def test_each_rank_refuses_what_any_rank_found_wrong(tmp_path, monkeypatch) -> None:
    """What the ranks found, as rank 0 gathers it: the same checkpoint resumes, anything else is one sentence."""
    import torch

    from mtkit import checkpoint
    from mtkit.config import ModelConfig
    from mtkit.errors import MtkitError
    from mtkit.train import distributed, resume

    position = {"data": {"epoch": 0, "batch": 2, "world_size": 2, "max_tokens": 400, "seed": 5}}
    saved = {"format": "mtkit", "version": 1, "kind": "checkpoint", "model": {"w": torch.ones(2)}, "optimizer": {}}
    saved["model_config"] = dataclasses.asdict(ModelConfig())  # what every checkpoint holds (checkpoint.require_model)
    checkpoint.save_checkpoint({**saved, **position, "step": 2, "progress": {"elapsed": 9.5}}, tmp_path, 2)
    rank0 = distributed.World(rank=0, size=2, local_rank=0, device=torch.device("cpu"))
    same = ("", (2, 0, 2, 9.5))

    def gathered(*others):
        monkeypatch.setattr(distributed, "all_gather_objects", lambda mine, world: [mine, *others])

    gathered(same)
    assert resume.agreed_checkpoint(tmp_path, rank0)["step"] == 2
    for other, said in [
        (("", None), "rank 0: the checkpoint of step 2, 10 s into its run; rank 1: no checkpoint"),
        (("", (2, 0, 2, 3.0)), "rank 1: the checkpoint of step 2, 3 s into its run"),  # another run's
        (("RUN holds checkpoints but none can be resumed", None), "none can be resumed"),
    ]:
        gathered(other)
        with pytest.raises(MtkitError, match=said):
            resume.agreed_checkpoint(tmp_path, rank0)
