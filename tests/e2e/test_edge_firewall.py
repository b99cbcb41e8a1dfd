"""The web ACL on the local topology, with limits from this module's own stack file
(``stacks/Pulumi.firewall.yaml``: 30 requests per token, one tool of the server 10 per token,
per 60 s; the tool named by the stack file, the others taken from the server's own ``tools/list``): a client over a limit gets WAF's 429 with Retry-After and a JSON-RPC error the
official MCP SDK client reads, other clients and other tools go on, and what the web ACL
blocks never reaches the origin (counted in the origin's request log)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import MCPError
from mcp.types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from edge.firewall_rules import JSONRPC_RATE_LIMITED
from local.client import connect
from local.plan import LocalPlan, token_for
from stack_config.loading import load_from_stack_file
from tests.e2e.conftest import own_topology
from tests.e2e.server_tools import arguments_for, callable_tools, listed_tools, tool_named

pytestmark = pytest.mark.e2e

STACK_FILE = Path(__file__).with_name("stacks") / "Pulumi.firewall.yaml"
FIREWALL = load_from_stack_file(STACK_FILE).firewall
assert FIREWALL is not None
TOKEN_LIMIT, WINDOW_S = FIREWALL.token_limit, FIREWALL.window_seconds
# The stack's tool with a limit of its own (each call holds an origin: the cheapest arguments).
(LIMITED, TOOL_LIMIT), = FIREWALL.tool_limits.items()


def tools_of(plan: LocalPlan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The limited tool and another tool any token may call, as the server lists them."""
    tools = listed_tools(plan)
    others = [t for t in callable_tools(tools, {}) if t["name"] != LIMITED]
    assert others, "the server lists no other tool whose arguments a test can make up"
    return tool_named(tools, LIMITED), others[0]


@pytest.fixture(scope="module")
def firewalled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlan]:
    """The stack's own topology (probes once at start only: nothing but the tests calls tools meanwhile)."""
    with own_topology(STACK_FILE, "firewall", tmp_path_factory.mktemp("firewall-run")) as plan:
        yield plan


def tool_calls_at_origin(plan: LocalPlan) -> int:
    """tools/call requests the origin served, from its instances' request logs (one JSON line each)."""
    logs = Path(plan.run_dir) / "logs"
    lines = [line for log in [logs / "origin-us-east-1.log", *sorted(logs.glob("origin-us-east-1-[0-9]*.log"))]
             for line in log.read_text().splitlines()]
    return sum(1 for line in lines if line.startswith("{") and json.loads(line).get("mcp_method") == "tools/call")


def mcp_errors(error: BaseException) -> list[MCPError]:
    if isinstance(error, MCPError):
        return [error]
    if isinstance(error, BaseExceptionGroup):
        return [e for inner in error.exceptions for e in mcp_errors(inner)]
    return []


def raw_call(plan: LocalPlan, token: str, tool: dict[str, Any]) -> httpx.Response:
    """A 2026-07-28 tools/call as a client sends it (the Mcp-Method and Mcp-Name headers)."""
    meta = {PROTOCOL_VERSION_META_KEY: "2026-07-28", CLIENT_INFO_META_KEY: {"name": "waf-e2e", "version": "1"},
            CLIENT_CAPABILITIES_META_KEY: {}}
    return httpx.post(plan.mcp_url, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool["name"], "arguments": arguments_for(tool, cheapest=True), "_meta": meta}},
        headers={"authorization": f"Bearer {token}", "mcp-protocol-version": "2026-07-28",
                 "mcp-method": "tools/call", "mcp-name": tool["name"], "accept": "application/json, text/event-stream"})


