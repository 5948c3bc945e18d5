"""The bench/ scripts' building blocks: a bench that stopped working goes unnoticed until its figures are needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from recipe_tools import load_script

from mtkit.data.dataset import open_data


def test_train_throughputs_synthetic_corpus_is_data_that_training_reads(tmp_path: Path) -> None:
    data = open_data(load_script("bench/train_throughput.py").make_corpus(tmp_path / "data", 50, 1000, seed=1))
    assert data.vocab_size == 1000 and (data.src_lang, data.tgt_lang) == ("en", "de")
    train, valid = data.split("train"), data.split("valid")
    assert (len(train), len(valid)) == (50, 64)
    assert train.max_id() < 1000 and train.src_sizes.min() >= 1 and 10 < train.src_sizes.mean() < 50


def resident_mib(pid: str) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux's /proc/PID/smaps_rollup")
def test_translate_speeds_pss_counts_what_a_forked_worker_shares_once() -> None:
    """`--workers` memory: 64 MiB written before a fork, then shared by parent and child, is 64 MiB in the PSS
    sum, where adding up the two processes' resident sizes counts it twice."""
    bench = load_script("bench/translate_speed.py")
    shared = b"\1" * (64 * 2**20)  # written, so resident in the parent before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: holds the shared pages until the parent has measured
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        both = bench.pss_mib(["self", str(pid)])
        resident = resident_mib("self") + resident_mib(str(pid))
        with bench.PeakPss(interval=0.01) as peak:
            pass
    finally:
        os.write(write, b"x")
        os.waitpid(pid, 0)
    del shared  # held until both processes were measured
    assert resident - both > 48  # the 64 MiB count once, not twice
    assert 64 < both < resident
    assert peak.peak > 0 and bench.pss_mib(["no-such-process"]) == 0.0
