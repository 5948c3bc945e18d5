"""Several workers (`Translator(workers=N)`, `mtkit translate --workers N`): the same outputs as one, in order."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.decode.translator import Translation, Translator, balanced_batches, pack_batches
from mtkit.errors import MtkitError

FAST = DecodeConfig(beam=2, max_len_b=5)


@pytest.fixture(scope="module")
def translators(model_file) -> tuple[Translator, Translator]:
    return Translator.load(model_file, device="cpu"), Translator.load(model_file, device="cpu", workers=2)


def test_balanced_batches_give_each_worker_a_share_and_keep_every_sentence_within_the_budget():
    lengths = [3] * 10
    assert pack_batches(lengths, 9) == balanced_batches(lengths, 9, 1)  # one worker: the batches as they were
    assert len(pack_batches(lengths, 12)) == 3
    two = balanced_batches(lengths, 12, 2)
    assert len(two) == 4 and sorted(i for b in two for i in b) == list(range(10))
    assert all(len(b) * 3 <= 12 for b in two)
    assert len(balanced_batches(lengths, 9, 2)) == 4  # already a multiple: unchanged
    assert balanced_batches([7], 100, 2) == [[0]]  # one sentence cannot be split


def test_workers_translate_sample_and_score_as_one_worker_does(translators, multi30k_lines, monkeypatch):
    one, two = translators
    lines = multi30k_lines["test_2016_flickr.en"][:24]
    lines[5:5] = [""]
    names = set()
    search = two._search

    def recorded(*args, **kwargs):
        names.add(threading.current_thread().name)
        return search(*args, **kwargs)

    monkeypatch.setattr(two, "_search", recorded)
    runs = [list(t.translate_stream(lines, FAST, batch_tokens=60, chunk_lines=10)) for t in (one, two)]
    same(runs[0], runs[1])
    assert [t.line for t in runs[1]] == list(range(1, len(lines) + 1))
    assert len(names) == 2 and all(name.startswith("mtkit-search") for name in names)
    sampling = SamplingConfig(topk=5, seed=3, samples=2)
    samples = [list(t.translate_stream(lines, FAST, batch_tokens=60, sampling=sampling)) for t in (one, two)]
    same(samples[0], samples[1])
    pairs = [(line, line) for line in lines[:12] if len(line) < 60]  # targets within the tiny model's positions
    assert len(pairs) >= 5
    scores = [t.score(pairs, batch_tokens=60) for t in (one, two)]
    assert [(s.line, s.length) for s in scores[0]] == [(s.line, s.length) for s in scores[1]]
    assert [s.logprob for s in scores[0]] == pytest.approx([s.logprob for s in scores[1]], abs=1e-4)


def same(a: list[Translation], b: list[Translation]) -> None:
    """The same lines and texts; scores to 1e-5 (two workers split a chunk into other batches, and a batch's
    padding changes the last bits of its sums)."""
    assert [(t.line, [text for text, _ in t.hypotheses]) for t in a] == [
        (t.line, [text for text, _ in t.hypotheses]) for t in b
    ]
    assert [s for t in a for _, s in t.hypotheses] == pytest.approx([s for t in b for _, s in t.hypotheses], abs=1e-5)


def test_a_failing_batch_ends_the_stream_with_its_error(translators, multi30k_lines, monkeypatch):
    _, two = translators

    def broken(*args, **kwargs):
        raise ValueError("this batch failed")

    monkeypatch.setattr(two, "_search", broken)
    with pytest.raises(ValueError, match="this batch failed"):
        list(two.translate_stream(multi30k_lines["test_2016_flickr.en"][:12], FAST, batch_tokens=40))


def test_workers_are_for_the_cpu_and_at_least_one(translators):
    one, _ = translators
    with pytest.raises(MtkitError, match="on the CPU only"):
        Translator(one.model, one.vocab, device="cuda", workers=2)
    with pytest.raises(MtkitError, match="at least 1"):
        Translator(one.model, one.vocab, device="cpu", workers=0)


@pytest.mark.slow
def test_the_cli_with_two_workers_writes_what_one_writes(cli, model_file, multi30k_lines):
    text = "\n".join(multi30k_lines["test_2016_flickr.en"][:10]) + "\n"
    options = ("-m", model_file, "--beam", "2", "--max-len-b", "4", "--batch-tokens", "40", "--device", "cpu")
    outputs = [cli("translate", *options, *extra, input=text) for extra in ((), ("--workers", "2"))]
    assert all(done.returncode == 0 for done in outputs), outputs[1].stderr
    assert outputs[0].stdout == outputs[1].stdout and len(outputs[1].stdout.splitlines()) == 10
    done = cli("translate", *options, "--workers", "0", input=text)
    assert done.returncode == 2 and "--workers" in done.stderr and "Traceback" not in done.stderr


def openmp_threads() -> Callable[[], int]:
    """omp_get_max_threads of the OpenMP runtime PyTorch loaded: the count OpenMP gives the calling thread."""
    torch_dir = str(Path(torch.__file__).parent)  # not another package's runtime (CTranslate2 brings its own)
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = {line.split()[-1] for line in maps if "omp" in line and line.split()[-1].startswith(torch_dir)}
    if not paths:
        pytest.skip("this PyTorch loads no OpenMP runtime of its own that the test can ask")
    return ctypes.CDLL(sorted(paths)[0]).omp_get_max_threads


def test_each_worker_runs_with_the_threads_pytorch_had_when_the_workers_started(model_file, monkeypatch):
    """OpenMP keeps a thread count per thread: a worker must set its own, or oneDNN would use every core."""
    ask = openmp_threads()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        two = Translator.load(model_file, device="cpu", workers=2)
        counts = []
        search = two._search

        def recorded(*args, **kwargs):
            counts.append(ask())
            return search(*args, **kwargs)

        monkeypatch.setattr(two, "_search", recorded)
        list(two.translate_stream(["A dog runs.", "Two men talk.", "A cat sleeps."], FAST, batch_tokens=8))
    finally:
        torch.set_num_threads(before)
    assert len(counts) >= 2 and set(counts) == {1}
