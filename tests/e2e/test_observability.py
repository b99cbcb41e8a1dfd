"""The operator's view on the local topology: a tool call made with a known ``traceparent``
appears in the status page's trace view with the edge's span and the origin's span under
that trace id, and the per-tool panel counts a burst of calls exactly."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from mcp.types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from local.plan import DEV_CLIENT_ID, LocalPlan, token_for
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

MODERN = "2026-07-28"
META = {PROTOCOL_VERSION_META_KEY: MODERN, CLIENT_INFO_META_KEY: {"name": "observability-e2e", "version": "1"},
        CLIENT_CAPABILITIES_META_KEY: {}}
HEADERS = {"mcp-protocol-version": MODERN, "accept": "application/json, text/event-stream"}


def rpc(plan: LocalPlan, token: str, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(plan.mcp_url, timeout=30, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                      "params": {**params, "_meta": META}},
                      headers={"authorization": f"Bearer {token}", "mcp-method": method, **HEADERS, **headers})


def a_tool(plan: LocalPlan, token: str) -> str:
    """The countdown tool, as tools/list names it (a call of it with one step is quick)."""
    listed = rpc(plan, token, "tools/list", {})
    assert listed.status_code == 200, listed.text[:300]
    names = [tool["name"] for tool in listed.json()["result"]["tools"]]
    assert "countdown" in names, names
    return "countdown"


def call(plan: LocalPlan, token: str, tool: str, **headers: str) -> httpx.Response:
    response = rpc(plan, token, "tools/call", {"name": tool, "arguments": {"steps": 1, "interval_s": 0}},
                   **{"mcp-name": tool, **headers})
    assert response.status_code == 200, response.text[:300]
    return response


def status(plan: LocalPlan, path: str) -> httpx.Response:
    return httpx.get(plan.status_url + path, timeout=30)


def test_a_tool_call_with_a_known_traceparent_shows_the_edge_and_origin_spans_under_its_trace_id(
        plan: LocalPlan) -> None:
    token = token_for(plan)
    tool = a_tool(plan, token)
    trace_id, viewer_span = secrets.token_hex(16), secrets.token_hex(8)
    call(plan, token, tool, traceparent=f"00-{trace_id}-{viewer_span}-01")

    def spans() -> list[dict[str, Any]] | None:
        found = status(plan, f"traces/{trace_id}")
        if found.status_code != 200:
            return None
        doc = found.json()
        return doc["spans"] if any(s["kind"] == "origin" for s in doc["spans"]) else None

    found = wait_for(spans, 30, f"trace {trace_id} with an origin span in the status page's trace view")
    [edge] = [s for s in found if s["kind"] == "edge"]
    [origin] = [s for s in found if s["kind"] == "origin"]
    assert edge["parentSpanId"] == viewer_span and edge["traceSource"] == "header"
    assert (edge["decision"], edge["tool"]) == ("allowed", tool)
    # The record names the client the gate verified (the dev client's token), not the probes'
    assert (edge["client"], edge["probe"]) == (DEV_CLIENT_ID, False)
    assert origin["parentSpanId"] == edge["spanId"] and origin["status"] == 200
    assert origin["region"] == edge["originRegion"]


def test_the_per_tool_panel_counts_a_burst_of_calls_exactly(plan: LocalPlan) -> None:
    token = token_for(plan)
    tool = a_tool(plan, token)

    def allowed() -> int:
        return int(status(plan, "status.json").json()["tools"].get(tool, {}).get("allowed", 0))

    before = allowed()
    burst = 7
    for _ in range(burst):
        call(plan, token, tool)
    wait_for(lambda: allowed() >= before + burst, 30, f"{burst} {tool} calls counted")
    assert allowed() == before + burst
