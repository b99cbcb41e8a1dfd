"""Servers that work on a laptop and fail on Lambda: the probe says why, and what to set.

- A stateful server (it issues ``Mcp-Session-Id`` on initialize and refuses requests without
  it): on one instance the probe still answers, degraded with the advice; behind two
  instances taking turns, as Lambda's do, it fails with "Session not found" and the advice.
- A server whose DNS-rebinding protection refuses the Function URL's Host (Python SDK 421,
  FastMCP 421, TypeScript SDK 403): the probe's error names the cause and each SDK's setting.

The servers are written here with the official SDK's own defaults, or shaped exactly as the
other SDKs answer (their status and body, read in their sources: ``functions/probe/advice.py``).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from functions.probe.advice import host_check_advice, is_host_refusal, stateful_server_advice
from functions.probe.errors import ProbeHttpError
from functions.probe.probe import HandshakeChecks
from review import cost
from tests.functions.probe.conftest import (
    TOOLS,
    Loopback,
    legacy_only_wrapper,
    modern,
    probe,
    rpc_error,
    rpc_result,
    sdk_server,
)

FUNCTION_URL_HOST = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws"


def with_host(app: Any, host: str) -> Any:
    """What a Function URL forwards on AWS: the request with its own Host."""

    async def forwarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"host"] + [(b"host", host.encode())]
            scope = {**scope, "headers": headers}
        await app(scope, receive, send)

    return forwarded


# --- stateful servers ---------------------------------------------------------------------------


def test_stateful_sdk_server_on_one_instance_is_degraded_with_the_setting_to_change():
    app = legacy_only_wrapper(sdk_server().streamable_http_app())  # the SDK's default: sessions
    with Loopback(app) as server:
        result = probe(server.url())
    assert result["era"] == "legacy" and result["toolCount"] == 3
    assert result["status"] == "degraded"
    assert stateful_server_advice() in result["degradedReasons"]
    for setting in ("stateless_http=True", "stateless=True", "sessionIdGenerator: undefined", "FASTMCP_STATELESS_HTTP"):
        assert setting in stateful_server_advice()


def test_stateless_sdk_server_through_the_handshake_is_healthy():
    app = legacy_only_wrapper(sdk_server().streamable_http_app(stateless_http=True))
    with Loopback(app) as server:
        result = probe(server.url())
    assert result["era"] == "legacy" and result["status"] == "healthy" and result["degradedReasons"] == []


def test_stateful_server_behind_instances_taking_turns_fails_with_session_not_found_and_the_advice(scripted):
    """Two instances with their own sessions, alternating, as Lambda may route."""
    sessions: list[set[str]] = [set(), set()]
    turn = itertools.cycle([0, 1])

    async def instance(request: Request, body: dict[str, Any]) -> Response:
        mine = sessions[next(turn)]
        if request.headers.get("mcp-protocol-version") == "2026-07-28":
            return PlainTextResponse("Bad Request: Missing session ID", status_code=400)
        if body.get("method") == "initialize":
            mine.add("s-1")
            return rpc_result(body, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                     "serverInfo": {"name": "stateful", "version": "1"}}, **{"mcp-session-id": "s-1"})
        if request.headers.get("mcp-session-id") not in mine:
            return rpc_error(body, -32001, "Session not found", 404)
        if body.get("method") == "tools/list":
            return rpc_result(body, {"tools": TOOLS})
        return Response(status_code=202)

    server = scripted(instance)
    with pytest.raises(ProbeHttpError) as failure:
        probe(server.url())
    assert failure.value.status == 404
    assert "Session not found" in str(failure.value) and stateful_server_advice() in str(failure.value)


def test_a_400_from_a_server_that_issued_no_session_does_not_blame_sessions(scripted):
    async def no_sessions(request: Request, body: dict[str, Any]) -> Response:
        if request.headers.get("mcp-protocol-version") == "2026-07-28":
            return PlainTextResponse("unknown version", status_code=400)
        if body.get("method") == "initialize":
            return rpc_result(body, {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "serverInfo": {"name": "x", "version": "1"}})
        if body.get("method") == "tools/list":
            return rpc_error(body, -32600, "Bad Request: tools are resting", 400)
        return Response(status_code=202)

    with pytest.raises(ProbeHttpError) as failure:
        probe(scripted(no_sessions).url())
    assert "tools are resting" in str(failure.value) and "stateful" not in str(failure.value)


def test_a_session_issuing_server_that_also_answers_without_the_session_is_healthy(scripted):
    """Issuing ids is fine; requiring them is what Lambda breaks."""

    async def lenient(request: Request, body: dict[str, Any]) -> Response:
        if request.headers.get("mcp-protocol-version") == "2026-07-28":
            return PlainTextResponse("unknown version", status_code=400)
        if body.get("method") == "initialize":
            return rpc_result(body, {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "serverInfo": {"name": "x", "version": "1"}}, **{"mcp-session-id": "s-9"})
        if body.get("method") == "tools/list":
            return rpc_result(body, {"tools": TOOLS})
        return Response(status_code=202)

    server = scripted(lenient)
    result = probe(server.url())
    assert result["status"] == "healthy"
    asked = [(m, h.get("mcp-session-id"), b and b.get("method")) for m, h, b in server.script.requests]
    assert ("POST", None, "tools/list") in asked and ("POST", "s-9", "tools/list") in asked


# --- Host checks -----------------------------------------------------------------------------------


def test_python_sdk_default_host_check_refuses_the_function_url_host_and_the_error_names_the_setting():
    # The SDK's default for a server bound to 127.0.0.1: DNS-rebinding protection, localhost only.
    app = with_host(sdk_server().streamable_http_app(stateless_http=True, host="127.0.0.1"), FUNCTION_URL_HOST)
    with Loopback(app) as server, pytest.raises(ProbeHttpError) as failure:
        probe(server.url())
    message = str(failure.value)
    assert failure.value.status == 421 and "Invalid Host header" in message
    assert "TransportSecuritySettings(enable_dns_rebinding_protection=False)" in message
    assert "lambda-url" in message and "allowedHosts" in message and "allowed_hosts" in message


def test_the_same_sdk_server_with_the_check_off_is_healthy_under_the_function_url_host():
    from mcp.server.transport_security import TransportSecuritySettings

    settings = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = with_host(sdk_server().streamable_http_app(stateless_http=True, transport_security=settings),
                    FUNCTION_URL_HOST)
    with Loopback(app) as server:
        assert probe(server.url())["status"] == "healthy"


@pytest.mark.parametrize(("status", "answer"), [
    # The TypeScript SDK's hostHeaderValidation (createMcpExpressApp's default).
    (403, {"jsonrpc": "2.0", "error": {"code": -32000, "message": f"Invalid Host: {FUNCTION_URL_HOST}"}, "id": None}),
    # FastMCP's guard.
    (421, "Misdirected Request"),
])
def test_other_sdks_host_refusals_name_the_cause_and_the_settings(scripted, status, answer):
    async def refuse(request: Request, body: dict[str, Any]) -> Response:
        if isinstance(answer, dict):
            return JSONResponse(answer, status_code=status)
        return PlainTextResponse(answer, status_code=status)

    with pytest.raises(ProbeHttpError) as failure:
        probe(scripted(refuse).url())
    assert failure.value.status == status
    assert "Host header" in str(failure.value) and "createMcpExpressApp" in str(failure.value)


def test_a_403_that_is_not_about_the_host_gets_no_host_advice(scripted):
    async def forbidden(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse({"error": "insufficient_scope"}, status_code=403)

    with pytest.raises(ProbeHttpError) as failure:
        probe(scripted(forbidden).url())
    assert "Host" not in str(failure.value)


@given(st.integers(100, 599).filter(lambda s: s not in (400, 403, 421)), st.text(max_size=80))
def test_no_other_status_is_ever_taken_for_a_host_refusal(status, body):
    assert host_check_advice(status, body) is None and not is_host_refusal(status, body + " invalid host")


@given(st.text(max_size=80))
def test_421_is_always_a_host_refusal_whatever_its_body(body):
    advice = host_check_advice(421, body)
    assert advice is not None and "answered 421" in advice


# --- a server that speaks 2026-07-28 and is stateful on the 2025 handshake (FastMCP's quickstart) ------


def counting(app: Any, seen: list[tuple[str, bool]]) -> Any:
    """Record each request: its HTTP method, and whether it carried a session id."""

    async def count(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append((scope["method"], any(k == b"mcp-session-id" for k, _ in scope["headers"])))
        await app(scope, receive, send)

    return count


def test_a_modern_server_stateful_on_the_handshake_is_degraded_and_asked_again_only_when_due():
    clock = [0.0]
    checks = HandshakeChecks(interval_s=600, clock=lambda: clock[0])
    seen: list[tuple[str, bool]] = []
    with Loopback(counting(sdk_server().streamable_http_app(), seen)) as server:  # sessions on the handshake
        first = probe(server.url(), handshake=checks)
        asked = len(seen)
        second = probe(server.url(), handshake=checks)
        repeated = len(seen) - asked
        clock[0] = 600.0
        probe(server.url(), handshake=checks)
    assert first["era"] == "modern"
    assert first["status"] == second["status"] == "degraded"
    assert stateful_server_advice() in first["degradedReasons"] and stateful_server_advice() in second["degradedReasons"]
    # The first probe: the exchange, then initialize, tools/list without the session, DELETE of it.
    assert seen[:asked][-3:] == [("POST", False), ("POST", False), ("DELETE", True)]
    assert asked == cost.PROBE_REQUESTS_PER_EXCHANGE + cost.HANDSHAKE_CHECK_REQUESTS
    assert repeated == cost.PROBE_REQUESTS_PER_EXCHANGE  # not due: the exchange alone
    assert len(seen) - asked - repeated == asked  # due again


def test_a_modern_server_stateless_on_the_handshake_is_healthy_after_the_check():
    checks = HandshakeChecks()
    with Loopback(sdk_server().streamable_http_app(stateless_http=True)) as server:
        result = probe(server.url(), handshake=checks)
    assert result["era"] == "modern" and result["status"] == "healthy"
    assert not checks.due(server.url()) and not checks.stateful(server.url())


def test_a_modern_only_server_refusing_the_handshake_is_not_taken_for_stateful(scripted):
    checks = HandshakeChecks()
    server = scripted(modern)
    result = probe(server.url(), handshake=checks)
    assert result["status"] == "healthy" and server.script.methods() == ["server/discover", "tools/list", "initialize"]
