"""The `mtkit` typer app and its entry point: one place for the root options, logging and error handling.

Heavy imports (torch, sentencepiece, sacrebleu) happen inside the commands so that
`mtkit --help` answers at once. The exit-code contract (EXIT_CODES) is kept here, in
`main`, and shown at the foot of every command's --help.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup, TyperOption

from mtkit import __version__
from mtkit.errors import MtkitError
from mtkit.interrupts import Terminated, stop_received, terminate_as_interrupt
from mtkit.textio import STDOUT

err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_CODES = (
    "Exit codes: 0 done (also when the reader of the output goes away); 1 a user error, said in one "
    "sentence; 2 a usage error (an unknown option or a bad choice); 130 interrupted (Ctrl-C); 143 stopped by "
    "SIGTERM, 129 by SIGHUP (train: after saving its checkpoint, so that a scheduler retries and the rerun "
    "resumes); no temporary file is left behind."
)


class _StdoutClosed(Exception):
    """The reader of our stdout went away (`mtkit translate ... | head -1`): a normal end, not an error."""


class _Stopped(Exception):
    """SIGTERM or SIGHUP ended the command (mtkit/interrupts.py): exit 128 + its number."""

    def __init__(self, terminated: Terminated) -> None:
        super().__init__(terminated.signal_name)
        self.signum, self.signal_name = terminated.signum, terminated.signal_name


def _flags_without_metavar(command: Any) -> None:
    """typer shows `<bool>` after a flag as if it took a value; a flag takes none, so show nothing."""
    for param in command.params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class MtkitGroup(TyperGroup):
    """The root command: gives every subcommand the exit-code epilog and flags shown as flags.

    It also turns a closed stdout into `_StdoutClosed` before typer's own handler, which would exit 1, and
    SIGTERM or SIGHUP into `_Stopped` before click's, which would exit 130 as for Ctrl-C.
    """

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if isinstance(command, TyperCommand) and not getattr(command, "_mtkit_ready", False):
            command.epilog = f"{command.epilog}\n\n{EXIT_CODES}" if command.epilog else EXIT_CODES
            _flags_without_metavar(command)
            help_option = command.get_help_option(ctx)
            if help_option is not None:
                help_option.metavar = ""
            command._mtkit_ready = True  # type: ignore[attr-defined]
        return command

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""
        return params

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _StdoutClosed() from exc
        except Terminated as exc:  # past click, which would make it an Abort (exit 130) after an empty line
            raise _Stopped(exc) from None


app = typer.Typer(
    name="mtkit",
    cls=MtkitGroup,
    help="Machine translation with the Transformer of 'Attention Is All You Need': "
    "prepare -> bpe -> train -> average -> translate -> score.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mtkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """mtkit: from a named parallel corpus to a trained Transformer and scored translations."""


class _RankFilter(logging.Filter):
    """Under torchrun, ranks other than 0 say only what is wrong: their progress is rank 0's."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def filter(self, record: logging.LogRecord) -> bool:
        if self.rank:
            record.msg = f"[rank {self.rank}] {record.msg}"
        return self.rank == 0 or record.levelno >= logging.WARNING


def setup_logging(level: int) -> None:
    """The one log handler of mtkit, on stderr, for every module's `logging.getLogger(__name__)`.

    mtkit's own loggers speak from `level` up; other libraries only warn. On a terminal the
    handler is rich's; in a pipe or a log file it is one plain line a record, never wrapped.
    """
    from rich.logging import RichHandler

    handler: logging.Handler
    if err.is_terminal:
        handler = RichHandler(console=err, show_path=False, markup=False, log_time_format="%H:%M:%S")
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(message)s", datefmt="%H:%M:%S"))
    handler.addFilter(_RankFilter(int(os.environ.get("RANK", "0"))))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_mtkit", False)]:
        root.removeHandler(old)
    handler._mtkit = True  # how a second call (or a test) finds it
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("mtkit").setLevel(level)


def log(message: str) -> None:
    """The progress callback prepare and bpe still take: through the same handler as every other log line."""
    logging.getLogger("mtkit.data").info(message)


def _usage_error(exc: Any) -> None:
    """A usage error as one line (typer draws a box around it), with a hint where a habit explains it."""
    from mtkit.cli.options import usage_hint

    message = exc.format_message().replace("Value error, ", "").rstrip(".")
    param = getattr(exc, "param", None)
    option = getattr(exc, "option_name", None) or (param.opts[0] if param is not None and param.opts else None)
    hint = usage_hint(option, sys.argv) if option else None
    where = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "mtkit"
    err.print(
        f"[bold red]{escape(where)}: usage error:[/] {escape(message)}{escape('; ' + hint) if hint else ''} "
        f"(see {escape(where)} --help)"
    )


