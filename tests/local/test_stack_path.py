"""``scripts/run-local --stack /abs/path/Pulumi.x.yaml``: a stack file outside the project, its
server named from the stack file's folder (issue 39)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from local.__main__ import main
from local.plan import Options, build_plan, default_run_dir
from stack_config.loading import PROJECT_ROOT, pulumi_config_map, read_stack_file, stack_file_path


def outside_stack(folder: Path, source: str) -> Path:
    """prod's stack file in ``folder`` as Pulumi.mine.yaml, with the server folder ``source``."""
    config = {f"mcp-edge:{k}": v for k, v in read_stack_file(stack_file_path("prod")).items() if v is not None}
    config["mcp-edge:server"] = {**config["mcp-edge:server"], "source": source}
    for key in ("customDomain", "certificateArn"):  # prod's own: one distribution per domain
        config.pop(f"mcp-edge:{key}", None)
    path = folder / "Pulumi.mine.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


@pytest.mark.parametrize("stack", ["mine", "/somewhere/else/Pulumi.mine.yaml", "other/Pulumi.mine.yaml"])
def test_the_run_folder_of_a_stack_file_anywhere_is_named_after_its_stack(stack: str):
    assert default_run_dir(stack) == PROJECT_ROOT / ".local" / "mine"


def test_the_program_reads_a_server_folder_named_from_a_stack_file_outside_the_project(tmp_path: Path):
    (tmp_path / "demo").symlink_to(PROJECT_ROOT / "examples" / "demo")
    stack = outside_stack(tmp_path, "demo")
    server = yaml.safe_load(pulumi_config_map(stack)["mcp-edge:server"])
    assert server["source"] == str((PROJECT_ROOT / "examples" / "demo").resolve())


def test_the_program_reads_a_project_stack_files_server_folder_as_written():
    assert yaml.safe_load(pulumi_config_map("prod")["mcp-edge:server"])["source"] == "examples/demo"


def test_a_plan_is_built_for_a_stack_file_outside_the_project(tmp_path: Path):
    # A folder of its own holding the demo (a link to it, so the program's cached package serves).
    (tmp_path / "servers").mkdir()
    (tmp_path / "servers" / "demo").symlink_to(PROJECT_ROOT / "examples" / "demo")
    (tmp_path / "stacks").mkdir()
    stack = outside_stack(tmp_path / "stacks", "../servers/demo")
    plan = build_plan(Options(stack=str(stack), run_dir=tmp_path / "run", edge_port=9000, base_port=9001))
    assert plan.server["source"] == str((PROJECT_ROOT / "examples" / "demo").resolve())
    assert plan.stack == str(stack)  # what the banner's commands pass back as --stack


def test_a_missing_server_folder_outside_the_project_is_one_error_naming_key_and_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    stack = outside_stack(tmp_path, "../not-here")
    assert main(["up", "--stack", str(stack), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"mcp-edge:server.source = '../not-here': {tmp_path / '../not-here'} does not exist" in err
    assert "Traceback" not in err and "NotADirectoryError" not in err
