"""The benches' one harness: rounds taken in turns, what a process used (Linux's /proc), the table, and the record.

    from harness import Record, latency, paired_ratio, table   # bench/ is a script's sys.path[0]

Serving: `serving(options, log)` runs `mtkit serve` of this checkout for a bench's clients.

Rounds: two systems measured back to back in one round see nearly the same machine, so the median over rounds
of their within-round ratio (`paired_ratio`) is steadier than best round over best round on a machine whose
speed drifts or that others share. A bench runs its systems A B, then B A, and keeps every pass.

Records: every figure a page shows comes from a JSON file under docs/results/ that the bench measuring it wrote
(`Record`, given `--record docs/results/NAME.json`): the command, the commit, the date, the machine (CPU model
and flags, cores, threads, the load when the bench started), the settings, the raw passes and what was made of
them. docs/gen_figures.py renders pages from these files; tests/test_results_registry.py checks that each
record's command still parses and that the pages state no figure the records do not hold.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import glob
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FORMAT, VERSION = "mtkit-bench-record", 1
# The CPU flags a figure depends on (the products' instruction sets); the rest of the list says nothing about speed.
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "avx512_fp16")


# ----------------------------------------------------------------------------------------------------- rounds
def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) over rounds of numerators[i] / denominators[i], round by round."""
    if not numerators or len(numerators) != len(denominators):
        raise ValueError("a paired ratio needs the same number (at least one) of rounds on both sides")
    ratios = [a / b for a, b in zip(numerators, denominators)]
    return statistics.median(ratios), min(ratios), max(ratios)


def latency(ms: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and the mean of per-request times (inclusive percentiles, as every latency bench gives them)."""
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"p50": q[49], "p90": q[89], "p99": q[98], "mean": statistics.fmean(ms)}


def keep_best(best: dict[str, Any] | None, row: dict[str, Any]) -> dict[str, Any]:
    """The faster of two rounds' rows, with every round's sentences/s and the highest peak RSS (and PSS) of them all.

    Best speed: a shared machine only ever slows a round down. Highest memory: the peak is what a user must
    provision for, and it varies between identical runs.
    """
    if best is None:
        return {**row, "rounds_sentences_per_s": [row["sentences_per_s"]]}
    rounds = [*best["rounds_sentences_per_s"], row["sentences_per_s"]]
    faster = row if row["sentences_per_s"] > best["sentences_per_s"] else best
    kept = {**faster, "rounds_sentences_per_s": rounds, "peak_rss_mib": max(best["peak_rss_mib"], row["peak_rss_mib"])}
    if "peak_pss_mib" in row:
        kept["peak_pss_mib"] = max(best.get("peak_pss_mib", 0.0), row["peak_pss_mib"])
    return kept


# ----------------------------------------------------------------------------------------------------- the table
def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A Markdown table of `rows` in `columns` (a missing value: "-"; floats to 2 decimals)."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:,.2f}" if isinstance(value, float) else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------- processes
Counters = dict[str, tuple[float, float, int, float]]  # {pid: (CPU s, of them in the kernel, minor faults, VmHWM MiB)}


def read_stat(path: str) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first): the name may hold spaces."""
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read().rsplit(")", 1)[1].split()


def process_cpu_s(pid: int | str) -> float:
    """The CPU seconds (user and system, every thread) process `pid` has used so far."""
    fields = read_stat(f"/proc/{pid}/stat")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(parent: int | None = None) -> list[str]:
    """The process ids of `parent`'s children (by default this process's: mtkit's --workers)."""
    parent = os.getpid() if parent is None else parent
    pids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            if int(read_stat(stat)[1]) == parent:
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


def workers_peak_rss_mib() -> float:
    """The VmHWM of this process's child processes (mtkit's --workers) added up, in MiB: an upper bound, since the
    weights a forked worker shares with its parent count in both."""
    return sum(peak_rss_mib(pid) for pid in child_pids())


def counters() -> Counters:
    """This process's and its children's counters so far: {pid: (CPU seconds, of them in the kernel, minor page
    faults, peak RSS MiB)}. A minor page fault is the kernel mapping (and zeroing) a page on its first touch."""
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


def pss_mib(pids: list[str]) -> float:
    """The memory these processes hold together now, in MiB: the sum of their PSS, in which a page that n processes
    share counts 1/n in each (a forked worker's shared weights count once). A process that ended counts 0."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0) / 1024
        except OSError:
            continue
    return total


class PeakPss:
    """The highest `pss_mib` of this process and its children, sampled every `interval` seconds on a thread (the
    kernel keeps no high-water mark of PSS; sampling slows a translation, so benches sample an untimed pass)."""

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


# ----------------------------------------------------------------------------------------------------- a server
@contextlib.contextmanager
def serving(
    options: Sequence[str], log: Path, env: dict[str, str] | None = None, nofile: int = 0, checkout: Path = ROOT
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`mtkit serve --port 0 --device cpu OPTIONS` of this checkout (or of `checkout`, another one: a baseline), its
    stderr to `log`, yielding (process, URL) once /health answers 200, stopped by SIGTERM after. `env`: variables
    added (the caller's MTKIT_SERVE_API_KEY is not passed on); `nofile`: its open-file limit (0: as is)."""
    import httpx

    env = {**os.environ, "MTKIT_SERVE_API_KEY": "", "PYTHONPATH": str(checkout), **(env or {})}
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
    cmd = [sys.executable, "-m", "mtkit", "serve", "--port", "0", "--device", "cpu", *options]
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, preexec_fn=limit)
    try:
        deadline, url = time.monotonic() + 300, ""
        while not url:
            text = log.read_text(errors="replace")
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"mtkit serve did not become ready (exit code {proc.poll()}): {text[-2000:]}")
            if (m := re.search(r"listening on (http://\S+?:\d+)", text)) is not None:
                with contextlib.suppress(httpx.TransportError):
                    url = m[1] if httpx.get(m[1] + "/health", timeout=5).status_code == 200 else ""
            time.sleep(0.1)
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(300)


