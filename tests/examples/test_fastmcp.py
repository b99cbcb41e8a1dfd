"""examples/fastmcp: the one-file FastMCP server, in its own virtualenv (its requirements.txt),
started as its command (``python3 server.py``) runs under the Lambda Web Adapter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit.example_envs import python_env
from tests.examples import expected
from tests.examples.conftest import RunningExample, serving, skipped_when_unavailable
from tests.examples.exchange import FUNCTION_URL_HOST, HANDSHAKE_VERSION, initialize, run_session, tools_list

pytestmark = pytest.mark.examples

COMMAND = ("python3", "server.py")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExample]:
    with skipped_when_unavailable():
        bin_dir = python_env("fastmcp")
    with serving("fastmcp", COMMAND, tmp_path_factory.mktemp("fastmcp"), path_prefix=bin_dir) as running:
        yield running


def check_calls(session: Any) -> None:
    assert session.tool_names == expected.TOOLS
    assert session.stats.structured_content == expected.STATS
    # A str return is wrapped as {"result": ...} under FastMCP's generated output schema.
    assert session.digest.structured_content == {"result": expected.hash_rounds(expected.TEXT, expected.ROUNDS)}
    assert session.progress == expected.PROGRESS


def test_handshake_era_client_lists_tools_and_calls_them(server: RunningExample) -> None:
    session = run_session(server.mcp_url, "legacy", expected.TEXT, expected.ROUNDS)
    assert session.protocol_version == HANDSHAKE_VERSION
    check_calls(session)


def test_auto_client_negotiates_2026_07_28(server: RunningExample) -> None:
    session = run_session(server.mcp_url, "auto", expected.TEXT, expected.ROUNDS)
    assert session.protocol_version == "2026-07-28"
    check_calls(session)


def test_initialize_opens_no_session(server: RunningExample) -> None:
    answer = initialize(server.mcp_url)
    assert answer.status_code == 200, answer.text
    assert "mcp-session-id" not in answer.headers


def test_get_and_delete_on_the_mcp_path_answer_405(server: RunningExample) -> None:
    assert httpx.get(server.mcp_url, timeout=5).status_code == 405
    assert httpx.delete(server.mcp_url, timeout=5).status_code == 405


def test_function_url_host_is_served_and_any_other_host_misdirected(server: RunningExample) -> None:
    assert tools_list(server.mcp_url, {"host": FUNCTION_URL_HOST}).status_code == 200
    assert tools_list(server.mcp_url, {"host": "mcp.attacker.example"}).status_code == 421


def test_cross_origin_browser_request_is_forbidden(server: RunningExample) -> None:
    assert tools_list(server.mcp_url, {"origin": "https://attacker.example"}).status_code == 403
