"""Which handshake-era requests stream, and the SDK keep-alive the stack config relies on."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server import _streamable_http_modern
from sse_starlette import EventSourceResponse

from edge.protocol import EDGE_READ_TIMEOUT_FOR_STREAMING_S, EDGE_READ_TIMEOUT_MAX_S, ORIGIN_SSE_KEEPALIVE_S
from examples.demo.demo_server.keepalive import HANDLER_METHODS, handshake_request_streams, sdk_keepalive_s
from tests.examples.demo.conftest import Caller, RunningOrigin

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
BOTH = "application/json, text/event-stream"


def test_the_sdk_keeps_a_stream_alive_as_often_as_the_stack_config_assumes():
    # The config accepts an origin timeout above the read timeout only on this figure:
    # an SDK upgrade that pings less often must fail here, not as 504s at the edge.
    assert sdk_keepalive_s() == ORIGIN_SSE_KEEPALIVE_S
    assert 2 * sdk_keepalive_s() <= EDGE_READ_TIMEOUT_FOR_STREAMING_S <= EDGE_READ_TIMEOUT_MAX_S


@given(method=st.sampled_from(sorted(HANDLER_METHODS)), params=json_values)
def test_a_request_that_runs_a_handler_streams_when_the_client_accepts_sse(method: str, params: object):
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    assert handshake_request_streams(message, BOTH)
    assert handshake_request_streams(message, "TEXT/EVENT-STREAM, application/json;q=0.9")
    # A client that accepts only JSON keeps plain JSON (the streaming transport would answer 406).
    assert not handshake_request_streams(message, "application/json")
    assert not handshake_request_streams(message, None)


@given(method=st.sampled_from(["initialize", "tools/list", "ping", "resources/list", "prompts/list",
                               "notifications/initialized", "completion/complete"]), params=json_values)
def test_requests_that_run_no_handler_answer_json(method: str, params: object):
    assert not handshake_request_streams({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, BOTH)


@given(message=json_values, accept=st.none() | st.text(max_size=40))
def test_any_json_never_crashes_the_choice(message: object, accept: str | None):
    assert handshake_request_streams(message, accept) in (True, False)


# --- the shipped app: a silent tool call streams keep-alives in both eras ----------------------

MODERN_META: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}
# Three silent steps (no progress token: nothing to report) of 0.5 s each.
SILENT_PARAMS: dict[str, Any] = {"name": "countdown", "arguments": {"steps": 3, "interval_s": 0.5}}
SILENT_CALL: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": SILENT_PARAMS}
ERAS = {
    "2025-11-25": (SILENT_CALL, {"mcp-protocol-version": "2025-11-25"}),
    "2026-07-28": ({**SILENT_CALL, "params": {**SILENT_PARAMS, "_meta": MODERN_META}},
                   {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "countdown"}),
}


@pytest.fixture
def fast_sdk_pings(monkeypatch: pytest.MonkeyPatch) -> float:
    """The SDK's keep-alive at 0.2 s (15 s as shipped), so a 1.5 s call shows several."""
    monkeypatch.setattr(_streamable_http_modern, "_SSE_PING_INTERVAL", 0.2)
    monkeypatch.setattr(EventSourceResponse, "DEFAULT_PING_INTERVAL", 0.2)
    return 0.2


@pytest.mark.parametrize("era", sorted(ERAS))
def test_a_silent_tool_call_streams_keep_alive_comments_until_its_answer(
        origin: RunningOrigin, caller: Caller, fast_sdk_pings: float, era: str) -> None:
    # Given a tool call that stays silent for 1.5 s, several keep-alive intervals,
    body, headers = ERAS[era]
    arrivals: list[tuple[float, bytes]] = []
    started = time.monotonic()
    with httpx.stream("POST", origin.mcp_url, json=body, timeout=30,
                      headers={"content-type": "application/json", "accept": "application/json, text/event-stream",
                               **origin.headers(caller), **headers}) as response:
        # when it runs, then the answer is an SSE stream,
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for chunk in response.iter_raw():
            arrivals.append((time.monotonic() - started, chunk))
    stream = b"".join(c for _, c in arrivals).decode()
    # comment lines come while the handler runs (never a gap near the call's length),
    pings = [t for t, c in arrivals if c.lstrip().startswith(b":")]
    assert len(pings) >= 3, arrivals
    gaps = [b - a for a, b in zip([0.0, *[t for t, _ in arrivals]], [t for t, _ in arrivals], strict=False)]
    assert max(gaps) < 1.0, gaps
    # and the last event is the tool's answer.
    data = [line[5:].strip() for line in stream.splitlines() if line.startswith("data:")]
    assert json.loads(data[-1])["result"]["structuredContent"] == {"steps": 3, "message": "counted down 3 steps"}
