"""Installing a server's dependencies the way its package gets them, once per content: the one
builder behind the examples' own environments (``devkit/example_envs.py``) and the local
topology's origin packages (``local/origins.py``).

- ``pip_install``: ``pip install -r requirements.txt``, into an interpreter's environment, or
  (``target``) into a package folder as wheels for a runtime's Python version;
- ``npm_ci``: ``npm ci --omit=dev`` in a folder with its ``package-lock.json``;
- ``run_install``: any install command, failing with ``InstallUnavailableError`` when the tool
  or its registry is out of reach (a reason to skip a test) and ``InstallFailedError`` when the
  install itself failed with the registry reachable (a real failure: a bad pin, a broken lock);
- ``installed_once``: run an install under a file lock unless a marker file says it already ran
  from the same inputs, so two processes asking at once install once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

INSTALL_TIMEOUT_S = 900
REGISTRY_PROBE_TIMEOUT_S = 5.0


class InstallUnavailableError(RuntimeError):
    """The install's tool (python, node, npm) or its package registry cannot be reached."""


class InstallFailedError(RuntimeError):
    """The install ran with the registry reachable and failed."""


def run_install(argv: list[str], *, cwd: Path, what: str, registry: str | None = None) -> None:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        raise InstallUnavailableError(f"{what}: {argv[0]} is not installed on this machine ({exc})") from None
    except subprocess.TimeoutExpired:
        raise InstallFailedError(f"{what}: no result after {INSTALL_TIMEOUT_S} s") from None
    if done.returncode == 0:
        return
    output = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                       if not line.startswith("WARNING: Location"))[-3000:]
    if registry is not None and not reachable(registry):
        raise InstallUnavailableError(f"{what}: the registry {registry} cannot be reached from here:\n{output}")
    raise InstallFailedError(f"{what} failed (exit {done.returncode}):\n{output}")


def pip_install(requirements: Path, *, python: str, cwd: Path, target: Path | None = None,
                python_version: str | None = None) -> None:
    """``requirements`` into ``python``'s environment, or with ``target`` into that folder as
    binary wheels for CPython ``python_version`` (a Lambda package's way: no bytecode)."""
    argv = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if target is not None:
        if python_version is None:
            raise ValueError("pip_install into a target folder needs the runtime's python_version")
        argv += ["--no-compile", "--implementation", "cp", "--python-version", python_version,
                 "--only-binary=:all:", "--target", str(target)]
    argv += ["--requirement", str(requirements)]
    where = f" into {target}" if target is not None else ""
    run_install(argv, cwd=cwd, what=f"pip install -r {requirements}{where}", registry=pip_index())


def npm_ci(folder: Path) -> None:
    """``npm ci --omit=dev`` in ``folder``, from its ``package-lock.json``."""
    if not (folder / "package-lock.json").is_file():
        raise InstallFailedError(f"{folder}: package.json without package-lock.json (npm ci installs from the lock)")
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise InstallUnavailableError(f"{folder} needs Node.js and npm on PATH (node: {node}, npm: {npm})")
    run_install([npm, "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                what=f"npm ci --omit=dev in {folder}", registry=npm_registry(npm, folder))


def installed_once(marker: Path, stamp: str, lock: Path, install: Callable[[], None]) -> bool:
    """Run ``install`` unless ``marker`` holds ``stamp``, then write it; under ``lock``.
    Returns whether it ran."""
    with locked(lock):
        if read_text(marker) == stamp:
            return False
        install()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(stamp)
        return True


def pip_index() -> str:
    return os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")


def npm_registry(npm: str, cwd: Path) -> str:
    done = subprocess.run([npm, "config", "get", "registry"], cwd=cwd, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "https://registry.npmjs.org/"


def reachable(url: str) -> bool:
    """Whether a TCP connection to the registry's host opens (a file: index is always reachable)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return True
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=REGISTRY_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created with its folder), released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
