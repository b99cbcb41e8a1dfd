"""Real servers on loopback for the probe's tests.

- ``Loopback``: any ASGI app under uvicorn in a thread, on a free port.
- ``oauth``: an OAuth 2.0 authorization server (client credentials token endpoint,
  RS256 JWTs, JWKS), counting the tokens it issues.
- ``sdk_app``: a plain server written with the official SDK (``MCPServer``).
- ``scripted``: small hand-written MCP servers, most of them deliberately broken.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from devkit.jwks import public_jwk
from functions.probe.auth import TokenSource
from functions.probe.event import parse_event
from functions.probe.probe import ProbeSettings, run_probe
from functions.probe.wire import Deadline, new_probe_client
from tests.loopback import LoopbackServer

CLIENT_ID = "acme-mcp-probe"
CLIENT_SECRET = "s3cret-with-/:-characters"
ORIGIN_SECRET = "origin-secret-0123456789abcdef0123456789"
SERVED_REGION_HEADER = "x-mcp-edge-served-region"


class Loopback(LoopbackServer):
    """An ASGI app under uvicorn on 127.0.0.1, in a daemon thread."""

    def __init__(self, app: Any):
        # Short grace: the deliberately slow servers never finish on their own.
        super().__init__(app, lifespan="auto", graceful_shutdown_s=1)

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


# --- OAuth ---------------------------------------------------------------------------


@dataclass
class OAuthServer:
    key: rsa.RSAPrivateKey
    loopback: Loopback | None = None
    issued: list[dict[str, Any]] = field(default_factory=list)
    lifetime_s: int = 300
    client_secret: str = CLIENT_SECRET
    audience: str = "https://mcp.acme.example/mcp"
    fail_with: int | None = None
    # The iss claim (a name, not where the token endpoint happens to listen).
    issuer: str = "https://auth.acme.example/"

    @property
    def token_url(self) -> str:
        assert self.loopback is not None
        return self.loopback.url("/oauth/token")

    @property
    def jwks_url(self) -> str:
        assert self.loopback is not None
        return self.loopback.url("/.well-known/jwks.json")

    def app(self) -> Starlette:
        async def token(request: Request) -> Response:
            form = await request.form()
            if self.fail_with:
                return JSONResponse({"error": "server_error"}, status_code=self.fail_with)
            scheme, _, value = request.headers.get("authorization", "").partition(" ")
            client_id, _, secret = base64.b64decode(value).decode().partition(":") if scheme == "Basic" else ("", "", "")
            if unquote(client_id) != CLIENT_ID or unquote(secret) != self.client_secret:
                return JSONResponse({"error": "invalid_client", "error_description": "bad credentials"}, status_code=401)
            if form.get("grant_type") != "client_credentials":
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            now = int(time.time())
            claims = {"iss": self.issuer, "aud": form.get("audience"), "sub": CLIENT_ID, "client_id": CLIENT_ID,
                      "iat": now, "exp": now + self.lifetime_s, "scope": "mcp", "jti": uuid.uuid4().hex}
            self.issued.append({"form": dict(form), "claims": claims})
            token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})
            return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime_s})

        async def jwks(request: Request) -> Response:
            return JSONResponse({"keys": [public_jwk(self.key, "k1", "RS256")]})

        return Starlette(routes=[Route("/oauth/token", token, methods=["POST"]),
                                 Route("/.well-known/jwks.json", jwks)])


@pytest.fixture(scope="session")
def oauth() -> Iterator[OAuthServer]:
    server = OAuthServer(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    with Loopback(server.app()) as loopback:
        server.loopback = loopback
        yield server


def token_source(oauth: OAuthServer, clock: Callable[[], float] = time.time,
                 read_secret: Callable[[], str] | None = None) -> TokenSource:
    return TokenSource(
        token_url=oauth.token_url,
        client_id=CLIENT_ID,
        read_client_secret=read_secret or (lambda: CLIENT_SECRET),
        audience=oauth.audience,
        http=new_probe_client(),
        clock=clock,
    )


# --- the official SDK ----------------------------------------------------------------


def sdk_server() -> MCPServer:
    server = MCPServer("plain-sdk-server")

    @server.tool(description="Add two integers", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def add(a: int, b: int = Field(default=1, ge=0, description="second operand")) -> int:
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    @server.tool(title="Weather")
    def weather(city: str, days: int = 3) -> dict[str, float]:
        """Forecast temperatures."""
        return {"today": 21.5}

    return server


@pytest.fixture(scope="session", params=[False, True], ids=["sse-capable", "json-response"])
def sdk_app(request: pytest.FixtureRequest) -> Iterator[Loopback]:
    app = sdk_server().streamable_http_app(stateless_http=True, json_response=request.param)
    with Loopback(app) as loopback:
        yield loopback


# --- scripted servers ----------------------------------------------------------------

Handler = Callable[[Request, dict[str, Any]], Awaitable[Response]]
TOOLS = [
    {"name": "beta", "description": "Second", "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    {"name": "alpha", "description": "First", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
]


def rpc_result(body: dict[str, Any], result: dict[str, Any], **headers: str) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "result": result}, headers=headers)


def rpc_error(body: dict[str, Any], code: int, message: str, status: int = 200, data: Any = None) -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error}, status_code=status)


@dataclass
class Scripted:
    """A hand-written MCP endpoint: ``handle(request, body)`` answers each POST."""

    handle: Handler
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def endpoint(request: Request) -> Response:
            raw = await request.body()
            body = json.loads(raw) if raw else None
            self.requests.append((request.method, dict(request.headers), body))
            if request.method == "DELETE":
                return Response(status_code=200)
            return await self.handle(request, body or {})

        return Starlette(routes=[Route("/mcp", endpoint, methods=["POST", "DELETE"])])

    def methods(self) -> list[str]:
        return [str(b.get("method")) if isinstance(b, dict) else m for m, _, b in self.requests]


@pytest.fixture
def scripted() -> Iterator[Callable[[Handler], Loopback]]:
    """Start a scripted server: ``url = scripted(handler).url()``; stopped after the test."""
    running: list[Loopback] = []

    def start(handle: Handler) -> Loopback:
        script = Scripted(handle)
        loopback = Loopback(script.app()).__enter__()
        loopback.script = script  # type: ignore[attr-defined]
        running.append(loopback)
        return loopback

    yield start
    for loopback in running:
        loopback.__exit__(None, None, None)


async def modern(request: Request, body: dict[str, Any], tools: list[dict[str, Any]] = TOOLS) -> Response:
    """A correct 2026-07-28-only endpoint."""
    method = body.get("method")
    if method == "initialize":
        return rpc_error(body, -32022, "Unsupported protocol version", 400, {"supported": ["2026-07-28"]})
    if request.headers.get("mcp-protocol-version") != "2026-07-28" or request.headers.get("mcp-method") != method:
        return rpc_error(body, -32001, "header mismatch", 400)
    meta = (body.get("params") or {}).get("_meta") or {}
    if meta.get("io.modelcontextprotocol/protocolVersion") != "2026-07-28":
        return rpc_error(body, -32602, "missing _meta envelope", 400)
    if method == "server/discover":
        return rpc_result(body, {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}})
    if method == "tools/list":
        return rpc_result(body, {"tools": tools}, **{SERVED_REGION_HEADER: "eu-west-1"})
    return rpc_error(body, -32601, "Method not found", 404)


def sse(*events: str, keep_open_s: float = 0.0, gap_s: float = 0.01) -> StreamingResponse:
    async def stream():
        for event in events:
            yield event.encode()
            await anyio.sleep(gap_s)
        await anyio.sleep(keep_open_s)

    return StreamingResponse(stream(), media_type="text/event-stream")


def legacy_only_wrapper(app: Any) -> Any:
    """Put a modern-capable ASGI app behind a gate that answers 2026-07-28 requests the
    way a handshake-era server does (400 for an unknown MCP-Protocol-Version)."""

    async def gated(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"mcp-protocol-version") == b"2026-07-28":
                body = {"jsonrpc": "2.0", "id": "server-error",
                        "error": {"code": -32600, "message": "Bad Request: Unsupported protocol version: 2026-07-28"}}
                await JSONResponse(body, status_code=400)(scope, receive, send)
                return
        await app(scope, receive, send)

    return gated


def origin_settings(oauth: OAuthServer) -> Any:
    """Settings of the demo server (the default origin); it checks no token (the edge does),
    so ``oauth`` only mints the probe's."""
    from examples.demo.demo_server.settings import Settings

    return Settings.from_env({"SERVED_REGION": "eu-west-1", "MCP_SERVER_NAME": "acme-mcp"})


# --- running a probe -----------------------------------------------------------------


def probe(url: str, *, deadline_s: float = 5.0, tokens: TokenSource | None = None, target: str = "origin",
          region: str = "eu-west-1", pin: str | None = None, secret: str | None = None,
          degraded_ms: float = 60000, needs_secret: bool = False) -> dict[str, Any]:
    event = {"endpoint": url, "serverId": "acme-mcp", "target": target, "targetRegion": region,
             "pinRegion": pin, "needsOriginSecret": needs_secret}
    settings = ProbeSettings(deadline_s=deadline_s, degraded_latency_ms=degraded_ms, probe_region="us-east-1",
                             origin_secret=secret)
    return run_probe(parse_event(event), settings, tokens, new_probe_client, Deadline(deadline_s))
