"""A server's folder outside the project (issue 39): a user's server lives in its own
repository, named relative to the stack file's folder or absolutely."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config.checks import PROJECT_ROOT, ConfigError
from stack_config.loading import load_from_stack_file, read_stack_file, stack_file_path

PROD = read_stack_file(stack_file_path("prod"))


def write_server(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "requirements.txt").write_text("")
    (folder / "server.py").write_text("print('hello')\n")
    return folder


def write_stack(folder: Path, server: dict[str, Any], name: str = "mine") -> Path:
    """A stack file in ``folder``: prod's keys with this server."""
    path = folder / f"Pulumi.{name}.yaml"
    config = {f"mcp-edge:{k}": v for k, v in PROD.items() if v is not None}
    config["mcp-edge:server"] = server
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def test_a_relative_source_is_named_from_the_stack_files_folder_outside_the_project(tmp_path: Path):
    server = write_server(tmp_path / "repo" / "server")
    stack = write_stack(tmp_path / "repo", {"source": "server", "runtime": "python3.13", "command": "python3 server.py"})
    config = load_from_stack_file(stack)
    # The program runs in the project root: it gets the folder as an absolute path.
    assert config.server.source == str(server.resolve())


def test_a_source_up_and_out_of_the_stack_files_folder_is_accepted(tmp_path: Path):
    server = write_server(tmp_path / "servers" / "weather")
    (tmp_path / "stacks").mkdir()
    stack = write_stack(tmp_path / "stacks", {"source": "../servers/weather", "runtime": "python3.13",
                                              "command": "FASTMCP_PORT=$PORT python3 server.py"})
    assert load_from_stack_file(stack).server.source == str(server.resolve())


def test_an_absolute_source_is_accepted_from_any_stack_file(tmp_path: Path):
    server = write_server(tmp_path / "abs-server")
    stack = write_stack(tmp_path, {"source": str(server), "runtime": "python3.13", "command": "python3 server.py"})
    assert load_from_stack_file(stack).server.source == str(server.resolve())


def test_a_source_in_the_project_from_a_project_stack_file_stays_as_written():
    # What the committed plans and the program's inputs hold: no absolute path of this checkout.
    assert load_from_stack_file("prod").server.source == PROD["server"]["source"]
    assert not Path(PROD["server"]["source"]).is_absolute()


@pytest.mark.parametrize("source", ["missing", "../missing-too", "/no/such/folder"])
def test_a_source_that_does_not_exist_is_refused_naming_the_key_the_folder_and_the_rule(tmp_path: Path, source: str):
    stack = write_stack(tmp_path, {"source": source, "runtime": "python3.13", "command": "python3 server.py"})
    with pytest.raises(ConfigError) as refused:
        load_from_stack_file(stack)
    message = str(refused.value)
    folder = Path(source) if source.startswith("/") else tmp_path / source
    assert f"mcp-edge:server.source = {source!r}: {folder} does not exist" in message
    assert "; name an existing folder, relative to the stack file's folder or absolute" in message
    if not source.startswith("/"):
        assert f"(named from the stack file's folder, {tmp_path}; nor is it a folder of the project" in message


def test_a_source_that_is_a_file_is_refused_as_a_file(tmp_path: Path):
    (tmp_path / "server.py").write_text("")
    stack = write_stack(tmp_path, {"source": "server.py", "runtime": "python3.13", "command": "python3 server.py"})
    with pytest.raises(ConfigError, match="server.py is a file, not a folder"):
        load_from_stack_file(stack)


def test_a_stack_file_inside_the_project_may_name_a_folder_from_the_project_root():
    # tests/e2e/stacks/Pulumi.fastmcp.yaml names examples/fastmcp, as every stack file of the project did.
    config = load_from_stack_file(PROJECT_ROOT / "tests" / "e2e" / "stacks" / "Pulumi.fastmcp.yaml")
    assert config.server.source == "examples/fastmcp"


def test_a_stack_file_outside_the_project_names_a_project_folder_only_when_none_is_beside_it(tmp_path: Path):
    # A copy of one of the project's stack files elsewhere still finds examples/fastmcp ...
    server = {"source": "examples/fastmcp", "runtime": "python3.13", "command": "python3 server.py"}
    assert load_from_stack_file(write_stack(tmp_path, server)).server.source == "examples/fastmcp"
    # ... but a folder of that name beside the stack file comes first.
    beside = tmp_path / "examples" / "fastmcp"
    beside.mkdir(parents=True)
    (beside / "server.py").write_text("print('mine')\n")
    (beside / "requirements.txt").write_text("")
    assert load_from_stack_file(write_stack(tmp_path, server)).server.source == str(beside.resolve())


def test_the_folder_outside_is_checked_as_a_package_like_one_inside(tmp_path: Path):
    """The same packaging checks (components.origin.server_source_problems) apply out there."""
    server = tmp_path / "node-server"
    server.mkdir()
    stack = write_stack(tmp_path, {"source": "node-server", "runtime": "nodejs22.x", "command": "node index.js"})
    with pytest.raises(ConfigError, match="must hold package.json and package-lock.json"):
        load_from_stack_file(stack)
    assert PROJECT_ROOT not in server.parents


def test_the_default_server_is_the_projects_demo_whatever_folder_the_stack_file_is_in(tmp_path: Path):
    path = tmp_path / "Pulumi.nodemo.yaml"
    config = {f"mcp-edge:{k}": v for k, v in PROD.items() if v is not None and k != "server"}
    path.write_text(yaml.safe_dump({"config": config}))
    source = load_from_stack_file(path).server.source
    assert source is not None and (PROJECT_ROOT / source).is_dir()
