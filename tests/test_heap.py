"""CPU training's heap policy (mtkit/heap.py): freed memory comes back without page faults, and the opt-outs hold."""

import json
import os
import subprocess
import sys

import pytest

from mtkit import heap
from mtkit.errors import MtkitError

# A fresh process allocates and fills a 64 MB tensor, frees it, then does the same with a 56 MB one, and reports
# the minor page faults of each: glibc maps so large a block anew each time unless the heap keeps it. The second
# is smaller so that it fits in the freed block (one of the same size needs a few bytes more for its alignment
# and would extend the heap instead).
ROUNDS = """
import json, resource, sys
import torch
from mtkit.heap import keep_freed_memory
policy = keep_freed_memory()
faults = []
for floats in (16 * 2**20, 14 * 2**20):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.empty(floats).fill_(1.0)  # every page touched
    del x
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"policy": policy, "faults": faults}))
"""

glibc_only = pytest.mark.skipif(not heap.is_glibc(), reason="the policy is glibc's mallopt")
SETTINGS = (*heap.GLIBC_MALLOC_ENV, heap.HEAP_ENV, "GLIBC_TUNABLES")  # whatever this shell may say of malloc


@pytest.fixture
def fresh_policy():
    """keep_freed_memory decides once per process: each test here asks it anew, and leaves no answer behind."""
    heap.keep_freed_memory.cache_clear()
    yield
    heap.keep_freed_memory.cache_clear()


def rounds(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS], env={**clean, **env}, capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(done.stdout)


@glibc_only
def test_kept_heap_serves_a_freed_block_again_without_faults():
    kept = rounds()
    assert kept["policy"][0] == "keep", kept
    first, second = kept["faults"]
    assert first > 10_000 and second < first // 10, kept  # 16,384 pages the first time, next to none again
    default = rounds(**{heap.HEAP_ENV: "default"})
    assert default["policy"] == ["default", "MTKIT_CPU_HEAP=default"]
    assert min(default["faults"]) > 10_000, default  # glibc's own policy faults the block in every time


@pytest.mark.parametrize(
    "env, why",
    [
        ({heap.HEAP_ENV: "default"}, "MTKIT_CPU_HEAP=default"),
        ({"MALLOC_MMAP_MAX_": "0"}, "the environment tunes glibc's malloc (MALLOC_MMAP_MAX_)"),
        ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"}, "the environment tunes glibc's malloc (GLIBC_TUNABLES)"),
    ],
)
def test_the_environment_keeps_glibcs_policy(monkeypatch, fresh_policy, env, why):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert heap.keep_freed_memory() == ("default", why)


def test_an_unknown_setting_is_a_mistake_said_as_one(monkeypatch, fresh_policy):
    monkeypatch.setenv(heap.HEAP_ENV, "lots")
    with pytest.raises(MtkitError, match="MTKIT_CPU_HEAP='lots'; choose keep or default."):
        heap.keep_freed_memory()
