"""Every review tool, given a bad stack file or failing otherwise, prints a short message
naming the problem and exits non-zero, never a traceback; ``--debug`` shows one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from review.errors import EXIT_ERROR, MAX_MESSAGE_LINES, run_reporting_errors, short_message
from stack_config.checks import ConfigError
from stack_config.loading import PROJECT_ROOT, StackFileError, stack_file_path

TOOLS = ("plan", "contracts", "cost", "preflight")
PROD_TEXT = stack_file_path("prod").read_text()
# A config problem with a did-you-mean, and a value out of range, both named by key.
BAD_CONFIG = PROD_TEXT.replace("mcp-edge:originMemoryMb: 1024", "mcp-edge:originMemoryMB: 1024\n"
                               "  mcp-edge:originMemoryMb: 64")
# The lines every failure may print besides the config problems listed one per line.
MAX_OTHER_LINES = 3


def run_tool(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    for name in [n for n in env if n.startswith("AWS_")]:
        del env[name]
    env["AWS_SHARED_CREDENTIALS_FILE"] = env["AWS_CONFIG_FILE"] = os.devnull  # the preflight finds no credentials
    return subprocess.run([sys.executable, "-m", f"review.{tool}", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def assert_short(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_ERROR, output
    assert "Traceback" not in output, output
    for text in expected:
        assert text in output, output
    other = [line for line in output.splitlines() if not line.startswith("  - ")]
    assert len(other) <= MAX_OTHER_LINES, output


@pytest.fixture(scope="module")
def stack_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stacks")
    files = {"config": BAD_CONFIG, "yaml": PROD_TEXT.replace("  mcp-edge:regions:\n", "  mcp-edge:regions: [\n"),
             "shape": "config:\n  - mcp-edge:regions\n"}
    for kind, text in files.items():
        (root / f"Pulumi.{kind}.yaml").write_text(text)
    return {kind: root / f"Pulumi.{kind}.yaml" for kind in [*files, "missing"]}


@pytest.mark.parametrize("tool", TOOLS)
def test_a_config_error_is_the_list_of_problems_by_key(tool: str, stack_files: dict[str, Path]):
    result = run_tool(tool, "--stack", str(stack_files["config"]))
    assert_short(result, f"review.{tool}: invalid stack configuration:",
                 "  - mcp-edge:originMemoryMB is not a key of this project; did you mean mcp-edge:originMemoryMb?",
                 "  - mcp-edge:originMemoryMb = 64: must be between 128 and 10240 MB")


@pytest.mark.parametrize("tool", TOOLS)
def test_a_stack_file_that_is_not_yaml_is_one_line_with_where(tool: str, stack_files: dict[str, Path]):
    result = run_tool(tool, "--stack", str(stack_files["yaml"]))
    assert_short(result, f"review.{tool}: stack file {stack_files['yaml']} is not valid YAML: line ")


@pytest.mark.parametrize("tool", TOOLS)
def test_a_missing_stack_file_is_named(tool: str, stack_files: dict[str, Path]):
    result = run_tool(tool, "--stack", str(stack_files["missing"]))
    assert_short(result, f"review.{tool}: stack file {stack_files['missing']} does not exist")


@pytest.mark.parametrize("tool", ["plan", "preflight"])
def test_a_stack_file_of_the_wrong_shape_is_named(tool: str, stack_files: dict[str, Path]):
    result = run_tool(tool, "--stack", str(stack_files["shape"]))
    assert_short(result, f"stack file {stack_files['shape']}: 'config' must be a mapping")


def test_another_failure_is_its_type_and_message_and_debug_shows_the_traceback(tmp_path: Path):
    # --plans-dir under a file: writing the plan fails after the program ran.
    blocker = tmp_path / "file"
    blocker.write_text("")
    args = ("--stack", "prod", "--write", "--plans-dir", str(blocker / "plans"))
    result = run_tool("plan", *args)
    assert_short(result, "review.plan: failed: NotADirectoryError: ", "run again with --debug for the traceback")
    debug = run_tool("plan", *args, "--debug")
    assert debug.returncode != 0 and "Traceback (most recent call last)" in debug.stderr


def test_the_preflight_without_credentials_says_so_and_exits_non_zero():
    result = run_tool("preflight", "--stack", "prod")
    assert result.returncode == EXIT_ERROR and "Traceback" not in result.stdout + result.stderr
    assert result.stdout.startswith("error: no AWS credentials")


# --- the message itself ----------------------------------------------------------------


def test_a_config_error_raised_from_another_is_still_the_list_of_problems():
    try:
        try:
            raise ConfigError(["mcp-edge:regions is empty"])
        except ConfigError as inner:
            raise RuntimeError("the mock runtime wrapped it") from inner
    except RuntimeError as outer:
        message = short_message("review.x", outer)
    assert message == "review.x: invalid stack configuration:\n  - mcp-edge:regions is empty"


def test_a_long_message_is_cut_to_a_few_lines():
    exc = ValueError("\n".join(f"line {i} " + "x" * 1000 for i in range(50)))
    lines = short_message("review.x", exc).splitlines()
    assert len(lines) == MAX_MESSAGE_LINES + 2 and all(len(line) < 400 for line in lines)
    assert lines[0].startswith("review.x: failed: ValueError: line 0 ")
    assert lines[-2] == f"  ... ({50 - MAX_MESSAGE_LINES} more lines)"


def test_a_tools_own_error_is_its_message_alone():
    class PriceError(ValueError):
        pass

    said: list[str] = []
    status = run_reporting_errors("review.x", lambda: (_ for _ in ()).throw(PriceError("no price for x")),
                                  debug=False, out=said.append, expected=(PriceError,))
    assert status == EXIT_ERROR and said == ["review.x: no price for x"]


def test_the_work_s_own_status_is_kept_and_debug_lets_the_exception_through():
    assert run_reporting_errors("review.x", lambda: 1, debug=False) == 1

    def fail() -> int:
        raise StackFileError("stack file x does not exist")

    said: list[str] = []
    assert run_reporting_errors("review.x", fail, debug=False, out=said.append) == EXIT_ERROR
    assert said == ["review.x: stack file x does not exist"]
    with pytest.raises(StackFileError):
        run_reporting_errors("review.x", fail, debug=True, out=said.append)
