"""Signals held back over the lines that make a file: delivered afterwards, to the handler that was there; and a stop
whose exception was lost on the way raised again."""

import importlib
import os
import signal
import time

import pytest

from mtkit.interrupts import Terminated, raise_if_terminated, signals_held, terminate_as_interrupt
from mtkit.train.signals import StopRequests
from tests.support.signals import another_thread


def test_a_held_signal_reaches_the_commands_own_handler_once_the_block_ends():
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))  # as train's stop request
    try:
        with another_thread(), signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert seen == []
        assert seen == [signal.SIGTERM]  # the first one noted, delivered once
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def _swallowed(signum: int) -> None:
    """The signal delivered, and the exception its handler raised dropped, as C code that clears errors does."""
    try:
        os.kill(os.getpid(), signum)
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass


def test_a_stop_whose_exception_was_swallowed_is_raised_again_where_train_takes_the_signals_over():
    before = signal.getsignal(signal.SIGHUP)  # SIG_DFL, or SIG_IGN under nohup
    with terminate_as_interrupt():
        _swallowed(signal.SIGHUP)
        with pytest.raises(Terminated) as raised, StopRequests():
            pass
    assert raised.value.signum == signal.SIGHUP
    assert signal.getsignal(signal.SIGHUP) is before  # train's handlers were never put in


def test_a_new_command_does_not_inherit_the_last_ones_stop():
    with terminate_as_interrupt():
        _swallowed(signal.SIGTERM)
    raise_if_terminated()  # nothing: outside the command's block (the Python API's train) it is not raised
    with StopRequests():
        pass
    with terminate_as_interrupt():
        raise_if_terminated()  # nothing: this command was not signalled
        with StopRequests() as requests:
            assert requests.received == ""


def test_a_stop_that_c_code_turned_into_another_error_ends_as_the_stop(monkeypatch, capsys):
    """Importing a Cython module under a SIGHUP can raise an ImportError in place of the handler's exception: the
    command ends as stopped by SIGHUP (exit 129, one sentence), not with a traceback; without a signal the error
    is the command's own and goes on up."""
    cli = importlib.import_module("mtkit.cli.app")  # the module: mtkit.cli's `app` is the typer app

    def signalled_then_import_error(**kwargs):
        _swallowed(signal.SIGHUP)
        raise ImportError("initialization failed")

    monkeypatch.setattr(cli, "app", signalled_then_import_error)
    with terminate_as_interrupt():
        assert cli._run() == 128 + signal.SIGHUP
    assert "mtkit: stopped by SIGHUP." in capsys.readouterr().err

    def import_error(**kwargs):
        raise ImportError("a real one")

    monkeypatch.setattr(cli, "app", import_error)
    with terminate_as_interrupt(), pytest.raises(ImportError, match="a real one"):
        cli._run()
