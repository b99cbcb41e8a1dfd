"""What Lambda does to a server, done locally (issue 39): requests spread over two instances
of the server, the Function URL's own Host, and the advice (functions/probe/advice.py) a
stateful or Host-checking server earns. Real SDK servers (the MCP Python SDK's MCPServer,
with its defaults and with each fix) behind the local Function URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from edge.gate import signing
from functions.probe.advice import host_check_advice, stateful_server_advice
from local.aws.function_url import FunctionUrl, function_url_host
from local.supervisor import free_ports
from tests.local.aws.test_function_url import CREDS, ENVIRON, REGION
from tests.local.conftest import serve

HOST = function_url_host("0123456789abcdefghijklmnopqrstuv", REGION)
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


class Url:
    """A local Function URL in front of ``apps`` (one uvicorn each), signed requests to it."""

    def __init__(self, port: int, notices: Path):
        self.base, self.notices = f"http://127.0.0.1:{port}", notices

    def post(self, message: dict, headers: dict[str, str] | None = None) -> httpx.Response:
        body = json.dumps(message).encode()
        signed = signing.signature_headers("POST", "/mcp", "", self.base.removeprefix("http://"), body, REGION,
                                           ENVIRON)
        return httpx.post(self.base + "/mcp", content=body, headers={
            **signed, "content-type": "application/json", "accept": ACCEPT, **(headers or {})})

    def notice(self, kind: str) -> str | None:
        path = self.notices / f"{kind}.{REGION}"
        return path.read_text().strip() if path.exists() else None


@pytest.fixture
def behind_url(tmp_path: Path) -> Iterator[callable]:  # type: ignore[valid-type]
    with ExitStack() as stack:
        def start(*apps: object) -> Url:
            *origin_ports, url_port = free_ports(len(apps) + 1)
            for app, port in zip(apps, origin_ports, strict=True):
                stack.enter_context(serve(app, port))
            url = FunctionUrl([f"http://127.0.0.1:{p}" for p in origin_ports], REGION, CREDS, host=HOST,
                              notices=tmp_path / "notices")
            stack.enter_context(serve(url, url_port))
            return Url(url_port, tmp_path / "notices")
        yield start


def sdk_app(**options: object) -> Starlette:
    """The MCP Python SDK's quickstart server: one tool, the SDK's defaults unless ``options`` say otherwise."""
    server = MCPServer("quickstart")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    return server.streamable_http_app(**options)  # type: ignore[arg-type]


NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def test_requests_take_the_instances_in_turn_and_reach_them_with_the_function_urls_host(behind_url) -> None:
    seen: list[tuple[str, str]] = []

    def instance(name: str) -> Starlette:
        async def mcp(request: Request) -> Response:
            seen.append((name, request.headers["host"]))
            return JSONResponse({})
        return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])

    url = behind_url(instance("a"), instance("b"))
    for _ in range(4):
        assert url.post(TOOLS_LIST).status_code == 200
    assert [name for name, _ in seen] == ["a", "b", "a", "b"]
    assert {host for _, host in seen} == {HOST}
    assert url.notice("stateful") is None and url.notice("host-check") is None


def test_the_sdks_default_host_check_fails_locally_as_on_lambda_with_the_advice(behind_url) -> None:
    url = behind_url(sdk_app(stateless_http=True))
    refused = url.post(INITIALIZE)
    assert refused.status_code == 421
    assert url.notice("host-check") == host_check_advice(421, refused.text)
    assert "enable_dns_rebinding_protection=False" in (url.notice("host-check") or "")


def test_a_stateful_sdk_server_fails_on_the_second_instance_with_the_advice(behind_url) -> None:
    url = behind_url(sdk_app(transport_security=NO_HOST_CHECK), sdk_app(transport_security=NO_HOST_CHECK))
    initialized = url.post(INITIALIZE)
    assert initialized.status_code == 200 and "mcp-session-id" in initialized.headers
    listed = url.post(TOOLS_LIST, {"mcp-session-id": initialized.headers["mcp-session-id"],
                                   "mcp-protocol-version": "2025-06-18"})
    # The other instance never saw the session: what a client gets on Lambda.
    assert listed.status_code in (400, 404)
    assert url.notice("stateful") == stateful_server_advice()


def test_the_same_server_made_stateless_and_host_agnostic_passes(behind_url) -> None:
    options = {"transport_security": NO_HOST_CHECK, "stateless_http": True, "json_response": True}
    url = behind_url(sdk_app(**options), sdk_app(**options))
    assert url.post(INITIALIZE).status_code == 200
    for _ in range(2):  # one on each instance
        listed = url.post(TOOLS_LIST, {"mcp-protocol-version": "2025-06-18"})
        assert listed.status_code == 200 and [t["name"] for t in listed.json()["result"]["tools"]] == ["add"]
    assert url.notice("stateful") is None and url.notice("host-check") is None


# --- the advice itself ---------------------------------------------------------------------------


def test_the_stateful_advice_names_the_setting_of_each_common_sdk() -> None:
    advice = stateful_server_advice()
    assert "mcp-session-id" in advice and "Session not found" in advice
    for setting in ("stateless_http=True", "stateless=True", "sessionIdGenerator: undefined"):
        assert setting in advice


@pytest.mark.parametrize(("status", "body"), [
    (421, "Invalid Host header"),  # the Python SDK
    (421, ""),
    (403, '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Invalid Host: abc.lambda-url.eu-west-1.on.aws"},"id":null}'),
    (403, "Invalid Host header: x"),
])
def test_a_host_check_refusal_gets_the_advice_naming_both_sdks(status: int, body: str) -> None:
    advice = host_check_advice(status, body)
    assert advice is not None and f"answered {status}" in advice
    assert "lambda-url" in advice and "TransportSecuritySettings" in advice and "TypeScript" in advice


@pytest.mark.parametrize(("status", "body"), [
    (403, '{"error":"insufficient_scope"}'), (403, "Invalid Origin header"), (200, "Invalid Host"), (404, ""),
    (400, "Missing session ID"),
])
def test_other_answers_get_no_host_advice(status: int, body: str) -> None:
    assert host_check_advice(status, body) is None
