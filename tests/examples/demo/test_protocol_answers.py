"""Protocol answers a client can act on: the same capabilities and a real serverInfo.version
in both eras, and errors that name what is wrong and what is accepted (the spec's codes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION

from examples.demo.demo_server.protocol_errors import rejection
from tests.examples.demo.conftest import DISCOVER, INITIALIZE, MODERN_HEADERS, Caller, RunningOrigin

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def modern(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": META}}


def answer(response: Any) -> dict[str, Any]:
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = text.split("data: ", 1)[1]
    body: dict[str, Any] = json.loads(text)
    return body


def test_both_eras_advertise_the_same_capabilities_and_the_package_version(origin: RunningOrigin,
                                                                           caller: Caller) -> None:
    from examples.demo.demo_server import __version__

    token = caller
    discovered = answer(origin.post(modern("server/discover"), headers=origin.headers(token, **MODERN_HEADERS)))
    initialized = answer(origin.post(INITIALIZE, headers=origin.headers(token)))
    assert discovered["result"]["capabilities"] == initialized["result"]["capabilities"]
    assert initialized["result"]["capabilities"]["tools"] == {"listChanged": False}
    server_info = discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert server_info["version"] == initialized["result"]["serverInfo"]["version"] == __version__ != ""
    assert DISCOVER["method"] == "server/discover"


def test_subscriptions_listen_is_not_offered(origin: RunningOrigin, caller: Caller) -> None:
    response = origin.post(modern("subscriptions/listen"), headers=origin.headers(
        caller, **{"mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}))
    assert "error" in answer(response), response.text  # refused: no stream held open


@pytest.mark.parametrize(("headers", "body", "code", "says"), [
    ({"mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list"}, modern("tools/list"),
     UNSUPPORTED_PROTOCOL_VERSION, "'2099-01-01' is not supported"),
    ({"mcp-protocol-version": "2026-07-28"}, modern("tools/list"), HEADER_MISMATCH, "Mcp-Method header is missing"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "prompts/list"}, modern("tools/list"), HEADER_MISMATCH,
     "says 'prompts/list' but the body's method is 'tools/list'"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}, modern("tools/call", {"name": "echo"}),
     HEADER_MISMATCH, "Mcp-Name header is missing"),
    ({}, [INITIALIZE, DISCOVER], INVALID_REQUEST, "batches are not supported"),
    ({"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}, [modern("tools/list")], INVALID_REQUEST,
     "batches are not supported"),
])
def test_bad_requests_get_errors_naming_what_is_wrong(origin: RunningOrigin, caller: Caller, headers: dict[str, str],
                                                      body: Any, code: int, says: str) -> None:
    response = origin.post(body, headers=origin.headers(caller, **headers))
    assert response.status_code == 400, response.text
    error = answer(response)["error"]
    assert error["code"] == code and says in error["message"], error
    if code == UNSUPPORTED_PROTOCOL_VERSION:
        assert error["data"] == {"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                                 "requested": "2099-01-01"}
        assert answer(response)["id"] == 1


@given(method=st.sampled_from(["tools/list", "tools/call", "prompts/get", "server/discover", "ping"]),
       header=st.one_of(st.none(), st.sampled_from(["tools/list", "tools/call", "ping", "x"])))
def test_a_modern_request_is_passed_on_exactly_when_its_method_header_matches(method: str, header: str | None) -> None:
    found = rejection("2026-07-28", header, None, modern(method))
    assert (found is None) == (header == method)
    if found is not None:
        assert found.code == HEADER_MISMATCH and found.request_id == 1


@given(version=st.sampled_from(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]),
       body=st.one_of(st.just(INITIALIZE), st.just({"jsonrpc": "2.0", "method": "notifications/initialized"})))
def test_handshake_era_requests_pass_unless_batched(version: str, body: dict[str, Any]) -> None:
    assert rejection(version, None, None, body) is None
    assert rejection(version, None, None, [body]) is not None
