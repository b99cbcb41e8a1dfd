"""The shipped example servers' dependencies, installed the way each example declares them and
kept apart from the project's ``.venv``: a Python example gets its own virtualenv under
``.build/examples/<name>/venv`` from its ``requirements.txt`` (fastmcp, for one, pins an ``mcp``
of its own, which must never replace the project's); a Node.js example gets ``npm ci --omit=dev``
into its own ``node_modules``, as its Lambda package does.

Each is installed again only when what it is installed from changes (the requirements file
and the interpreter's version; the lock file), and under a file lock, so two processes asking
at once install once. ``ExampleEnvUnavailableError`` means the tool or the registry is out of reach
(a reason to skip); ``ExampleInstallError`` means the install itself failed with the registry
reachable (a real failure: a bad pin, a broken lock file).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = PROJECT_ROOT / "examples"
BUILD_DIR = PROJECT_ROOT / ".build" / "examples"
INSTALL_MARKER = ".installed-from"
INSTALL_TIMEOUT_S = 900
REGISTRY_PROBE_TIMEOUT_S = 5.0


class ExampleEnvUnavailableError(RuntimeError):
    """The example's tool (python venv, node, npm) or its package registry cannot be reached."""


class ExampleInstallError(RuntimeError):
    """The install ran with the registry reachable and failed."""


def example_dir(name: str) -> Path:
    folder = EXAMPLES_DIR / name
    if not folder.is_dir():
        known = sorted(p.name for p in EXAMPLES_DIR.iterdir() if p.is_dir())
        raise ValueError(f"example {name!r}: no folder {folder}; the examples are {known}")
    return folder


def python_env(name: str) -> Path:
    """The ``bin`` folder of the example's own virtualenv, with its ``requirements.txt`` installed."""
    source = example_dir(name)
    requirements = source / "requirements.txt"
    if not requirements.is_file():
        raise ValueError(f"example {name!r}: {requirements} is missing; a Python example pins its dependencies there")
    venv = BUILD_DIR / name / "venv"
    stamp = _digest(requirements.read_bytes(), sys.version.encode())
    with _locked(BUILD_DIR / f"{name}.lock"):
        if _read(venv / INSTALL_MARKER) == stamp:
            return venv / "bin"
        if not (venv / "bin" / "python").is_file():
            _run([sys.executable, "-m", "venv", "--clear", str(venv)], cwd=source, what=f"creating {venv}")
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "-r", str(requirements)],
             cwd=source, what=f"pip install -r {requirements}", registry=_pip_index())
        (venv / INSTALL_MARKER).write_text(stamp)
    return venv / "bin"


def node_modules(name: str) -> Path:
    """The example's ``node_modules``, from ``npm ci --omit=dev`` against its ``package-lock.json``."""
    source = example_dir(name)
    lock = source / "package-lock.json"
    if not lock.is_file():
        raise ValueError(f"example {name!r}: {lock} is missing; a Node.js example pins its dependencies there")
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise ExampleEnvUnavailableError(f"example {name!r} needs Node.js and npm on PATH (node: {shutil.which('node')}, npm: {npm})")
    modules = source / "node_modules"
    stamp = _digest(lock.read_bytes())
    with _locked(BUILD_DIR / f"{name}.lock"):
        if _read(modules / INSTALL_MARKER) == stamp:
            return modules
        _run([npm, "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"],
             cwd=source, what=f"npm ci --omit=dev in {source}", registry=_npm_registry(npm, source))
        (modules / INSTALL_MARKER).write_text(stamp)
    return modules


def _run(argv: list[str], *, cwd: Path, what: str, registry: str | None = None) -> None:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        raise ExampleEnvUnavailableError(f"{what}: {exc}") from None
    except subprocess.TimeoutExpired:
        raise ExampleInstallError(f"{what}: no result after {INSTALL_TIMEOUT_S} s") from None
    if done.returncode == 0:
        return
    output = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                       if not line.startswith("WARNING: Location"))[-3000:]
    if registry is not None and not _reachable(registry):
        raise ExampleEnvUnavailableError(f"{what}: the registry {registry} cannot be reached from here:\n{output}")
    raise ExampleInstallError(f"{what} failed (exit {done.returncode}):\n{output}")


def _pip_index() -> str:
    return os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")


def _npm_registry(npm: str, cwd: Path) -> str:
    done = subprocess.run([npm, "config", "get", "registry"], cwd=cwd, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "https://registry.npmjs.org/"


def _reachable(url: str) -> bool:
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


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
