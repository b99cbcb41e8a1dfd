"""devkit.example_envs: an example's own environment, installed once per change of what it is
installed from (by devkit.dependency_install, whose tests cover how installs fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devkit import dependency_install, example_envs
from devkit.example_envs import ExampleEnvUnavailableError


@pytest.fixture
def examples_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(example_envs, "EXAMPLES_DIR", tmp_path / "examples")
    monkeypatch.setattr(example_envs, "BUILD_DIR", tmp_path / ".build" / "examples")
    (tmp_path / "examples" / "server-a").mkdir(parents=True)
    return tmp_path / "examples"


def test_an_unknown_example_is_refused_naming_the_known_ones(examples_root: Path) -> None:
    with pytest.raises(ValueError, match=r"example 'nope'.*\['server-a'\]"):
        example_envs.python_env("nope")


def test_a_python_example_without_requirements_is_refused(examples_root: Path) -> None:
    with pytest.raises(ValueError, match=r"example 'server-a': .*requirements.txt is missing"):
        example_envs.python_env("server-a")


def test_a_node_example_without_a_lock_file_is_refused(examples_root: Path) -> None:
    with pytest.raises(ValueError, match=r"example 'server-a': .*package-lock.json is missing"):
        example_envs.node_modules("server-a")


def test_without_npm_a_node_example_is_unavailable(examples_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (examples_root / "server-a" / "package-lock.json").write_text("{}")
    monkeypatch.setattr(dependency_install.shutil, "which", lambda name: None)
    with pytest.raises(ExampleEnvUnavailableError, match="needs Node.js and npm"):
        example_envs.node_modules("server-a")


def test_the_virtualenv_is_installed_again_only_when_its_requirements_change(
        examples_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requirements = examples_root / "server-a" / "requirements.txt"
    requirements.write_text("# nothing to install\n")
    bin_dir = example_envs.python_env("server-a")
    assert (bin_dir / "python").is_file()

    runs: list[list[str]] = []

    def recorded(argv: list[str], **kwargs: Any) -> None:
        runs.append(argv)

    monkeypatch.setattr(dependency_install, "run_install", recorded)
    assert example_envs.python_env("server-a") == bin_dir
    assert runs == []
    requirements.write_text("# still nothing, but changed\n")
    example_envs.python_env("server-a")
    assert [argv[1:4] for argv in runs] == [["-m", "pip", "install"]]