def main() -> None:
    """Console entry point: the exit-code contract of EXIT_CODES.

    typer's standalone mode would draw usage errors in a box and exit 1 on a closed pipe;
    mtkit runs it in non-standalone mode and says each outcome itself. Standard output is
    flushed here, before Python's own flush at exit, so that a full disk or a failing device
    under `> FILE` is one sentence and exit 1, as coreutils' close_stdout makes it, not
    "Exception ignored" and exit 120.
    """
    stdout = sys.stdout
    sys.stdout = _NamedStdout(stdout) if stdout is not None else stdout  # type: ignore[assignment]
    try:
        with terminate_as_interrupt():  # SIGTERM and SIGHUP as Ctrl-C: every `finally` removes its temporaries
            code = _run()
    finally:
        sys.stdout = stdout
    if (failed := _flush_stdout()) is not None and code != 1:
        err.print(f"[bold red]mtkit: error:[/] {escape(_stdout_sentence(failed))}")
        code = 1
    sys.exit(code)


def _run() -> int:
    """Run the command; its exit code (EXIT_CODES), each failure said in one sentence."""
    try:
        code = app(prog_name="mtkit", standalone_mode=False)
    except MtkitError as exc:
        err.print(f"[bold red]mtkit: error:[/] {escape(str(exc))}")
        return 1
    except typer.TyperException as exc:  # typer's own: usage errors (exit code 2) and a few others
        if exc.exit_code == 2:
            _usage_error(exc)
        else:
            err.print(f"[bold red]mtkit: error:[/] {escape(exc.format_message())}")
        return exc.exit_code
    except (_StdoutClosed, BrokenPipeError):
        # Nobody reads our output any more: leave quietly. Python would complain when it
        # flushes stdout at exit, so point stdout at /dev/null first.
        _discard_stdout()
        return 0
    except (Terminated, _Stopped) as exc:
        return _say_stopped(exc.signal_name, exc.signum)
    except (typer.Abort, KeyboardInterrupt):
        err.print("mtkit: interrupted.")
        return 130
    except OSError as exc:  # the system said no: disk full, permission denied, a directory, a damaged file
        sentence = _stdout_sentence(exc) if exc.filename == STDOUT else os_error_sentence(exc)
        err.print(f"[bold red]mtkit: error:[/] {escape(sentence)}")
        return 1
    except Exception:
        # A stop whose exception C code replaced with an error of its own (importing a Cython module turns it into
        # an ImportError): the user asked to stop, so it ends as a stop, not as a traceback.
        if signum := stop_received():
            return _say_stopped(Terminated(signum).signal_name, signum)
        raise
    return code if isinstance(code, int) else 0


def _say_stopped(signal_name: str, signum: int) -> int:
    """A command that SIGTERM or SIGHUP stopped: its one sentence, and its exit code 128 + the signal's number."""
    err.print(f"mtkit: stopped by {signal_name}.")
    return 128 + signum


class _NamedStdout:
    """sys.stdout whose write errors name it (the system names no file for a write to an open one)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, STDOUT) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, STDOUT) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _discard_stdout() -> None:
    """Point descriptor 1 at /dev/null, so that what is still buffered goes nowhere without an error."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _flush_stdout() -> OSError | None:
    """Flush standard output now; the error if it cannot be written (then it is discarded), else None."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()  # the reader went away: not an error (EXIT_CODES)
    except OSError as exc:
        _discard_stdout()
        return exc
    return None


def _stdout_sentence(exc: OSError) -> str:
    return f"cannot write to standard output: {exc.strerror or exc}."


def os_error_sentence(exc: OSError) -> str:
    """One sentence for an OSError that no command turned into its own: the file and the system's reason.

    Where the system named no file (a write to an already open file: ENOSPC, EDQUOT, EIO) the
    sentence says so instead of guessing; commands name their files where they can (textio.py).
    """
    reason = exc.strerror or str(exc) or type(exc).__name__
    files = [os.fsdecode(f) for f in (exc.filename, exc.filename2) if f is not None]
    if not files:
        return f"{reason} (the system did not say which file)."
    return f"cannot use {files[-1]}: {reason}."  # of a rename or a link, the target
