"""The probe against real servers on loopback: a plain official-SDK server (both
response modes), the project's origin app, and deliberately broken servers. Each
gives the right result or the right typed error, and never outlives its deadline."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from functions.probe.errors import (
    ProbeAuthError,
    ProbeConfigError,
    ProbeHttpError,
    ProbeProtocolError,
    ProbeTimeoutError,
)
from functions.probe.event import parse_event
from functions.probe.probe import ProbeSettings, run_probe
from functions.probe.schema_hash import schema_hash
from functions.probe.wire import Deadline, new_probe_client
from tests.functions.probe.conftest import (
    TOOLS,
    Loopback,
    legacy_only_wrapper,
    modern,
    probe,
    rpc_error,
    rpc_result,
    sdk_server,
    sse,
)

# A bound that proves "never hangs": the deadline plus scheduling slack, far below
# what the broken servers would take.
SLACK_S = 2.5


# --- the official SDK ------------------------------------------------------------------


def test_plain_sdk_server_is_healthy_over_the_2026_exchange(sdk_app: Loopback):
    result = probe(sdk_app.url())
    assert result["status"] == "healthy" and result["degradedReasons"] == []
    assert result["era"] == "modern" and result["protocolVersion"] == "2026-07-28" and result["fallbackReason"] is None
    assert result["toolCount"] == 3
    assert [s["method"] for s in result["steps"]] == ["server/discover", "tools/list"]
    assert result["httpStatus"] == 200 and result["contentType"] == "application/json"
    assert result["probeRegion"] == "us-east-1" and result["servedRegion"] is None
    phases = result["phases"]
    assert 0 < phases["connectMs"] <= phases["firstByteMs"] <= phases["totalMs"] == result["latencyMs"]


def test_same_sdk_server_through_the_legacy_handshake_has_the_same_schema_hash():
    """The SDK orders schema keys differently per era; the hash is over parsed tools."""
    app = sdk_server().streamable_http_app(stateless_http=True)
    with Loopback(app) as modern_server, Loopback(legacy_only_wrapper(sdk_server().streamable_http_app(stateless_http=True))) as legacy_server:
        modern_result = probe(modern_server.url())
        legacy_result = probe(legacy_server.url())
    assert legacy_result["era"] == "legacy" and legacy_result["protocolVersion"] == "2025-11-25"
    assert "HTTP 400" in legacy_result["fallbackReason"]
    assert [s["method"] for s in legacy_result["steps"]] == [
        "server/discover", "initialize", "notifications/initialized", "tools/list"]
    assert legacy_result["contentType"] == "text/event-stream"  # the SDK's legacy stateless default
    assert legacy_result["schemaHash"] == modern_result["schemaHash"]
    assert legacy_result["toolCount"] == modern_result["toolCount"] == 3


# --- scripted servers: the good ones ---------------------------------------------------


def test_modern_only_server_never_sees_initialize(scripted):
    server = scripted(modern)
    result = probe(server.url())
    assert result["era"] == "modern" and result["toolCount"] == 2
    assert result["schemaHash"] == schema_hash(TOOLS)
    assert result["servedRegion"] == "eu-west-1"
    assert "initialize" not in server.script.methods()


def test_legacy_only_server_gets_the_handshake_with_its_session_id_and_a_delete(scripted):
    async def legacy(request: Request, body: dict[str, Any]) -> Response:
        if request.headers.get("mcp-protocol-version", "2025-06-18") not in ("2025-06-18", "2025-11-25"):
            return rpc_error(body, -32600, "Bad Request: Unsupported protocol version", 400)
        method = body.get("method")
        if method == "initialize":
            return rpc_result(body, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                     "serverInfo": {"name": "old", "version": "1"}}, **{"mcp-session-id": "sess-42"})
        if request.headers.get("mcp-session-id") != "sess-42" or request.headers.get("mcp-protocol-version") != "2025-06-18":
            return rpc_error(body, -32600, "Bad Request: missing session", 400)
        if method == "notifications/initialized":
            return Response(status_code=202)
        if method == "tools/list":
            return rpc_result(body, {"tools": TOOLS})
        return rpc_error(body, -32601, "Method not found")

    server = scripted(legacy)
    result = probe(server.url())
    assert result["era"] == "legacy" and result["protocolVersion"] == "2025-06-18"
    assert result["schemaHash"] == schema_hash(TOOLS) and result["toolCount"] == 2
    # Once more without the session id: refused, so the server is stateful (Lambda breaks it).
    assert server.script.methods() == ["server/discover", "initialize", "notifications/initialized", "tools/list",
                                       "tools/list", "DELETE"]
    assert "mcp-session-id" not in server.script.requests[-2][1]
    assert result["status"] == "degraded" and any("stateful" in r for r in result["degradedReasons"])
    delete_headers = server.script.requests[-1][1]
    assert delete_headers["mcp-session-id"] == "sess-42"


def test_sse_only_server_with_pings_notifications_and_a_stream_left_open(scripted):
    async def sse_only(request: Request, body: dict[str, Any]) -> Response:
        method = body.get("method")
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {}}
        else:
            result = {"tools": TOOLS}
        response = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result})
        half = len(response) // 2
        return sse(
            ": ping\r\n\r\n",
            'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\r\n\r\n',
            # The response split across writes, mid-line and mid-CRLF.
            "event: message\r\ndata: " + response[:half],
            response[half:] + "\r",
            "\n\r\n",
            keep_open_s=30,  # the probe stops at its response; it never waits for the end
        )

    server = scripted(sse_only)
    started = time.monotonic()
    result = probe(server.url(), deadline_s=15)
    assert time.monotonic() - started < 25  # well before the server's 30 s end of stream
    assert result["contentType"] == "text/event-stream" and result["toolCount"] == 2
    assert result["schemaHash"] == schema_hash(TOOLS)


def test_paginated_tools_are_all_counted_and_hashed(scripted):
    pages = {None: ([TOOLS[0]], "p2"), "p2": ([TOOLS[1]], "p3"), "p3": ([{"name": "gamma"}], None)}

    async def paged(request: Request, body: dict[str, Any]) -> Response:
        if body["method"] == "tools/list":
            tools, cursor = pages[body["params"].get("cursor")]
            return rpc_result(body, {"tools": tools, **({"nextCursor": cursor} if cursor else {})})
        return await modern(request, body)

    result = probe(scripted(paged).url())
    assert result["toolCount"] == 3
    assert result["schemaHash"] == schema_hash([*TOOLS, {"name": "gamma"}])
    assert [s["method"] for s in result["steps"]] == ["server/discover", "tools/list", "tools/list", "tools/list"]


def test_degraded_when_slower_than_the_threshold_or_served_by_another_region(scripted):
    result = probe(scripted(modern).url(), degraded_ms=0.001, pin="us-east-1", region="us-east-1", target="edge")
    assert result["status"] == "degraded"
    assert any(r.startswith("latency") for r in result["degradedReasons"])
    assert "served by eu-west-1 instead of us-east-1 although pinned there" in result["degradedReasons"]


def test_the_pin_header_goes_to_edge_targets_and_the_signature_to_direct_ones(scripted):
    server = scripted(modern)
    probe(server.url(), pin="eu-west-1", target="edge", forged_token=None)
    assert all(h.get("x-mcp-edge-region") == "eu-west-1" for _, h, _ in server.script.requests)
    assert all("x-amz-date" not in h for _, h, _ in server.script.requests)
    server.script.requests.clear()
    probe(server.url(), signed=True)
    exchange = server.script.requests[:-1]  # the last one is the promise check, unsigned on purpose
    assert exchange and all(h["authorization"].startswith("AWS4-HMAC-SHA256 ") for _, h, _ in exchange)
    assert all("x-mcp-edge-region" not in h for _, h, _ in server.script.requests)


def test_a_direct_target_without_credentials_to_sign_with_is_a_config_error(scripted):
    server = scripted(modern)
    event = {"endpoint": server.url(), "serverId": "acme-mcp", "target": "origin", "targetRegion": "eu-west-1",
             "signed": True}
    settings = ProbeSettings(deadline_s=5, degraded_latency_ms=60000, probe_region="us-east-1")
    with pytest.raises(ProbeConfigError, match="must be signed"):
        run_probe(parse_event(event), settings, None, new_probe_client, Deadline(5), sign=None)
    assert server.script.requests == []  # nothing unsigned was sent as the probe's exchange


# --- deliberately broken servers -----------------------------------------------------


async def slow(request: Request, body: dict[str, Any]) -> Response:
    import anyio

    await anyio.sleep(30)
    return await modern(request, body)


async def trickle(request: Request, body: dict[str, Any]) -> Response:
    """Headers at once, then a keep-alive ping every 0.2 s and never an answer."""
    return sse(*[": ping\n\n"] * 500, gap_s=0.2)


@pytest.mark.parametrize("server_kind", [slow, trickle], ids=["silent", "trickling-sse"])
def test_slow_server_fails_with_a_timeout_within_the_deadline(scripted, server_kind):
    url = scripted(server_kind).url()
    started = time.monotonic()
    with pytest.raises(ProbeTimeoutError, match="1.5 s deadline") as err:
        probe(url, deadline_s=1.5)
    assert time.monotonic() - started < 1.5 + SLACK_S
    assert "server/discover" in str(err.value)


def test_500_is_an_http_error_with_the_status(scripted):
    async def broken(request: Request, body: dict[str, Any]) -> Response:
        return PlainTextResponse("upstream exploded", status_code=500)

    with pytest.raises(ProbeHttpError, match="HTTP 500") as err:
        probe(scripted(broken).url())
    assert err.value.status == 500
    assert "upstream exploded" in str(err.value)


def test_401_is_an_auth_error_naming_the_challenge(scripted):
    async def unauthorized(request: Request, body: dict[str, Any]) -> Response:
        challenge = 'Bearer error="invalid_token", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp"'
        return JSONResponse({"error": "invalid_token"}, status_code=401, headers={"www-authenticate": challenge})

    with pytest.raises(ProbeAuthError, match="HTTP 401") as err:
        probe(scripted(unauthorized).url())
    assert err.value.status == 401 and "resource_metadata" in str(err.value)


def test_403_is_an_http_error_with_the_status(scripted):
    async def locked(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse({"Message": "Forbidden"}, status_code=403)

    with pytest.raises(ProbeHttpError, match="HTTP 403") as err:
        probe(scripted(locked).url())
    assert err.value.status == 403


def test_wrong_content_type_is_a_protocol_error(scripted):
    async def html(request: Request, body: dict[str, Any]) -> Response:
        return Response("<html>hello</html>", media_type="text/html")

    with pytest.raises(ProbeProtocolError, match="text/html"):
        probe(scripted(html).url())


@pytest.mark.parametrize("answer", ['{"jsonrpc": "2.0", "id": 1, "result": ', "[1, 2", "not json"])
def test_invalid_json_is_a_protocol_error(scripted, answer):
    async def garbled(request: Request, body: dict[str, Any]) -> Response:
        return Response(answer, media_type="application/json")

    with pytest.raises(ProbeProtocolError, match="not valid JSON"):
        probe(scripted(garbled).url())


def test_invalid_json_in_an_sse_event_is_a_protocol_error(scripted):
    async def garbled(request: Request, body: dict[str, Any]) -> Response:
        return sse("event: message\ndata: {oops\n\n")

    with pytest.raises(ProbeProtocolError, match="SSE event is not valid JSON"):
        probe(scripted(garbled).url())


def test_sse_stream_that_ends_without_our_response_is_a_protocol_error(scripted):
    async def silent(request: Request, body: dict[str, Any]) -> Response:
        return sse('data: {"jsonrpc":"2.0","id":999,"result":{}}\n\n')

    with pytest.raises(ProbeProtocolError, match="without the response to request 1"):
        probe(scripted(silent).url())


def test_json_rpc_error_on_tools_list_is_a_protocol_error(scripted):
    async def failing(request: Request, body: dict[str, Any]) -> Response:
        if body["method"] == "tools/list":
            return rpc_error(body, -32603, "database unavailable")
        return await modern(request, body)

    with pytest.raises(ProbeProtocolError, match="tools/list: JSON-RPC error -32603: database unavailable"):
        probe(scripted(failing).url())


def test_server_speaking_only_an_unknown_future_version_is_a_protocol_error(scripted):
    async def future(request: Request, body: dict[str, Any]) -> Response:
        return rpc_error(body, -32022, "Unsupported protocol version", 400, {"supported": ["2027-03-01"]})

    server = scripted(future)
    # A 400 whose body names only versions nobody here speaks is an answer, not an era hint.
    with pytest.raises(ProbeProtocolError, match=r"speaks only \['2027-03-01'\]"):
        probe(server.url())
    assert server.script.methods() == ["server/discover"]


def test_cursor_cycle_is_a_protocol_error(scripted):
    async def cycling(request: Request, body: dict[str, Any]) -> Response:
        if body["method"] == "tools/list":
            return rpc_result(body, {"tools": [], "nextCursor": "same"})
        return await modern(request, body)

    with pytest.raises(ProbeProtocolError, match="repeated nextCursor"):
        probe(scripted(cycling).url())


def test_unreachable_endpoint_is_an_http_error_with_status_0():
    with Loopback(sdk_server().streamable_http_app(stateless_http=True)) as server:
        url = server.url()
    with pytest.raises(ProbeHttpError, match="could not reach") as err:
        probe(url)
    assert err.value.status == 0


def test_redirect_is_not_followed(scripted):
    async def moved(request: Request, body: dict[str, Any]) -> Response:
        return Response(status_code=307, headers={"location": "https://elsewhere.example/mcp"})

    with pytest.raises(ProbeHttpError, match="HTTP 307"):
        probe(scripted(moved).url())
