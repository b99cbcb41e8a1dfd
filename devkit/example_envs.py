"""The shipped example servers' dependencies, installed the way each example declares them and
kept apart from the project's ``.venv``: a Python example gets its own virtualenv under
``.build/examples/<name>/venv`` from its ``requirements.txt`` (fastmcp, for one, pins an ``mcp``
of its own, which must never replace the project's); a Node.js example gets ``npm ci --omit=dev``
into its own ``node_modules``, as its Lambda package does.

The installing is ``devkit/dependency_install.py``'s, the builder the local topology's origin
packages use too: installed again only when what it is installed from changes (the requirements
file and the interpreter's version; the lock file), under a file lock.
``ExampleEnvUnavailableError`` means the tool or the registry is out of reach (a reason to skip);
``ExampleInstallError`` means the install itself failed with the registry reachable (a real
failure: a bad pin, a broken lock file).
"""

from __future__ import annotations

import sys
from pathlib import Path

from devkit import dependency_install
from devkit.dependency_install import InstallFailedError, InstallUnavailableError, digest, installed_once

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = PROJECT_ROOT / "examples"
BUILD_DIR = PROJECT_ROOT / ".build" / "examples"
INSTALL_MARKER = ".installed-from"

# The builder's errors, by the names the examples' tests use.
ExampleEnvUnavailableError = InstallUnavailableError
ExampleInstallError = InstallFailedError


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

    def install() -> None:
        if not (venv / "bin" / "python").is_file():
            dependency_install.run_install([sys.executable, "-m", "venv", "--clear", str(venv)], cwd=source,
                                           what=f"creating {venv}")
        dependency_install.pip_install(requirements, python=str(venv / "bin" / "python"), cwd=source)

    installed_once(venv / INSTALL_MARKER, digest(requirements.read_bytes(), sys.version.encode()),
                   BUILD_DIR / f"{name}.lock", install)
    return venv / "bin"


def node_modules(name: str) -> Path:
    """The example's ``node_modules``, from ``npm ci --omit=dev`` against its ``package-lock.json``."""
    source = example_dir(name)
    lock = source / "package-lock.json"
    if not lock.is_file():
        raise ValueError(f"example {name!r}: {lock} is missing; a Node.js example pins its dependencies there")
    modules = source / "node_modules"
    installed_once(modules / INSTALL_MARKER, digest(lock.read_bytes()), BUILD_DIR / f"{name}.lock",
                   lambda: dependency_install.npm_ci(source))
    return modules
