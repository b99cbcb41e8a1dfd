"""What a review tool says when it cannot do its job: a short message, never a traceback.

Every ``python -m review.<tool>`` runs its work through ``run_reporting_errors``: a bad
stack file (missing, not YAML, invalid config) is the stack file's path or the list of
config problems, each naming its key; anything else that fails is one line naming what
failed (a few lines at most). The exit status is ``EXIT_ERROR`` (2), apart from a tool's
own "ran, and found something" status (1). ``--debug`` lets the exception through, with
its traceback, for whoever debugs the tool itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from stack_config.checks import ConfigError
from stack_config.loading import StackFileError

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
# An unexpected failure's message: its first lines, each cut to this many characters.
MAX_MESSAGE_LINES = 3
MAX_LINE_CHARS = 300


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true",
                        help="on failure, show the Python traceback instead of a short message")


def _stack_problem(exc: BaseException) -> ConfigError | StackFileError | None:
    """The bad-stack-file error an exception is, or was raised from (the mock runtime may wrap it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (ConfigError, StackFileError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _first_lines(exc: BaseException) -> str:
    lines = [line[:MAX_LINE_CHARS] for line in str(exc).strip().splitlines() if line.strip()]
    what = "\n  ".join(lines[:MAX_MESSAGE_LINES]) or "(no message)"
    return what + (f"\n  ... ({len(lines) - MAX_MESSAGE_LINES} more lines)" if len(lines) > MAX_MESSAGE_LINES else "")


def short_message(prog: str, exc: BaseException, expected: tuple[type[Exception], ...] = ()) -> str:
    """What the operator reads instead of a traceback. ``expected``: the tool's own errors,
    whose message says it all."""
    stack_problem = _stack_problem(exc)
    if stack_problem is not None:
        return f"{prog}: {stack_problem}"
    if isinstance(exc, expected):
        return f"{prog}: {_first_lines(exc)}"
    return f"{prog}: failed: {type(exc).__name__}: {_first_lines(exc)}\n(run again with --debug for the traceback)"


def run_reporting_errors(prog: str, work: Callable[[], int], *, debug: bool,
                         out: Callable[[str], None] | None = None,
                         expected: tuple[type[Exception], ...] = ()) -> int:
    """``work()``'s exit status, or ``EXIT_ERROR`` with a short message on ``out`` (stderr by
    default) when it raises; with ``debug`` the exception propagates."""
    say = out or (lambda text: print(text, file=sys.stderr))
    try:
        return work()
    except KeyboardInterrupt:
        if debug:
            raise
        say(f"{prog}: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        say(short_message(prog, exc, expected))
        return EXIT_ERROR
