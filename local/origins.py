"""How the local topology starts a region's origin: the server's package, built as the
program builds it but for this machine, started through its ``run.sh`` with the
function's environment.

- ``server_spec(config)``: the stack's ``server`` (folder form), or the demo by default;
- ``build_local_package(server)``: the package folder (the extracted zip): the server's
  folder as it is, its dependencies installed beside it for *this* machine's platform
  (pip wheels for the host, of the runtime's Python version; ``npm ci --omit=dev`` for
  Node.js, whose packages are the same everywhere), and the generated ``run.sh``. Built
  once per content (cached under ``.build/local-origins``, under a file lock); the installing
  is ``devkit/dependency_install.py``'s, the builder the examples' test environments use too;
- ``start_command(server, package_dir, port, environment)``: the argv and environment
  that start it as the Web Adapter does (``PORT``/``AWS_LWA_PORT`` set, the adapter's
  settings as plain variables, ``LAMBDA_TASK_ROOT`` the package), and nothing of this
  project's environment (no virtualenv, no PYTHONPATH): what the package lacks, fails.

Interpreters: a Python runtime runs on this machine's interpreter of the same version
(``python3.13`` on PATH, or this process's own base interpreter when it is that version;
otherwise a clear refusal naming what is missing); ``python``/``python3`` on the origin's
PATH name it. A Node.js runtime runs on this machine's ``node`` whatever its version
(Lambda's nodejs22.x/nodejs24.x run Node 22/24; the development machine has Node 20):
a server that needs a newer Node fails here first, naming the version.

The program's own package builder (components/) builds the same spec for Lambda;
``PACKAGE_BUILDER`` is the one place that chooses how a local package is built.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.lambda_package import PackageBuildError, folder_files
from components.origin import run_sh as shipped_run_sh
from components.shell_command import CommandError
from components.shell_command import parse as parse_command
from devkit.dependency_install import (
    InstallFailedError,
    InstallUnavailableError,
    locked,
    npm_ci,
    pip_install,
    run_install,
)
from stack_config.keys import DEMO_SERVER_COMMAND, DEMO_SERVER_SOURCE

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = PROJECT_ROOT / ".build" / "local-origins"
# Bump when the way local packages are built changes, so cached ones are rebuilt.
LOCAL_BUILDER_VERSION = "2"
PYTHON_RUNTIMES = {"python3.13": "3.13", "python3.12": "3.12"}
NODE_RUNTIMES = ("nodejs22.x", "nodejs24.x")
RUNTIMES = (*PYTHON_RUNTIMES, *NODE_RUNTIMES, "java21", "provided.al2023")

# The demo server's start command: what the stack's default ``server`` runs.
DEMO_COMMAND = DEMO_SERVER_COMMAND


class OriginBuildError(RuntimeError):
    """The server's package cannot be built or started on this machine; says what is missing
    (its cause is the builder's ``InstallUnavailableError`` when a tool or registry is out of reach)."""


@dataclass(frozen=True)
class ServerSpec:
    """The folder form of the stack's ``mcp-edge:server``."""

    source: Path
    runtime: str
    command: str
    path: str = "/mcp"
    install: str | None = None
    readiness_path: str | None = None
    tool_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise OriginBuildError(f"server.runtime = {self.runtime!r}: one of {', '.join(RUNTIMES)}")
        if not self.command.strip():
            raise OriginBuildError("server.command is empty: it names how the Web Adapter starts the server")
        try:
            parse_command(self.command)
        except CommandError as exc:  # what the stack checks say of it, should a caller skip them
            raise OriginBuildError(f"server.command = {self.command!r}: {exc}") from None


DEFAULT_SERVER = ServerSpec(source=PROJECT_ROOT / DEMO_SERVER_SOURCE, runtime="python3.13", command=DEMO_COMMAND)


def _field(value: Any, *names: str) -> Any:
    for name in names:
        found = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
        if found is not None:
            return found
    return None


def server_spec(config: Any) -> ServerSpec:
    """The stack's ``server`` (a mapping with the stack file's keys, or a parsed object
    with the same fields in snake case), or the demo when the stack names none."""
    value = _field(config, "server")
    if value is None:
        return DEFAULT_SERVER
    if _field(value, "image", "imageDigest", "image_digest") is not None:
        raise OriginBuildError("server.image/imageDigest: the local topology runs folder servers only (no Docker "
                               "here); give the stack a server with source, runtime and command to run it locally")
    source = Path(str(_field(value, "source") or ""))
    scopes = _field(value, "toolScopes", "tool_scopes") or {}
    return ServerSpec(
        source=source if source.is_absolute() else PROJECT_ROOT / source,
        runtime=str(_field(value, "runtime") or ""),
        command=str(_field(value, "command") or ""),
        path=str(_field(value, "path") or "/mcp"),
        install=_field(value, "install"),
        readiness_path=_field(value, "readinessPath", "readiness_path"),
        tool_scopes={str(k): tuple(v) for k, v in dict(scopes).items()},
    )


# --- run.sh ----------------------------------------------------------------------------------


def run_sh(command: str, runtime: str = "python3.13") -> bytes:
    """The entry point the Web Adapter starts (handler ``run.sh``): the very script the
    program ships (``components.origin.run_sh``), so the local origin starts as Lambda's does."""
    return shipped_run_sh(command, runtime)


# --- building --------------------------------------------------------------------------------


def _source_files(folder: Path) -> list[tuple[str, Path]]:
    """The folder's files as the program packages them (``components.lambda_package.folder_files``:
    the same skipped names, links inside the folder as what they point to, links out refused)."""
    try:
        return folder_files(folder)
    except PackageBuildError as exc:
        raise OriginBuildError(f"server.source {exc}") from exc


def _digest(server: ServerSpec, interpreter: str) -> str:
    h = hashlib.sha256(f"{LOCAL_BUILDER_VERSION}|{server.runtime}|{server.install}|{interpreter}|".encode())
    h.update(run_sh(server.command, server.runtime))
    for arcname, path in _source_files(server.source):
        h.update(arcname.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def python_interpreter(version: str) -> str:
    """This machine's CPython ``version`` (a real interpreter, not a virtualenv's)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return str(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    found = shutil.which(f"python{version}")
    if found is None:
        raise OriginBuildError(f"the server's runtime is python{version}: no python{version} on this machine's PATH "
                               f"(this process runs {sys.version_info[0]}.{sys.version_info[1]})")
    return str(Path(found).resolve())


def node_interpreter() -> str:
    found = shutil.which("node")
    if found is None:
        raise OriginBuildError("the server's runtime is Node.js: no node on this machine's PATH")
    return found


def interpreter_for(server: ServerSpec) -> str:
    if server.runtime in PYTHON_RUNTIMES:
        return python_interpreter(PYTHON_RUNTIMES[server.runtime])
    if server.runtime in NODE_RUNTIMES:
        return node_interpreter()
    raise OriginBuildError(f"server.runtime {server.runtime}: the local topology runs Python and Node.js servers "
                           f"({', '.join((*PYTHON_RUNTIMES, *NODE_RUNTIMES))}); {server.runtime} needs its image")


def _install(server: ServerSpec, root: Path) -> None:
    """The server's dependencies into ``root``, as the program installs them, for this machine."""
    try:
        if server.install:
            run_install(["/bin/sh", "-c", server.install], cwd=root, what=f"server.install ({server.install})")
        elif server.runtime in PYTHON_RUNTIMES:
            if (root / "requirements.txt").is_file():
                # This process's pip, for the runtime's Python version on this machine's platform.
                pip_install(root / "requirements.txt", python=sys.executable, cwd=root, target=root,
                            python_version=PYTHON_RUNTIMES[server.runtime])
        elif (root / "package.json").is_file():
            npm_ci(root)
    except (InstallUnavailableError, InstallFailedError) as exc:
        raise OriginBuildError(f"{server.source}: {exc}") from exc


def build_package_dir(server: ServerSpec, build_dir: Path = BUILD_DIR) -> Path:
    """The server's package for this machine, as a folder (built once per content)."""
    if not server.source.is_dir():
        raise OriginBuildError(f"server.source {server.source}: no such folder")
    interpreter = interpreter_for(server)
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", server.source.name)
    dest = build_dir / f"{name}-{_digest(server, interpreter)}"
    with locked(build_dir / f"{dest.name}.lock"):
        if (dest / "run.sh").is_file():
            return dest
        staging = build_dir / f".{dest.name}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            for arcname, path in _source_files(server.source):
                (staging / arcname).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, staging / arcname)
            _install(server, staging)
            (staging / "run.sh").write_bytes(run_sh(server.command, server.runtime))  # last: its presence marks a whole build
            (staging / "run.sh").chmod(0o755)
            staging.rename(dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return dest


# The function that builds a local package: the integration point for the program's
# package builder (the same spec, with this machine's platform).
PACKAGE_BUILDER: Callable[[ServerSpec], Path] = build_package_dir


# --- starting --------------------------------------------------------------------------------


def _bin_dir(server: ServerSpec, interpreter: str, build_dir: Path) -> Path:
    """A folder holding ``python``/``python3`` (or ``node``) for the origin's PATH."""
    names = ("python", "python3", Path(interpreter).name) if server.runtime in PYTHON_RUNTIMES else ("node",)
    folder = build_dir / "bin" / hashlib.sha256(interpreter.encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        link = folder / name
        if not link.is_symlink() or os.readlink(link) != interpreter:
            tmp = folder / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(interpreter)
            tmp.replace(link)
    return folder


def start_command(server: ServerSpec, package_dir: Path, port: int, environment: Mapping[str, str],
                  build_dir: Path = BUILD_DIR) -> tuple[tuple[str, ...], dict[str, str]]:
    """The program and environment that start the origin as the Web Adapter does: its
    ``run.sh`` with the function's ``environment`` (the adapter's settings included, as
    plain variables), ``AWS_LWA_PORT``/``PORT`` the local port and the package as the
    task root. The environment is complete: nothing of the caller's is inherited."""
    interpreter = interpreter_for(server)
    path = os.pathsep.join((str(_bin_dir(server, interpreter, build_dir)), "/usr/local/bin", "/usr/bin", "/bin"))
    env = {
        **environment,
        "LAMBDA_TASK_ROOT": str(package_dir),
        "AWS_LWA_PORT": str(port),
        "PORT": str(port),
        "PATH": path,
        "HOME": str(package_dir),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    return (str(package_dir / "run.sh"),), env


def port_hint(command: str) -> str:
    """How to start the server of ``command`` on $PORT, for the message that says it listens elsewhere."""
    words = command.split()
    if any(w.endswith(("uvicorn", "hypercorn", "gunicorn")) for w in words) and "--port" not in words:
        return f"e.g. server.command: {command} --port $PORT"
    return ("e.g. server.command: FASTMCP_PORT=$PORT " + command + " for the MCP Python SDK's FastMCP, or read PORT "
            "in the server: mcp.run(transport=\"http\", port=int(os.environ[\"PORT\"])) with FastMCP, "
            "uvicorn.run(app, port=int(os.environ[\"PORT\"])), app.listen(process.env.PORT) in Node.js")


def env_argv(argv: tuple[str, ...], env: Mapping[str, str]) -> tuple[str, ...]:
    """``argv`` under ``env -i``: run with exactly ``env``, whatever the parent's environment."""
    return ("/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), *argv)

