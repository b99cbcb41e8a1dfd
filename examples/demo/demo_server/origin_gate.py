"""What stands in front of the SDK, as one ASGI middleware.

Order, outermost first:
1. every response names the region that served it (a header), and one structured
   log line per request records request id, region, MCP method, status, latency;
2. the readiness check (``GET /``, the Web Adapter's default, and ``GET /healthz``)
   answers 200, the first time once the readiness work is done (``warm_up.SocketWarmUp``);
3. CORS preflight and browser requests go through Starlette's CORS middleware;
4. on the MCP path only POST is served (405 otherwise: the legacy GET stream would
   hold a Lambda invocation open until its timeout);
5. a batch, an unsupported protocol version or a missing or mismatched
   ``Mcp-Method``/``Mcp-Name`` header gets an error naming what is wrong and what is
   accepted (``protocol_errors``);
6. the request goes to one of two SDK apps sharing one ``MCPServer``: the
   streaming one (SSE when a handler emits or runs long) for 2026-07-28 requests whose
   handler may emit (``tools/call``, ``resources/read``, ``prompts/get``, any method not
   known to be silent) and for handshake-era requests that run a handler, from a client
   that accepts SSE (keep-alives, so a long call outlives CloudFront's read timeout;
   ``keepalive``); the plain-JSON one for every other request, the 2026-07-28 listings
   and ``server/discover`` included (the same answer, without the streaming transport's
   task group).

What is not here, because the edge does it before a request can reach this server:
the bearer token's verification and per-tool scopes, the protected resource metadata,
the viewer's Host and the origin lock (the Function URL takes only requests signed by
the edge's or a probe's role).

CORS: a request without ``Origin`` (every non-browser client, the probes) skips
Starlette's CORS middleware, whose only effect on it would be ``Vary: Origin``; the
gate adds that header itself (``vary_on_origin``).
"""

from __future__ import annotations

import contextvars
import json
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.middleware.cors import CORSMiddleware

from .keepalive import accepts_sse, handshake_request_streams
from .protocol_errors import rejection
from .settings import CORS_ALLOW_HEADERS, CORS_ALLOW_METHODS, CORS_MAX_AGE_S, Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEALTH_PATH = "/healthz"
# The Web Adapter's default readiness path (the stack's server.readinessPath may name /healthz).
READINESS_PATHS = frozenset({"/", HEALTH_PATH})


class RequestLogger(Protocol):
    """The request log (``logs.RequestLog``): one line per request; ``written=False``
    builds it without writing it (the origin's own warm-up requests)."""

    def __call__(self, record: RequestRecord, latency_ms: float, *, written: bool = True) -> None: ...


class Readiness(Protocol):
    """What the readiness check waits for (``warm_up.SocketWarmUp``)."""

    async def ready(self, server: Any) -> None: ...

    def sent(self, scope: Scope) -> bool:
        """Whether a request is the readiness work's own (its log line is built, not written)."""
        ...


@dataclass
class RequestRecord:
    """What the request log line says about one request (never a token)."""

    request_id: str
    method: str
    path: str
    mcp_method: str | None = None
    protocol_version: str | None = None
    status: int | None = None
    streamed: bool = False
    refused: str | None = None


CURRENT_REQUEST: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar("mcp_request", default=None)


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def request_id_of(scope: Scope) -> str:
    """Lambda's request id (the Web Adapter passes the Function URL request context),
    else a fresh one (local runs)."""
    context = header(scope, b"x-amzn-request-context")
    if context:
        try:
            rid = json.loads(context).get("requestId")
        except (ValueError, AttributeError):
            rid = None
        if isinstance(rid, str) and rid:
            return rid[:128]
    return uuid.uuid4().hex


# 2026-07-28 methods the SDK answers from the server's registries, running no code of
# ours that could emit a notification: they take the plain-JSON path. Anything else
# (tools/call, resources/read, prompts/get, completion/complete, a method added later)
# keeps the streaming path, which answers JSON too unless the handler emits.
SILENT_MODERN_METHODS = frozenset({
    "server/discover", "ping", "tools/list", "resources/list", "resources/templates/list", "prompts/list",
})


def modern_wants_stream(mcp_method: str | None, accept: str | None) -> bool:
    """A 2026-07-28 request for the streaming path: one whose handler may emit, or
    one the streaming path would refuse (406) and the plain one would not."""
    return mcp_method not in SILENT_MODERN_METHODS or not accepts_sse(accept)


