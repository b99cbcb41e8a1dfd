"""Exec a child of the local topology so that it dies with its supervisor.

``python -m local.launch ARGV...`` asks Linux to SIGTERM this process when the
thread that started it exits (``PR_SET_PDEATHSIG``, kept across ``exec``), then
replaces itself with ``python ARGV...`` (or, given ``--exec PROGRAM ARGS...``, with that
program: an origin's ``run.sh`` under ``env -i``). Elsewhere it only execs: the
supervisor's own stop path (process groups) is then the only guarantee.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
# The first argument that makes the launcher exec a program instead of this Python.
EXEC_OPTION = "--exec"


def set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m local.launch MODULE-OR-SCRIPT-ARGS...")
    parent = os.getppid()
    set_parent_death_signal()
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        raise SystemExit(1)
    if argv[0] == EXEC_OPTION:
        if len(argv) < 2:
            raise SystemExit(f"usage: python -m local.launch {EXEC_OPTION} PROGRAM ARGS...")
        os.execv(argv[1], argv[1:])
    os.execv(sys.executable, [sys.executable, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
