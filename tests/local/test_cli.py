"""The local CLI: --help lists every command; long steps show progress; every command
that cannot do what it was asked says why in a few lines and exits non-zero
(``--debug`` shows the traceback)."""

from __future__ import annotations

import io
import time
import types
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import local.__main__ as cli
import local.plan
from local.__main__ import Progress, main
from local.client import EdgeRefusedError
from local.supervisor import free_ports
from tests.local.conftest import serve


def test_help_lists_every_command_and_where_the_dev_secret_lives(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("up", "token", "client", "fail", "restore", "explain"):
        assert f"    {command} " in out
    assert "plan.json" in out


def test_up_refuses_a_token_lifetime_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["up", "--token-lifetime", "2"])
    assert "between 5 and 86400" in capsys.readouterr().err


def test_progress_is_printed_while_a_step_runs_and_stops_after() -> None:
    out = io.StringIO()
    with Progress("working", every_s=0.05, out=out):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("working (") and line.endswith(" s)") for line in lines)
    time.sleep(0.15)
    assert out.getvalue().splitlines() == lines


# --- errors for people -----------------------------------------------------------------------

MAX_LINES = 4


async def _refuse_for_scope(_: Request) -> JSONResponse:
    # What the origin answers a call whose token lacks the tool's scope (resource_server.py).
    return JSONResponse({"error": "insufficient_scope", "error_description": "tool whoami needs scope profile",
                         "scope": "mcp profile"}, status_code=403,
                        headers={"www-authenticate": 'Bearer error="insufficient_scope", scope="mcp profile", '
                                                     'error_description="tool whoami needs scope profile"'})


@pytest.fixture
def running_plan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> types.SimpleNamespace:
    """A topology's plan as the talking commands read it, with a token from nowhere."""
    plan = types.SimpleNamespace(mcp_url="", run_dir=str(tmp_path), stack="prod")
    monkeypatch.setattr(cli, "_plan", lambda args: plan)
    monkeypatch.setattr(local.plan, "token_for", lambda *a, **k: "a-token")
    return plan


def _short_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and 1 <= len(err.strip().splitlines()) <= MAX_LINES, err
    return err


def test_client_refused_for_a_missing_scope_prints_the_status_and_how_to_ask_for_it(
        running_plan: types.SimpleNamespace, capsys: pytest.CaptureFixture[str]) -> None:
    app = Starlette(routes=[Route("/mcp", _refuse_for_scope, methods=["POST", "GET", "DELETE"])])
    with serve(app) as port:
        running_plan.mcp_url = f"http://127.0.0.1:{port}/mcp"
        assert main(["client", "--tool", "whoami"]) == 1
        err = _short_error(capsys)
        assert "answered HTTP 403 insufficient_scope: tool whoami needs scope profile" in err
        assert "scripts/run-local client --scope 'mcp profile'" in err
        # --debug: the traceback, for whoever wants it
        with pytest.raises(EdgeRefusedError):
            main(["client", "--tool", "whoami", "--debug"])


def test_client_with_nothing_listening_asks_whether_the_topology_runs(
        running_plan: types.SimpleNamespace, capsys: pytest.CaptureFixture[str]) -> None:
    running_plan.mcp_url = f"http://127.0.0.1:{free_ports(1)[0]}/mcp"
    assert main(["client"]) == 1
    assert "is the local topology running" in _short_error(capsys)


@pytest.mark.parametrize("argv", [["fail", "eu-west-1"], ["restore", "eu-west-1"]])
def test_fail_and_restore_without_a_running_topology_say_so(
        running_plan: types.SimpleNamespace, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 1
    assert "no running topology answers" in _short_error(capsys)


@pytest.mark.parametrize("command", [["token"], ["client"], ["fail", "eu-west-1"], ["restore", "eu-west-1"]])
def test_talking_commands_without_a_run_folder_say_how_to_start_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*command, "--run-dir", str(tmp_path / "none")])
    assert isinstance(info.value.code, str) and "start it with scripts/run-local" in info.value.code
    assert len(info.value.code.splitlines()) <= MAX_LINES


@pytest.mark.parametrize("content, expected", [
    ("config:\n  mcp-edge:regions: [eu-west-1\n", "is not valid YAML"),
    ("config:\n  mcp-edge:originMemoryMB: 5\n", "originMemoryMB"),
])
def test_up_with_a_bad_stack_file_names_the_problem_and_exits_non_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str) -> None:
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(content)
    assert main(["up", "--stack", str(stack), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_an_unexpected_error_is_one_line_naming_debug(
        running_plan: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: object) -> int:
        raise KeyError("plan")

    monkeypatch.setattr(cli, "cmd_restore", broken)
    assert main(["restore", "eu-west-1"]) == 1
    err = _short_error(capsys)
    assert "KeyError: 'plan'" in err and "--debug" in err


@pytest.mark.parametrize("count", ["0", "9", "two"])
def test_origin_instances_out_of_range_are_refused_by_the_option(capsys: pytest.CaptureFixture[str], count: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["up", "--origin-instances", count])
    assert info.value.code == 2 and "--origin-instances" in capsys.readouterr().err
