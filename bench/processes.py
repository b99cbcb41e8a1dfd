"""Child processes the benchmarks start."""

from __future__ import annotations

import socket
import subprocess
import time


def terminate(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; reaped either way."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """Until ``process`` accepts connections on loopback ``port``; raises if it exits first
    or does not listen within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{process.args!r} did not listen on {port} within {timeout_s:g} s")
