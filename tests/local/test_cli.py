"""The local CLI: --help lists every command; long steps show progress."""

from __future__ import annotations

import io
import time

import pytest

from local.__main__ import Progress, main


def test_help_lists_every_command_and_where_the_dev_secret_lives(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("up", "token", "client", "explain"):
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
