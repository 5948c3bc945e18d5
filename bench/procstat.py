"""What the benches read of a process and its children (mtkit's --workers) from Linux's /proc.

from procstat import child_pids, counters, peak_rss_mib, totals   # bench/ is a script's sys.path[0]
"""

from __future__ import annotations

import glob
import os
import platform
import threading

Counters = dict[str, tuple[float, float, int, float]]  # {pid: (CPU s, of them in the kernel, minor faults, VmHWM MiB)}


def read_stat(path: str) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first): the name may hold spaces."""
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read().rsplit(")", 1)[1].split()


def child_pids() -> list[str]:
    """The process ids of this process's children (mtkit's --workers)."""
    pids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            if int(read_stat(stat)[1]) == os.getpid():
                pids.append(stat.split("/")[2])
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return pids


def peak_rss_mib(pid: str = "self") -> float:
    """A process's own high-water mark of resident memory (VmHWM), in MiB: this one's by default."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def counters() -> Counters:
    """This process's and its children's counters so far: {pid: (CPU seconds, of them in the kernel, minor page
    faults, peak RSS MiB)}.

    A minor page fault is the kernel mapping (and zeroing) a page on its first touch: a fresh buffer costs one
    per 4 KiB written, in system CPU time.
    """
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in [str(os.getpid()), *child_pids()]:
        try:
            fields = read_stat(f"/proc/{pid}/stat")
            hwm = peak_rss_mib(pid)
        except (OSError, IndexError, ValueError):
            continue
        found[pid] = ((int(fields[11]) + int(fields[12])) / tick, int(fields[12]) / tick, int(fields[7]), hwm)
    return found


def totals(before: Counters, after: Counters) -> dict[str, float]:
    """What the processes of `after` used since `before` (`counters`), added up; peak RSS: their peaks added up."""
    zero = (0.0, 0.0, 0, 0.0)
    return {
        "cpu_seconds": sum(a[0] - before.get(pid, zero)[0] for pid, a in after.items()),
        "system_cpu_seconds": sum(a[1] - before.get(pid, zero)[1] for pid, a in after.items()),
        "minor_faults": sum(a[2] - before.get(pid, zero)[2] for pid, a in after.items()),
        "peak_rss_mib": sum(a[3] for a in after.values()),
    }


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor() or platform.machine()


def workers_peak_rss_mib() -> float:
    """The VmHWM of this process's child processes (mtkit's --workers) added up, in MiB.

    An upper bound: the weights a forked worker shares with its parent count in both.
    """
    return sum(peak_rss_mib(pid) for pid in child_pids())


def pss_mib(pids: list[str]) -> float:
    """The memory these processes hold together now, in MiB: the sum of their PSS (proportional set size), in
    which a page that n processes share counts 1/n in each, so pages a forked worker still shares with its
    parent (weights, libraries) count once in the sum. A process that ended meanwhile counts 0."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0) / 1024
        except OSError:
            continue
    return total


class PeakPss:
    """The highest `pss_mib` of this process and its children, sampled every `interval` seconds on a thread.

    The kernel keeps no high-water mark of PSS, so this one is sampled: a peak that lasts less than the
    interval can be missed. Reading smaps_rollup walks a process's page tables, which takes time from the
    translation, so the bench samples in a pass of its own, after the timed one."""

    def __init__(self, interval: float = 0.05):
        self.interval, self.peak = interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, pss_mib(["self", *child_pids()]))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakPss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