def test_a_client_over_its_token_limit_gets_429_while_a_second_client_goes_on(firewalled: LocalPlan) -> None:
    plan = firewalled
    first, second = token_for(plan), token_for(plan)
    _, other = tools_of(plan)
    before = tool_calls_at_origin(plan)
    answers = [raw_call(plan, first, other) for _ in range(TOKEN_LIMIT + 3)]
    assert all(a.status_code == 200 for a in answers[:TOKEN_LIMIT]), [a.status_code for a in answers]
    for limited in answers[TOKEN_LIMIT:]:
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == str(WINDOW_S)
        assert limited.headers["content-type"] == "application/json"
        error = limited.json()["error"]
        assert error["code"] == JSONRPC_RATE_LIMITED and "per-token limit" in error["message"]
        assert "x-mcp-edge-served-region" not in limited.headers  # answered at the edge
    # Blocked requests never reached the origin.
    assert tool_calls_at_origin(plan) - before == TOKEN_LIMIT
    assert raw_call(plan, second, other).status_code == 200

    async def sdk_client_of_the_limited_token() -> None:
        async with connect(plan.mcp_url, first) as client:
            await client.call_tool(other["name"], arguments_for(other))

    # The SDK fails the connection (its discovery request is limited too) with the
    # JSON-RPC error as an MCPError, inside its task group's exception group.
    with pytest.raises((MCPError, BaseExceptionGroup)) as refused:
        anyio.run(sdk_client_of_the_limited_token)
    (error,) = set(map(str, mcp_errors(refused.value)))
    assert error == f"Rate limit exceeded: the per-token limit allows {TOKEN_LIMIT} requests per {WINDOW_S} s; " \
                    f"retry after {WINDOW_S} s"
    assert {e.code for e in mcp_errors(refused.value)} == {JSONRPC_RATE_LIMITED}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_tool_with_its_own_limit_is_limited_by_name_in_both_eras_while_other_tools_are_not(
        firewalled: LocalPlan, mode: str) -> None:
    plan = firewalled
    token = token_for(plan)  # a client of its own: its token's count starts at zero
    limited, other = tools_of(plan)

    async def run() -> tuple[str, list[int | None], bool]:
        async with connect(plan.mcp_url, token, mode=mode) as client:
            codes: list[int | None] = []
            for _ in range(TOOL_LIMIT + 2):
                try:
                    result = await client.call_tool(LIMITED, arguments_for(limited, cheapest=True))
                    assert not result.is_error, result.content
                    codes.append(None)
                except MCPError as error:
                    assert f"the tool '{LIMITED}''s limit" in str(error)
                    codes.append(error.code)
            still_served = await client.call_tool(other["name"], arguments_for(other))
            return client.protocol_version, codes, still_served.is_error

    before = tool_calls_at_origin(plan)
    protocol, codes, other_failed = anyio.run(run)
    assert (protocol == "2026-07-28") == (mode == "auto")  # the header era, then the body era
    assert codes == [None] * TOOL_LIMIT + [JSONRPC_RATE_LIMITED] * 2
    assert not other_failed
    # The limited tool's calls that were served, and the other call: the two over the limit never reached it.
    assert tool_calls_at_origin(plan) - before == TOOL_LIMIT + 1


def test_every_spelling_of_a_token_is_one_count_at_waf_and_only_the_canonical_one_passes_the_edge(
        firewalled: LocalPlan) -> None:
    """WAF's key folds the scheme's case and the whitespace, so respelled
    requests count against the token's one limit; the viewer function refuses them (401)."""
    plan = firewalled
    token = token_for(plan)
    _, other = tools_of(plan)
    respelled = httpx.post(plan.mcp_url, timeout=30, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                           headers={"authorization": f"bearer  {token}", "accept": "application/json"})
    assert respelled.status_code == 401
    assert "one space" in respelled.json()["error_description"]
    answers = [raw_call(plan, token, other) for _ in range(TOKEN_LIMIT - 1)]
    assert [a.status_code for a in answers] == [200] * (TOKEN_LIMIT - 1)
    over = httpx.post(plan.mcp_url, timeout=30, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                      headers={"authorization": f"BEARER\t{token}", "accept": "application/json"})
    assert over.status_code == 429 and "per-token limit" in over.json()["error"]["message"]


def test_a_batch_calling_the_limited_tool_is_refused_at_the_edge_and_never_reaches_the_origin(
        firewalled: LocalPlan) -> None:
    """WAF cannot count a batch's calls, so the gate refuses a batch that calls
    a rate-limited tool (400, a JSON-RPC error saying why)."""
    plan = firewalled
    limited, _ = tools_of(plan)
    before = tool_calls_at_origin(plan)
    batch = [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": LIMITED, "arguments": arguments_for(limited, cheapest=True)}} for i in range(3)]
    answer = httpx.post(plan.mcp_url, timeout=30, json=batch,
                        headers={"authorization": f"Bearer {token_for(plan)}", "mcp-protocol-version": "2025-03-26",
                                 "accept": "application/json, text/event-stream"})
    assert answer.status_code == 400, answer.text
    assert "batch" in answer.json()["error"]["message"] and LIMITED in answer.json()["error"]["message"]
    assert tool_calls_at_origin(plan) == before