def pin(server_pid: int, cores: Sequence[int] | None = None) -> str:
    """The server (every thread) on the first core this process may use (or of `cores`: what it could use before a
    first pin), this process on the others: the clients' work then takes nothing from the server's core."""
    cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if len(cores) < 2:
        return f"not pinned: {len(cores)} core"
    os.sched_setaffinity(0, cores[1:])
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cores[:1])
    return f"server on core {cores[0]}, clients on core(s) {','.join(map(str, cores[1:]))}"


def pin_decoder(server_pid: int) -> str:
    """`mtkit serve --decoder-process`: its decoder process alone on the first core this process may use (`pin`), the
    server's HTTP side with this process (the clients) on the others."""
    cores = sorted(os.sched_getaffinity(0))
    (decoder,) = child_pids(server_pid)
    if len(cores) < 2:
        return f"not pinned: {len(cores)} core"
    pin(int(decoder), cores)
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cores[1:])
    rest = ",".join(map(str, cores[1:]))
    return f"decoder process on core {cores[0]}, the server's HTTP side and the clients on core(s) {rest}"


# ----------------------------------------------------------------------------------------------------- commands
def run_mtkit(args: Sequence[str], dry_run: bool = False) -> str:
    """`mtkit ARGS` of this checkout (PYTHONPATH leads to it), its standard output returned; a failure ends the script
    with mtkit's last words. With `dry_run` the command is printed, one line, and not run (a sweep's --dry-run)."""
    if dry_run:
        print(shlex.join(["mtkit", *args]))
        return ""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "mtkit", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"mtkit {args[0]} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


# ----------------------------------------------------------------------------------------------------- the record
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """Which of FLAGS this CPU has (Linux's names), from /proc/cpuinfo; empty where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            line = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return []
    have = set(line.partition(":")[2].split())
    return [flag for flag in FLAGS if flag in have]


def machine() -> dict[str, Any]:
    """What a figure depends on besides its settings: the CPU, its flags, cores, threads, the load now."""
    facts: dict[str, Any] = {
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["torch"] = str(torch.__version__)
        facts["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            facts["gpu"] = torch.cuda.get_device_name()
    return facts


def commit(checkout: Path = ROOT) -> dict[str, Any] | None:
    """The checkout's commit and whether it had uncommitted changes; None outside a git checkout."""
    try:
        where = str(checkout)
        sha = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "-C", where, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def portable(word: str) -> str:
    """A command-line word as a record keeps it: a path inside the repository relative to it, a path outside it
    by its name alone (a user's files say nothing to a reader and are nobody else's business)."""
    path = Path(word)
    if not path.is_absolute():
        return word
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def command(argv: Sequence[str], runner: str = "python") -> str:
    """The command that ran, as a reader would type it from the repository's root (`runner`: python for a script,
    bash for a recipe's run.sh)."""
    script = portable(str(Path(argv[0]).resolve()))
    return shlex.join([runner, script, *(portable(a) if a.startswith("/") else a for a in argv[1:])])


class Record:
    """A bench's record, begun when the bench starts (the load is read then, before the bench adds its own)."""

    def __init__(self, argv: Sequence[str] | None = None, runner: str = "python"):
        self.argv = list(sys.argv if argv is None else argv)
        self.runner = runner
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None

    def data(self, settings: dict[str, Any], passes: Any, results: Any, note: str = "") -> dict[str, Any]:
        facts = {**machine(), "load_1min": self.load}
        return {
            "format": FORMAT,
            "version": VERSION,
            "command": command(self.argv, self.runner),
            "commit": commit(),
            "date": self.started,
            "machine": facts,
            "settings": settings,
            "passes": passes,
            "results": results,
            **({"note": note} if note else {}),
        }

    def write(self, path: str | None, settings: dict[str, Any], passes: Any, results: Any, note: str = "") -> None:
        """Write the record to `path` (nothing when None), whole or not at all; say where on stderr."""
        if path:
            self.write_data(path, self.data(settings, passes, results, note))

    def write_data(self, path: str, data: dict[str, Any]) -> None:
        """Write `data` (`self.data(...)`, with what a page's renderer needs added) to `path`, whole or not at all."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
        print(f"record: {target}", file=sys.stderr)
