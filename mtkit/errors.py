"""The one exception type users see as a clear sentence instead of a traceback."""


class MtkitError(Exception):
    """A user-facing problem (bad input, missing file, wrong option).

    The CLI prints the message as one red line on stderr and exits non-zero; any other
    exception is a bug in mtkit and keeps its traceback.
    """
