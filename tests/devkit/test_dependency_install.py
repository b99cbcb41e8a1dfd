"""devkit.dependency_install: the one builder of the examples' environments and the local
origin packages. A clear line between 'cannot reach the tool or registry' (skip) and 'the
install failed' (fail), and an install run once per change of what it is installed from."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from devkit import dependency_install
from devkit.dependency_install import InstallFailedError, InstallUnavailableError, installed_once, npm_ci, run_install


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"https://127.0.0.1:{port}/simple"


def test_a_failed_install_with_the_registry_out_of_reach_is_unavailable() -> None:
    failing = [sys.executable, "-c", "import sys; print('no route'); sys.exit(3)"]
    with pytest.raises(InstallUnavailableError, match=r"cannot be reached(.|\n)*no route"):
        run_install(failing, cwd=Path.cwd(), what="install", registry=closed_port_url())


def test_a_failed_install_with_the_registry_reachable_is_an_error() -> None:
    failing = [sys.executable, "-c", "import sys; print('bad pin'); sys.exit(3)"]
    with pytest.raises(InstallFailedError, match=r"install failed \(exit 3\)(.|\n)*bad pin"):
        run_install(failing, cwd=Path.cwd(), what="install", registry="file:///opt/wheels")


def test_a_missing_tool_is_unavailable_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InstallUnavailableError, match="no-such-installer is not installed"):
        run_install(["no-such-installer", "x"], cwd=tmp_path, what="install")


def test_npm_ci_needs_the_lock_file_and_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "package.json").write_text("{}")
    with pytest.raises(InstallFailedError, match="without package-lock.json"):
        npm_ci(tmp_path)
    (tmp_path / "package-lock.json").write_text("{}")
    monkeypatch.setattr(dependency_install.shutil, "which", lambda name: None)
    with pytest.raises(InstallUnavailableError, match="needs Node.js and npm"):
        npm_ci(tmp_path)


def test_an_install_runs_again_only_when_its_stamp_changes_and_not_after_a_failure(tmp_path: Path) -> None:
    marker, lock = tmp_path / "out" / ".installed-from", tmp_path / "lock"
    runs: list[str] = []
    assert installed_once(marker, "a", lock, lambda: runs.append("a"))
    assert not installed_once(marker, "a", lock, lambda: runs.append("again"))
    assert installed_once(marker, "b", lock, lambda: runs.append("b"))

    def failing() -> None:
        raise InstallFailedError("bad pin")

    with pytest.raises(InstallFailedError):
        installed_once(marker, "c", lock, failing)
    assert marker.read_text() == "b"  # a failed install leaves no stamp: the next call tries again
    assert runs == ["a", "b"]
