"""CPU training keeps the memory it frees: glibc's heap is neither mapped anew nor trimmed between updates.

Not in the paper: an engineering choice about the C allocator under PyTorch's CPU tensors. By default
glibc serves a request above its mmap threshold (128 KB, rising to at most 32 MB as such blocks are
freed) with a fresh mapping and unmaps it on free, and gives the top of its heap back to the kernel
once more than the trim threshold lies free there. A training update frees and allocates the same
large activations and gradients again and again, so every update touched fresh pages, one minor page
fault per 4 KB, and a fault is slow in a virtual machine. With mmap off and trimming off the faults stop
after the third update (the heap has reached its high-water mark), and updates measured faster at the same
peak RSS (docs/benchmarks.md, "Figures behind the code's choices": this module).

The cost: memory a run frees stays with the process until it exits (the peak RSS is what a training
run needs anyway). glibc only; elsewhere, or where the environment already tunes glibc's malloc, or with
MTKIT_CPU_HEAP=default, nothing changes. Decoding keeps the defaults: there it measured within noise this way
while its peak memory rose by a fifth (the same row).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

from mtkit.errors import MtkitError

HEAP_ENV = "MTKIT_CPU_HEAP"  # keep (the default for CPU training) | default (glibc's own policy)
# mallopt(3) parameters (glibc's malloc.h); `value` is a C int.
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
NO_TRIM = 2**31 - 1  # the largest int: the top of the heap is never handed back
DEFAULT_MMAP_MAX = 65536  # glibc's own limit on mapped blocks
GLIBC_MALLOC_ENV = ("MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def is_glibc() -> bool:
    """Whether this process runs on glibc, the only C library whose policy this module changes."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@functools.cache
def keep_freed_memory() -> tuple[str, str]:
    """Switch glibc to keep freed memory for reuse (once per process); returns (policy, why) for the run's log.

    policy is "keep" when it was switched, "default" when glibc's own policy stays. An unknown MTKIT_CPU_HEAP
    value is a mistake, said as one (as MTKIT_CPU_MATMUL's is), not quietly read as either.
    """
    pinned = os.environ.get(HEAP_ENV, "keep")
    if pinned not in ("keep", "default"):
        raise MtkitError(f"{HEAP_ENV}={pinned!r}; choose keep or default.")
    if pinned == "default":
        return "default", f"{HEAP_ENV}=default"
    tuned = [name for name in GLIBC_MALLOC_ENV if name in os.environ]
    if tuned or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return "default", f"the environment tunes glibc's malloc ({', '.join(tuned) or 'GLIBC_TUNABLES'})"
    if not is_glibc():
        return "default", "not glibc"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "default", "glibc's mallopt is not reachable"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # Mapping off first: a trim threshold set alone would also freeze glibc's mmap threshold at 128 KB
    # (setting either stops its adjustment), and then far more blocks would be mapped and faulted in.
    if not mallopt(M_MMAP_MAX, 0):
        return "default", "glibc refused to stop mapping large blocks"
    if not mallopt(M_TRIM_THRESHOLD, NO_TRIM):
        mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        return "default", "glibc refused the trim threshold"
    return "keep", "freed memory is reused, not unmapped or trimmed: fewer page faults"
