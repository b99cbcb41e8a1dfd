"""The demo server, driven by the official MCP SDK client in both protocol eras.

The app runs under uvicorn on loopback (as the Web Adapter runs it on Lambda), and every
request carries what the edge sends: the Function URL's Host, the caller's token and the
identity the edge verified.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.examples.demo.conftest import INITIALIZE, REGION, Caller, RunningOrigin

MODES = ("auto", "legacy")
EXPECTED_ERA = {"auto": "2026-07-28", "legacy": "2025-11-25"}


class Responses:
    """Every HTTP response the client saw (status, content type, served region)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, str | None]] = []

    async def __call__(self, response: httpx2.Response) -> None:
        self.seen.append((response.status_code, response.headers.get("content-type", ""),
                          response.headers.get("x-mcp-edge-served-region")))


async def with_client(origin: RunningOrigin, caller: Caller | None, mode: str, use: Callable[[Client], Awaitable[Any]],
                      responses: Responses | None = None) -> Any:
    hooks: dict[str, list[Callable[..., Any]]] = {"response": [responses]} if responses is not None else {}
    async with (
        httpx2.AsyncClient(headers=origin.headers(caller), event_hooks=hooks) as http,
        Client(streamable_http_client(origin.mcp_url, http_client=http), mode=mode) as client,
    ):
        return await use(client)


@pytest.mark.parametrize("mode", MODES)
def test_client_negotiates_the_expected_protocol_era(origin: RunningOrigin, caller: Caller, mode: str):
    async def version(client: Client) -> str | None:
        return client.session.protocol_version

    assert anyio.run(with_client, origin, caller, mode, version) == EXPECTED_ERA[mode]


@pytest.mark.parametrize("mode", MODES)
def test_lists_the_example_tools_with_schemas(origin: RunningOrigin, caller: Caller, mode: str):
    async def tools(client: Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    listed = anyio.run(with_client, origin, caller, mode, tools)
    assert set(listed) == {"echo", "countdown", "served_by", "whoami"}
    countdown = listed["countdown"].input_schema["properties"]
    assert countdown["steps"]["maximum"] == 50 and countdown["steps"]["minimum"] == 1
    assert listed["echo"].input_schema["required"] == ["text"]


@pytest.mark.parametrize("mode", MODES)
def test_calls_every_tool_and_quick_calls_answer_json_or_stream_by_era(origin: RunningOrigin, caller: Caller,
                                                                        mode: str):
    responses = Responses()

    async def call_all(client: Client) -> dict[str, Any]:
        return {
            "echo": await client.call_tool("echo", {"text": "héllo"}),
            "served_by": await client.call_tool("served_by", {}),
            "countdown": await client.call_tool("countdown", {"steps": 2, "interval_s": 0}),
            "whoami": await client.call_tool("whoami", {}),
        }

    results = anyio.run(with_client, origin, caller, mode, call_all, responses)
    assert not any(r.is_error for r in results.values())
    assert results["echo"].structured_content == {"result": "héllo"}
    assert results["served_by"].structured_content == {"region": REGION, "server": origin.settings.server_name}
    assert results["whoami"].structured_content == {"client_id": caller.client_id, "subject": caller.subject,
                                                    "scopes": list(caller.scopes)}
    assert results["countdown"].structured_content == {"steps": 2, "message": "counted down 2 steps"}
    posts = [s for s in responses.seen if s[0] == 200]
    streamed = [ctype for _, ctype, _ in posts if ctype.startswith("text/event-stream")]
    # 2026-07-28: a handler done within the SDK's window answers JSON. Handshake era: a
    # tools/call is SSE from its first byte (the keep-alive that lets a long one outlive
    # CloudFront's read timeout); initialize and tools/list stay JSON.
    assert len(streamed) == (4 if mode == "legacy" else 0), responses.seen
    assert all(ctype.startswith(("application/json", "text/event-stream")) for _, ctype, _ in posts)
    assert len(posts) > len(streamed), responses.seen
    assert all(region == REGION for _, _, region in responses.seen)


@pytest.mark.parametrize("mode", MODES)
def test_progress_streams_over_sse_while_the_tool_runs(origin: RunningOrigin, caller: Caller, mode: str):
    responses = Responses()
    updates: list[tuple[float, float, float | None, str | None]] = []
    interval = 0.4

    class OnProgress:
        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            updates.append((time.monotonic(), progress, total, message))

    on_progress = OnProgress()

    async def run(client: Client) -> tuple[Any, float]:
        result = await client.call_tool("countdown", {"steps": 3, "interval_s": interval}, progress_callback=on_progress)
        return result, time.monotonic()

    result, finished = anyio.run(with_client, origin, caller, mode, run, responses)
    assert result.structured_content == {"steps": 3, "message": "counted down 3 steps"}
    assert [(done, total) for _, done, total, _ in updates] == [(1, 3), (2, 3), (3, 3)]
    assert updates[0][3] == "step 1 of 3"
    # Streamed, not buffered: the first notification arrived while two steps were left.
    assert finished - updates[0][0] >= interval
    assert any(status == 200 and ctype.startswith("text/event-stream") for status, ctype, _ in responses.seen)


@pytest.mark.parametrize("mode", MODES)
def test_invalid_tool_arguments_are_a_tool_error_not_a_crash(origin: RunningOrigin, caller: Caller, mode: str):
    async def call(client: Client) -> Any:
        return await client.call_tool("countdown", {"steps": 1000})

    result = anyio.run(with_client, origin, caller, mode, call)
    assert result.is_error
    assert "steps" in result.content[0].text


def test_legacy_initialize_answers_json_and_names_the_region(origin: RunningOrigin, caller: Caller):
    response = origin.post(INITIALIZE, headers=origin.headers(caller))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-mcp-edge-served-region"] == REGION
    assert response.json()["result"]["serverInfo"]["name"] == origin.settings.server_name
    assert "mcp-session-id" not in response.headers  # stateless


def test_request_log_is_structured_and_never_holds_the_token_or_the_identity(origin: RunningOrigin, caller: Caller,
                                                                            capsys: pytest.CaptureFixture[str]):
    capsys.readouterr()  # what earlier tests printed
    good = origin.post(INITIALIZE, headers=origin.headers(caller, **{"x-amzn-request-context": json.dumps(
        {"requestId": "req-123", "domainName": "x"})}))
    bad = origin.post([INITIALIZE], headers=origin.headers(caller))  # a batch: refused
    # The server thread writes a request's line after the client has the last
    # byte of the response: wait (bounded) for both lines.
    out = ""
    deadline = time.monotonic() + 10
    while out.count('"message":"request"') < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
        out += capsys.readouterr().out
    assert (good.status_code, bad.status_code) == (200, 400)
    records = [json.loads(line) for line in out.splitlines() if '"message":"request"' in line]
    by_status = {r["status"]: r for r in records}
    ok = by_status[200]
    assert list(ok)[:5] == ["level", "location", "message", "timestamp", "service"]  # Powertools' order
    assert (ok["level"], ok["service"]) == ("INFO", "mcp-origin")
    assert ok["request_id"] == "req-123"
    assert (ok["region"], ok["mcp_method"], ok["http_method"], ok["path"]) == (REGION, "initialize", "POST", "/mcp")
    assert isinstance(ok["latency_ms"], float)
    assert by_status[400]["refused"] == "protocol"
    assert caller.token not in out and caller.subject not in out and caller.client_id not in out


TOOLS_LIST = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
TOOLS_LIST_HEADERS = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}


