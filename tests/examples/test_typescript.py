"""examples/typescript: the official TypeScript SDK server (@modelcontextprotocol/sdk 1.x), its
dependencies from ``npm ci --omit=dev``, started as its command (``node app.mjs``) runs under the
Lambda Web Adapter, on this machine's Node.js."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import MCPError

from devkit.example_envs import node_modules
from tests.examples import expected
from tests.examples.conftest import RunningExample, serving, skipped_when_unavailable
from tests.examples.exchange import FUNCTION_URL_HOST, HANDSHAKE_VERSION, initialize, run_session, tools_list

pytestmark = pytest.mark.examples

COMMAND = ("node", "app.mjs")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExample]:
    with skipped_when_unavailable():
        node_modules("typescript")
    with serving("typescript", COMMAND, tmp_path_factory.mktemp("typescript")) as running:
        yield running


def check_calls(session: Any) -> None:
    assert session.tool_names == expected.TOOLS
    assert session.stats.structured_content == expected.STATS
    assert json.loads(session.stats.content[0].text) == expected.STATS
    assert session.digest.content[0].text == expected.hash_rounds(expected.TEXT, expected.ROUNDS)
    assert session.progress == expected.PROGRESS


def test_handshake_era_client_lists_tools_and_calls_them(server: RunningExample) -> None:
    session = run_session(server.mcp_url, "legacy", expected.TEXT, expected.ROUNDS)
    assert session.protocol_version == HANDSHAKE_VERSION
    check_calls(session)


def test_auto_client_falls_back_to_the_handshake_era(server: RunningExample) -> None:
    """SDK 1.x knows no 2026-07-28: the client's discovery is refused and it falls back."""
    session = run_session(server.mcp_url, "auto", expected.TEXT, expected.ROUNDS)
    assert session.protocol_version == HANDSHAKE_VERSION
    check_calls(session)


def test_a_client_pinned_to_2026_07_28_is_refused(server: RunningExample) -> None:
    refused = pytest.RaisesExc(MCPError, match="Unsupported protocol version: 2026-07-28")
    with pytest.RaisesGroup(refused, flatten_subgroups=True):
        run_session(server.mcp_url, "2026-07-28", expected.TEXT, expected.ROUNDS)


def test_initialize_opens_no_session(server: RunningExample) -> None:
    answer = initialize(server.mcp_url)
    assert answer.status_code == 200, answer.text
    assert "mcp-session-id" not in answer.headers


def test_get_and_delete_on_the_mcp_path_answer_405(server: RunningExample) -> None:
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, server.mcp_url, timeout=5)
        assert answer.status_code == 405, (method, answer.text)
        assert answer.headers["allow"] == "POST"


def test_function_url_host_is_served_and_any_other_host_misdirected(server: RunningExample) -> None:
    assert tools_list(server.mcp_url, {"host": FUNCTION_URL_HOST}).status_code == 200
    assert tools_list(server.mcp_url, {"host": "mcp.attacker.example"}).status_code == 421
    # A look-alike: the Function URL domain inside another name.
    assert tools_list(server.mcp_url, {"host": "x.lambda-url.eu-west-1.on.aws.attacker.example"}).status_code == 421


def test_cross_origin_browser_request_is_forbidden(server: RunningExample) -> None:
    assert tools_list(server.mcp_url, {"origin": "https://attacker.example"}).status_code == 403


def test_request_bodies_up_to_the_edge_limit_are_read(server: RunningExample) -> None:
    """Lambda@Edge forwards up to 1 MB; express.json() alone stops at 100 kB."""
    text = "word " * 180_000  # 900 kB
    answer = httpx.post(server.mcp_url, timeout=20, headers={"accept": "application/json, text/event-stream",
                                                             "mcp-protocol-version": HANDSHAKE_VERSION},
                        json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                              "params": {"name": "text_stats", "arguments": {"text": text, "top": 1}}})
    assert answer.status_code == 200, answer.text[:300]
    assert '\\"words\\":180000' in answer.text