def vary_on_origin(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Response headers with ``Origin`` added to ``Vary``, as Starlette's CORS middleware
    answers a request that has no ``Origin``: one ``vary`` header with the existing values
    first (header names lower-case, as ASGI apps send them and Starlette matches them)."""
    values = [v for k, v in headers if k == b"vary"]
    if not values:
        return [*headers, (b"vary", b"Origin")]
    rest = [(k, v) for k, v in headers if k != b"vary"]
    return [*rest, (b"vary", b", ".join([*values, b"Origin"]))]




async def plain_response(send: Send, status: int, body: dict[str, Any] | None = None,
                         headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    data = json.dumps(body).encode() if body is not None else b""
    start_headers = [(b"content-length", str(len(data)).encode()), *headers]
    if body is not None:
        start_headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": data})


class BodyTooLargeError(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> tuple[bytes, list[Message]]:
    """The whole request body (up to ``limit`` bytes) and the messages to replay."""
    chunks: list[bytes] = []
    size = 0
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks), messages


def replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


class OriginGate:
    def __init__(self, app: ASGIApp, *, settings: Settings, streaming: ASGIApp, plain: ASGIApp,
                 log: RequestLogger, readiness: Readiness | None = None):
        self.app = app  # the shell's router: only lifespan events reach it
        self.settings = settings
        self.readiness = readiness
        self.streaming = streaming
        self.plain = plain
        self.log = log
        self.region_header = (settings.served_region_header.encode(), settings.served_region.encode())
        self.mcp_path = settings.mcp_path
        self.cors = CORSMiddleware(
            self._mcp,
            allow_origins=list(settings.allowed_origins),
            allow_methods=list(CORS_ALLOW_METHODS),
            allow_headers=list(CORS_ALLOW_HEADERS),
            expose_headers=["mcp-session-id", "www-authenticate", settings.served_region_header],
            max_age=CORS_MAX_AGE_S,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        record = RequestRecord(request_id=request_id_of(scope), method=scope["method"], path=scope["path"])
        token = CURRENT_REQUEST.set(record)
        own = self.readiness is not None and self.readiness.sent(scope)

        async def name_region(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                headers = list(message.get("headers", ()))
                headers.append(self.region_header)
                record.streamed = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in headers)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self._serve(scope, receive, name_region)
        finally:
            CURRENT_REQUEST.reset(token)
            # The readiness work's own requests: their line is built (that path warmed too), not written.
            self.log(record, (time.perf_counter() - started) * 1000, written=not own)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] in READINESS_PATHS and scope["method"] in ("GET", "HEAD"):
            if self.readiness is not None:
                await self.readiness.ready(scope.get("server"))
            await plain_response(send, 200, {"status": "ok", "region": self.settings.served_region})
            return
        if header(scope, b"origin") is not None:
            await self.cors(scope, receive, send)
            return

        async def send_varying(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": vary_on_origin(list(message.get("headers", ())))}
            await send(message)

        await self._mcp(scope, receive, send_varying)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        record = CURRENT_REQUEST.get()
        assert record is not None
        if scope["path"] != self.mcp_path:
            await self.plain(scope, receive, send)  # 404
            return
        if scope["method"] != "POST":
            record.refused = "method"
            await plain_response(send, 405, {"error": "method_not_allowed",
                                             "error_description": "This stateless MCP endpoint serves POST only"},
                                 headers=((b"allow", b"POST, OPTIONS"),))
            return
        version = header(scope, b"mcp-protocol-version")
        record.protocol_version = version
        modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        try:
            body, messages = await read_body(receive, self.settings.max_body_bytes)
        except BodyTooLargeError:
            record.refused = "body too large"
            await plain_response(send, 413, {"error": "request_too_large",
                                             "error_description": f"Request body over {self.settings.max_body_bytes} bytes"})
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            message = None  # the SDK answers the parse error
        if modern:
            record.mcp_method = header(scope, b"mcp-method")
        elif isinstance(message, dict) and isinstance(message.get("method"), str):
            record.mcp_method = message["method"][:64]
        found = rejection(version, header(scope, b"mcp-method"), header(scope, b"mcp-name"), message)
        if found is not None:
            record.refused = "protocol"
            await plain_response(send, 400, found.body())
            return
        if modern:
            wants_stream = modern_wants_stream(record.mcp_method, header(scope, b"accept"))
        else:
            wants_stream = handshake_request_streams(message, header(scope, b"accept"))
        await (self.streaming if wants_stream else self.plain)(scope, replay(messages, receive), send)