def test_a_2026_listing_answers_plain_json_and_varies_on_origin(origin: RunningOrigin, caller: Caller):
    response = origin.post(TOOLS_LIST, headers=origin.headers(caller, **TOOLS_LIST_HEADERS))
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    assert response.json()["id"] == 7 and {t["name"] for t in response.json()["result"]["tools"]} >= {"echo"}
    assert response.headers["vary"] == "Origin"  # what the CORS middleware says when there is no Origin
    assert response.headers["x-mcp-edge-served-region"] == REGION


def test_a_2026_listing_that_refuses_sse_is_still_refused_as_the_streaming_path_does(origin: RunningOrigin,
                                                                                      caller: Caller):
    response = origin.post(TOOLS_LIST, headers=origin.headers(caller, accept="application/json",
                                                              **TOOLS_LIST_HEADERS))
    assert response.status_code == 406


def test_a_browser_request_still_gets_the_cors_answer(origin: RunningOrigin, caller: Caller):
    response = origin.post(TOOLS_LIST, headers=origin.headers(caller, origin="https://app.example",
                                                              **TOOLS_LIST_HEADERS))
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert "www-authenticate" in response.headers["access-control-expose-headers"]


def test_whoami_without_the_edges_identity_is_a_tool_error(origin: RunningOrigin):
    async def call(client: Client) -> Any:
        return await client.call_tool("whoami", {})

    result = anyio.run(with_client, origin, None, "legacy", call)
    assert result.is_error and "x-mcp-edge-subject" in result.content[0].text


def test_identity_values_the_edge_percent_encoded_are_decoded(origin: RunningOrigin):
    edge_encoded = Caller(subject="%C3%A9ve%0D%0A", client_id="%20app%20", scopes=("mcp", "files:read"))

    async def call(client: Client) -> Any:
        return await client.call_tool("whoami", {})

    result = anyio.run(with_client, origin, edge_encoded, "auto", call)
    assert result.structured_content == {"subject": "\u00e9ve\r\n", "client_id": " app ", "scopes": ["mcp", "files:read"]}


def test_the_function_urls_host_and_any_other_are_served(origin: RunningOrigin, caller: Caller):
    # The edge validated the viewer's Host; the server must not answer 421 to the Function URL's.
    for host in ("abcdefghij0123456789klmnopqrstuv.lambda-url.eu-west-1.on.aws", "127.0.0.1:9999"):
        response = origin.post(INITIALIZE, headers={**origin.headers(caller), "host": host})
        assert response.status_code == 200, (host, response.text)
