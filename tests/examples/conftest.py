"""Each example server started as the Lambda Web Adapter starts it: its command, in its own
folder, with ``PORT`` set; ready when a GET on the adapter's default readiness path (``/``)
answers below 500, as the adapter waits. Stopped (its whole process group) at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from devkit.example_envs import ExampleEnvUnavailableError, example_dir

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 30.0
READINESS_PATH = "/"


@dataclass(frozen=True)
class RunningExample:
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(name: str, command: Sequence[str], log_dir: Path, path_prefix: Path | None = None,
            extra_env: Mapping[str, str] | None = None) -> Iterator[RunningExample]:
    """Run ``command`` in ``examples/<name>`` with ``PORT`` set until the block ends."""
    port = free_port()
    env = {**os.environ, "PORT": str(port), **(extra_env or {})}
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env.get('PATH', '')}"
    log = log_dir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(list(command), cwd=example_dir(name), env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        _wait_ready(process, port, log)
        yield RunningExample(port=port, log=log)
    finally:
        _stop(process)


def _wait_ready(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    url = f"http://{LOOPBACK}:{port}{READINESS_PATH}"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode} before it was ready:\n{_tail(log)}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the server did not answer GET {READINESS_PATH} below 500 within {READY_TIMEOUT_S} s:\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def skipped_when_unavailable() -> Iterator[None]:
    """An example whose tool or registry is out of reach is skipped, saying which; a failed
    install with the registry reachable fails the test."""
    try:
        yield
    except ExampleEnvUnavailableError as exc:
        pytest.skip(str(exc))
