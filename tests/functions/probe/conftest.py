"""Real servers on loopback for the probe's tests.

- ``Loopback``: any ASGI app under uvicorn in a thread, on a free port.
- ``oauth``: an OAuth 2.0 authorization server (client credentials token endpoint,
  RS256 JWTs, JWKS), counting the tokens it issues.
- ``sdk_app``: a plain server written with the official SDK (``MCPServer``).
- ``scripted``: small hand-written MCP servers, most of them deliberately broken.
- ``FunctionUrl`` and ``Edge``: what stands in front of a server on AWS, on loopback: a
  Function URL with AuthType AWS_IAM (verifies SigV4 with botocore, independently of the
  probe's signer, then restores the side header's token as the Web Adapter does) and the
  edge's token check (the signature against the issuer's key); each can be "left open"
  to break the platform's promise.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
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
from functions.contract import PROBE_CHECK_HEADER, PROBE_TOKEN_HEADER, REFUSAL_HEADER
from functions.probe.auth import TokenSource
from functions.probe.event import parse_event
from functions.probe.forge import forge
from functions.probe.probe import HandshakeChecks, ProbeSettings, Signer, run_probe
from functions.probe.promise import probe_check_proof
from functions.probe.secrets_manager import Credentials
from functions.probe.sigv4 import FunctionUrlSigner
from functions.probe.wire import Deadline, new_probe_client
from tests.loopback import LoopbackServer

CLIENT_ID = "acme-mcp-probe"
CLIENT_SECRET = "s3cret-with-/:-characters"
# The probe role's credentials, as Lambda hands them over (session credentials).
ROLE_CREDENTIALS = Credentials("ASIAPROBEROLEEXAMPLE", "probe-role-secret-access-key", "probe-role-session-token")
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
        return rpc_error(body, -32020, "header mismatch", 400)
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


# --- running a probe -----------------------------------------------------------------




def probe(url: str, *, deadline_s: float = 5.0, tokens: TokenSource | None = None, target: str = "origin",
          region: str = "eu-west-1", pin: str | None = None, degraded_ms: float = 60000, signed: bool = False,
          sign: Signer | None = None, forged_token: Any = forge, handshake: HandshakeChecks | None = None) -> dict[str, Any]:
    event = {"endpoint": url, "serverId": "acme-mcp", "target": target, "targetRegion": region,
             "pinRegion": pin, "signed": signed}
    settings = ProbeSettings(deadline_s=deadline_s, degraded_latency_ms=degraded_ms, probe_region="us-east-1")
    if signed and sign is None:
        sign = FunctionUrlSigner(region, ROLE_CREDENTIALS)
    return run_probe(parse_event(event), settings, tokens, new_probe_client, Deadline(deadline_s),
                     sign=sign, forged_token=forged_token, handshake=handshake)


# --- what stands in front of a server ---------------------------------------------------

_SIGV4 = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})")


def sigv4_problem(method: str, url: str, headers: dict[str, str], body: bytes, credentials: Credentials,
                  region: str) -> str | None:
    """Why the request is not SigV4-signed for Lambda in ``region`` by ``credentials``
    (None: it is), recomputed with botocore from what arrived, as a Function URL does."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    match = _SIGV4.fullmatch(headers.get("authorization", ""))
    if match is None:
        return "no SigV4 Authorization header"
    key, date, signed_region, service, signed, signature = match.groups()
    if key != credentials.access_key:
        return f"unknown access key {key}"
    if (signed_region, service) != (region, "lambda"):
        return f"signed for {service} in {signed_region}, not lambda in {region}"
    if headers.get("x-amz-content-sha256") != hashlib.sha256(body).hexdigest():
        return "x-amz-content-sha256 is not the body's SHA-256"
    names = signed.split(";")
    required = {"host", "x-amz-date", "x-amz-content-sha256"} | ({"x-amz-security-token"} if credentials.token else set())
    if not required <= set(names) or any(n not in headers for n in names):
        return f"signed headers {names} do not cover {sorted(required)}"
    if headers.get("x-amz-security-token", "") != (credentials.token or ""):
        return "wrong session token"
    if not headers["x-amz-date"].startswith(date):
        return "credential scope date differs from x-amz-date"
    request = AWSRequest(method=method, url=url, data=body, headers={n: headers[n] for n in names})
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(BotoCredentials(key, credentials.secret_key, credentials.token), "lambda", region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    return None if hmac.compare_digest(expected, signature) else "signature does not match"


async def _read_body(receive: Any) -> bytes:
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


def _replay(body: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await anyio.sleep_forever()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _with_headers(scope: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    return {**scope, "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]}


async def _refuse(send: Any, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    await JSONResponse(body, status_code=status, headers=headers)({"type": "http"}, _replay(b""), send)


@dataclass
class FunctionUrl:
    """A Function URL with AuthType AWS_IAM in front of ``app`` (ASGI): a request SigV4-signed for
    Lambda in ``region`` by ``credentials`` goes on, with the token from
    ``x-mcp-edge-authorization`` restored into ``Authorization`` (the Web Adapter's
    AWS_LWA_AUTHORIZATION_SOURCE); anything else gets 403 (``refusal_status``). ``open``: AuthType
    NONE, every request goes on."""

    app: Any
    region: str = "eu-west-1"
    credentials: Credentials = ROLE_CREDENTIALS
    open: bool = False
    refusal_status: int = 403
    # (method, headers as they arrived, why refused or None)
    seen: list[tuple[str, dict[str, str], str | None]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body = await _read_body(receive)
        headers = _headers(scope)
        query = f"?{scope['query_string'].decode()}" if scope.get("query_string") else ""
        url = f"http://{headers.get('host', '')}{scope['path']}{query}"
        problem = None if self.open else sigv4_problem(scope["method"], url, headers, body, self.credentials,
                                                      self.region)
        self.seen.append((scope["method"], headers, problem))
        if problem is not None:
            return await _refuse(send, self.refusal_status, {"Message": "Forbidden"})
        inner = {k: v for k, v in headers.items() if k != "authorization"}
        if token := inner.pop("x-mcp-edge-authorization", None):
            inner["authorization"] = token
        await self.app(_with_headers(scope, inner), _replay(body), send)


@dataclass
class Edge:
    """The edge's token check in front of ``app``: a bearer token signed by ``oauth``'s key
    (with its issuer and audience) goes on, anything else gets 401 (``status``) marked as the edge's own
    (``REFUSAL_HEADER: invalid-token``; ``mark``: that header's value, None: unmarked), with
    the gate's proof for the probes' token in ``PROBE_TOKEN_HEADER`` (``proof``: "digest", the
    real one; another string, sent as it is; None: none). ``open``: the check is missing,
    every request goes on."""

    app: Any
    oauth: OAuthServer
    open: bool = False
    mark: str | None = "invalid-token"
    proof: str | None = "digest"
    status: int = 401
    # (authorization header, refused)
    seen: list[tuple[str, bool]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        authorization = _headers(scope).get("authorization", "")
        refused = False
        if not self.open:
            try:
                jwt.decode(authorization.removeprefix("Bearer "), self.oauth.key.public_key(), algorithms=["RS256"],
                           audience=self.oauth.audience, issuer=self.oauth.issuer)
            except jwt.PyJWTError:
                refused = True
        self.seen.append((authorization, refused))
        if refused:
            marked = {} if self.mark is None else {REFUSAL_HEADER: self.mark}
            probe_token = _headers(scope).get(PROBE_TOKEN_HEADER)
            if probe_token is not None and self.proof is not None:
                marked[PROBE_CHECK_HEADER] = probe_check_proof(probe_token) if self.proof == "digest" else self.proof
            return await _refuse(send, self.status, {"error": "invalid_token"}, marked)
        await self.app(scope, receive, send)
