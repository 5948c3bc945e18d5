"""Several workers (`Translator(workers=N)`, `mtkit translate --workers N`): the same outputs as one, in order."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import mtkit.decode.translator as translator_module
from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.decode.loading import load_translator
from mtkit.decode.torch_engine import TorchEngine
from mtkit.decode.translator import Translation, Translator
from mtkit.errors import MtkitError

FAST = DecodeConfig(beam=2, max_len_b=5)
SEARCH = translator_module.search_batch


# Stand-ins for `search_batch`, at module level: a job reaches its worker pickled, its function by name.
def recorded(translator, **batch):
    with open(os.environ["MTKIT_TEST_WORKERS_LOG"], "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {torch.get_num_threads()} {openmp_threads()}\n")
    return SEARCH(translator, **batch)


def broken(translator, **batch):
    raise ValueError("this batch failed")


def killed(translator, **batch):
    os._exit(9)  # as the kernel's out-of-memory killer would end it


@pytest.fixture(scope="module")
def translators(model_file):
    one, two = load_translator(model_file, device="cpu"), load_translator(model_file, device="cpu", workers=2)
    yield one, two
    two.close()


def same(a: list[Translation], b: list[Translation]) -> None:
    """The same lines and texts; scores to 1e-5 (two workers split a chunk into other batches, and a batch's
    padding changes the last bits of its sums)."""
    assert [(t.line, [text for text, _ in t.hypotheses]) for t in a] == [
        (t.line, [text for text, _ in t.hypotheses]) for t in b
    ]
    assert [s for t in a for _, s in t.hypotheses] == pytest.approx([s for t in b for _, s in t.hypotheses], abs=1e-5)


def test_workers_translate_sample_and_score_as_one_worker_does(translators, multi30k_lines):
    one, two = translators
    lines = multi30k_lines["test_2016_flickr.en"][:24]
    lines[5:5] = [""]
    runs = [list(t.translate_stream(lines, FAST, batch_tokens=60, chunk_lines=10)) for t in (one, two)]
    same(runs[0], runs[1])
    assert [t.line for t in runs[1]] == list(range(1, len(lines) + 1))
    sampling = SamplingConfig(topk=5, seed=3, samples=2)
    samples = [list(t.translate_stream(lines, FAST, batch_tokens=60, sampling=sampling)) for t in (one, two)]
    same(samples[0], samples[1])
    pairs = [(line, line) for line in lines[:12] if len(line) < 60]  # targets within the tiny model's positions
    assert len(pairs) >= 5
    scores = [t.score(pairs, batch_tokens=60) for t in (one, two)]
    assert [(s.line, s.length) for s in scores[0]] == [(s.line, s.length) for s in scores[1]]
    assert [s.logprob for s in scores[0]] == pytest.approx([s.logprob for s in scores[1]], abs=1e-4)


def openmp_threads() -> int:
    """omp_get_max_threads of the OpenMP runtime PyTorch loaded: the thread count OpenMP gives this thread."""
    torch_dir = str(Path(torch.__file__).parent)  # not another package's runtime (CTranslate2 brings its own)
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = {line.split()[-1] for line in maps if "omp" in line and line.split()[-1].startswith(torch_dir)}
    if not paths:
        return -1
    return int(ctypes.CDLL(sorted(paths)[0]).omp_get_max_threads())


def test_the_batches_run_in_worker_processes_of_one_thread_each(model_file, tmp_path, monkeypatch):
    """Other processes than this one, each with one PyTorch and one OpenMP thread (GNU OpenMP hangs when a
    forked process starts threads), and the workers end with close()."""
    log = tmp_path / "workers.log"
    monkeypatch.setenv("MTKIT_TEST_WORKERS_LOG", str(log))
    monkeypatch.setattr(translator_module, "search_batch", recorded)  # before the workers are forked
    two = load_translator(model_file, device="cpu", workers=2)
    try:
        sentences = ["A dog runs.", "Two men talk.", "A cat sleeps.", "A girl reads.", "It rains."]
        assert len(list(two.translate_stream(sentences, FAST, batch_tokens=8))) == 5
        assert two._pool is not None
        pids = two._pool.pids
    finally:
        two.close()
    rows = [line.split() for line in log.read_text().splitlines()]
    assert len(rows) >= 2 and str(os.getpid()) not in {pid for pid, _, _ in rows}
    assert {torch_threads for _, torch_threads, _ in rows} == {"1"}
    assert {omp for _, _, omp in rows} <= {"1", "-1"}  # -1: no OpenMP runtime of PyTorch's own to ask
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)


def test_a_failing_batch_ends_the_stream_with_its_error(model_file, multi30k_lines, monkeypatch):
    monkeypatch.setattr(translator_module, "search_batch", broken)
    two = load_translator(model_file, device="cpu", workers=2)
    try:
        with pytest.raises(ValueError, match="this batch failed"):
            list(two.translate_stream(multi30k_lines["test_2016_flickr.en"][:12], FAST, batch_tokens=40))
    finally:
        two.close()


def test_a_worker_that_dies_is_one_clear_error_and_a_later_search_starts_new_ones(
    model_file, multi30k_lines, monkeypatch
):
    monkeypatch.setattr(translator_module, "search_batch", killed)
    two = load_translator(model_file, device="cpu", workers=2)
    lines = multi30k_lines["test_2016_flickr.en"][:12]
    with pytest.raises(MtkitError, match="a decoding worker stopped before its batch was done"):
        list(two.translate_stream(lines, FAST, batch_tokens=40))
    assert two._pool is not None and two._pool.closed
    monkeypatch.undo()  # the real search, in workers forked anew
    try:
        assert [t.line for t in two.translate_stream(lines, FAST, batch_tokens=40)] == list(range(1, 13))
    finally:
        two.close()


def test_workers_are_for_the_cpu_and_at_least_one(translators, monkeypatch):
    one, _ = translators
    with pytest.raises(MtkitError, match="on the CPU only"):
        Translator(TorchEngine(one.engine.model, "cuda"), one.vocab, workers=2)
    with pytest.raises(MtkitError, match="at least 1"):
        Translator(one.engine, one.vocab, workers=0)
    monkeypatch.setattr(translator_module.sys, "platform", "darwin")
    with pytest.raises(MtkitError, match="need Linux"):
        Translator(one.engine, one.vocab, workers=2)


@pytest.mark.slow
def test_the_cli_with_two_workers_writes_what_one_writes(cli, model_file, multi30k_lines):
    text = "\n".join(multi30k_lines["test_2016_flickr.en"][:10]) + "\n"
    options = ("-m", model_file, "--beam", "2", "--max-len-b", "4", "--batch-tokens", "40", "--device", "cpu")
    outputs = [cli("translate", *options, *extra, input=text) for extra in ((), ("--workers", "2"))]
    assert all(done.returncode == 0 for done in outputs), outputs[1].stderr
    assert outputs[0].stdout == outputs[1].stdout and len(outputs[1].stdout.splitlines()) == 10
    for extra, message in ((("--workers", "0"), "--workers"), (("--workers", "2", "--threads", "2"), "one thread")):
        done = cli("translate", *options, *extra, input=text)
        assert done.returncode in (1, 2) and message in done.stderr and "Traceback" not in done.stderr


def test_workers_end_when_their_parent_is_killed(model_file):
    """A worker waits on a queue whose write end it holds too: without PR_SET_PDEATHSIG it would wait forever."""
    script = (
        "import sys, time\n"
        "from mtkit.decode.loading import load_translator\n"
        "t = load_translator(sys.argv[1], device='cpu', workers=2)\n"
        "print(' '.join(map(str, t._pool.pids)), flush=True)\n"
        "time.sleep(600)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    parent = subprocess.Popen([sys.executable, "-c", script, str(model_file)], stdout=subprocess.PIPE, env=env)
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(Path(f"/proc/{pid}").exists() for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30  # a liveness bound, not a speed check: they end within milliseconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
