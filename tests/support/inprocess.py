"""Run `mtkit ARGS` inside the test process, as a subprocess would see it, and put back what it changed.

typer's CliRunner swaps the streams but runs the click command, not `mtkit.cli.main` with its exit-code
contract, and leaves process-wide state behind. Here the real `main()` runs with its own stdin, stdout,
stderr, argv, environment and working directory, an exception it lets through is printed as Python
would print it (exit 1), and afterwards everything a command may change in the process is restored:
torch's threads and random state, Python's and numpy's random state, signal handlers, log handlers and
levels, and warning filters (reset to Python's defaults for the call, so a warning reaches stderr as it
would in a fresh process instead of pytest's recorder).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

# Python's own filters when no -W option or PYTHONWARNINGS is given (see the `warnings` docs).
_DEFAULT_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _process_state(cwd: Path | None, env: dict[str, str] | None) -> Iterator[None]:
    """Give the call `cwd` and `env`; restore everything else a command may change when it ends."""
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_threads, saved_torch_rng = torch.get_num_threads(), torch.random.get_rng_state()
    saved_random, saved_numpy = random.getstate(), np.random.get_state()
    saved_signals = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    root, mtkit_log = logging.getLogger(), logging.getLogger("mtkit")
    saved_handlers, saved_levels = list(root.handlers), (root.level, mtkit_log.level)
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in _DEFAULT_FILTERS:
                warnings.filterwarnings(action, category=category, module=module or "")
            warnings.showwarning = _show_warning
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        torch.set_num_threads(saved_threads)
        torch.random.set_rng_state(saved_torch_rng)
        random.setstate(saved_random)
        np.random.set_state(saved_numpy)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        for handler in [h for h in root.handlers if h not in saved_handlers]:
            root.removeHandler(handler)
        root.setLevel(saved_levels[0])
        mtkit_log.setLevel(saved_levels[1])


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """Python's own warning printer, on the stderr of the moment (pytest's recorder would swallow it)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _streams(data: bytes) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """stdin holding `data`, and stdout/stderr writing into the two buffers yielded."""
    from mtkit.cli.app import err

    saved = sys.stdin, sys.stdout, sys.stderr
    out, error = io.BytesIO(), io.BytesIO()
    # The console was made at import time, under pytest's capture: a call sees no terminal, as in a pipe.
    saved_console = err._color_system, err._force_terminal
    err._color_system, err._force_terminal = None, False
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(error, encoding="utf-8", write_through=True)
    try:
        yield out, error
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(ValueError):  # a command may have closed it
                stream.flush()
        sys.stdin, sys.stdout, sys.stderr = saved
        err._color_system, err._force_terminal = saved_console


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


def in_process(
    *args: str, input: str | bytes | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m mtkit ARGS` without the new process: the same exit code, stdout and stderr."""
    from mtkit.cli.app import main

    data = input.encode("utf-8") if isinstance(input, str) else (input or b"")
    with _process_state(cwd, env), _streams(data) as (out, error):
        sys.argv = ["mtkit", *args]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except Exception:  # what a subprocess would die of: its traceback on stderr, exit 1
            sys.stderr.write(traceback.format_exc())
            code = 1
        stdout, stderr = out.getvalue(), error.getvalue()
    if isinstance(input, bytes):
        return subprocess.CompletedProcess(["mtkit", *args], code, stdout, stderr)
    return subprocess.CompletedProcess(
        ["mtkit", *args], code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")
    )
