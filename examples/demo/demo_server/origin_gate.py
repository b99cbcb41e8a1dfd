"""What stands in front of the SDK, as one ASGI middleware.

Order, outermost first:
1. every response names the region that served it (a header), and one structured
   log line per request records request id, region, MCP method, status, latency;
2. ``/healthz`` answers 200 (the Web Adapter's readiness check; no data), the first
   time once the readiness work is done (``warm_up.SocketWarmUp``);
3. Host must match the policy (403 otherwise);
4. CORS preflight is answered here, before any lock or token (for the protected
   resource metadata, from any origin);
5. the origin lock: the origin secret header (CloudFront and the probes send it)
   or 403, so the public Function URL cannot bypass the edge;
6. the protected resource metadata (RFC 9728) at both well-known paths, no token;
7. on the MCP path only POST is served (405 otherwise: the legacy GET stream would
   hold a Lambda invocation open until its timeout);
8. with a valid token, a batch, an unsupported protocol version or a missing or
   mismatched ``Mcp-Method``/``Mcp-Name`` header gets an error naming what is wrong and
   what is accepted (``protocol_errors``); a ``tools/call`` of a tool that needs scopes
   the token lacks is answered 403 ``insufficient_scope`` with the step-up challenge
   (``resource_server``);
9. the request goes to one of two SDK apps sharing one ``MCPServer``: the
   streaming one (SSE when a handler emits or runs long) for 2026-07-28 requests whose
   handler may emit (``tools/call``, ``resources/read``, ``prompts/get``, any method not
   known to be silent) and for handshake-era requests that run a handler, from a client
   that accepts SSE (keep-alives, so a long call outlives CloudFront's read timeout;
   ``keepalive``); the plain-JSON one for every other request, the 2026-07-28 listings
   and ``server/discover`` included (the same answer, without the streaming transport's
   task group). The SDK's bearer auth (401 with ``resource_metadata``) and Host check
   run inside both.

CORS: a request without ``Origin`` (every non-browser client, CloudFront's probes)
skips Starlette's CORS middleware, whose only effect on it would be
``Vary: Origin``; the gate adds that header itself (``vary_on_origin``).

Two answers about tokens are the gate's own: more than one ``Authorization`` header
reaches the SDK as none (401, as the edge refuses it), and a token refused because
the issuer's key set is unavailable gets 503 with ``Retry-After`` instead of the
SDK's 401 (the token may be valid: the client should retry, not re-authorize).
"""

from __future__ import annotations

import contextvars
import hmac
import json
import math
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.middleware.cors import CORSMiddleware

from .contract import CORS_ALLOW_HEADERS, CORS_ALLOW_METHODS, CORS_MAX_AGE_S
from .hosts import HostPolicy
from .keepalive import accepts_sse, handshake_request_streams
from .protocol_errors import rejection
from .resource_server import METADATA_CORS, ScopeCheck, called_tool, metadata_body, metadata_paths
from .settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEALTH_PATH = "/healthz"


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
    auth_failure: str | None = None
    retry_after_s: float | None = None  # set when the key set, not the token, failed


CURRENT_REQUEST: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar("mcp_request", default=None)


def note_auth_failure(reason: Exception | str) -> None:
    """Called by the token verifier: the reason goes into this request's log line
    (and a key-set failure's ``retry_after_s`` turns the 401 into a 503)."""
    record = CURRENT_REQUEST.get()
    if record is not None:
        record.auth_failure = str(reason)
        retry_after = getattr(reason, "retry_after_s", None)
        if isinstance(retry_after, int | float):
            record.retry_after_s = float(retry_after)


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


async def bytes_response(send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...],
                         *, head: bool = False) -> None:
    start_headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json"), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


class OriginGate:
    def __init__(self, app: ASGIApp, *, settings: Settings, streaming: ASGIApp, plain: ASGIApp,
                 log: RequestLogger, scope_check: ScopeCheck | None = None,
                 readiness: Readiness | None = None):
        self.app = app  # the shell's router: only lifespan events reach it
        self.settings = settings
        self.readiness = readiness
        self.scope_check = scope_check
        self.metadata_paths = metadata_paths(settings)
        self.metadata = metadata_body(settings)
        self.streaming = streaming
        self.plain = plain
        self.log = log
        self.hosts = HostPolicy(settings.allowed_hosts)
        self.secrets = tuple(s.encode() for s in settings.origin_secrets)
        self.secret_header = settings.origin_secret_header.encode()
        self.region_header = (settings.served_region_header.encode(), settings.served_region.encode())
        self.mcp_path = settings.mcp_path
        self.cors = CORSMiddleware(
            self._locked,
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
        replaced = False

        async def name_region(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                headers = list(message.get("headers", ()))
                headers.append(self.region_header)
                record.streamed = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in headers)
                message = {**message, "headers": headers}
            await send(message)

        async def send_naming_region(message: Message) -> None:
            nonlocal replaced
            if replaced:
                return  # the body of the 401 a 503 replaced
            if message["type"] == "http.response.start" and message["status"] == 401 and record.retry_after_s is not None:
                replaced = True
                await plain_response(
                    name_region, 503,
                    {"error": "temporarily_unavailable",
                     "error_description": "The issuer's signing keys are unavailable; retry later"},
                    headers=((b"retry-after", str(max(1, math.ceil(record.retry_after_s))).encode()),))
                return
            await name_region(message)

        try:
            await self._serve(scope, receive, send_naming_region, record)
        finally:
            CURRENT_REQUEST.reset(token)
            # The readiness work's own requests: their line is built (that path warmed too), not written.
            self.log(record, (time.perf_counter() - started) * 1000, written=not own)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, record: RequestRecord) -> None:
        if scope["path"] == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            if self.readiness is not None:
                await self.readiness.ready(scope.get("server"))
            await plain_response(send, 200, {"status": "ok", "region": self.settings.served_region})
            return
        if not self.hosts.allows(header(scope, b"host")):
            record.refused = "host"
            # 403 (the SDK would say 421): a Host we do not serve is refused like a
            # request that bypasses the edge.
            await plain_response(send, 403, {"error": "forbidden", "error_description": "Invalid Host header"})
            return
        if scope["path"] in self.metadata_paths and scope["method"] == "OPTIONS":
            await plain_response(send, 204, headers=METADATA_CORS)
            return
        if header(scope, b"origin") is not None:
            await self.cors(scope, receive, send)
            return

        async def send_varying(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": vary_on_origin(list(message.get("headers", ())))}
            await send(message)

        await self._locked(scope, receive, send_varying)

    async def _locked(self, scope: Scope, receive: Receive, send: Send) -> None:
        record = CURRENT_REQUEST.get()
        assert record is not None
        presented = header(scope, self.secret_header)
        if presented is None or not any(hmac.compare_digest(presented.encode(), s) for s in self.secrets):
            record.refused = "origin secret"
            await plain_response(send, 403, {"error": "forbidden", "error_description": "Requests must come through the edge"})
            return
        if scope["path"] in self.metadata_paths:
            if scope["method"] not in ("GET", "HEAD"):
                await plain_response(send, 405, {"error": "method_not_allowed", "error_description":
                                                 "The protected resource metadata is served to GET"},
                                     headers=((b"allow", b"GET, HEAD, OPTIONS"),))
                return
            await bytes_response(send, 200, self.metadata, ((b"cache-control", b"public, max-age=300"), *METADATA_CORS),
                                 head=scope["method"] == "HEAD")
            return
        if scope["path"] != self.mcp_path:
            await self.plain(scope, receive, send)  # 404
            return
        if sum(1 for key, _ in scope["headers"] if key == b"authorization") > 1:
            # Which one would count is ambiguous (the SDK reads the first): none does.
            record.auth_failure = "more than one Authorization header"
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"authorization"]}
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
        if await self._refused_for_protocol(scope, send, record, version, message):
            return
        if modern:
            era_headers = {"mcp-protocol-version": version, "mcp-method": record.mcp_method,
                           "mcp-name": header(scope, b"mcp-name")}
            if await self._refused_for_scope(scope, send, record, called_tool(era_headers, None)):
                return
            target = self.streaming if modern_wants_stream(record.mcp_method, header(scope, b"accept")) else self.plain
            await target(scope, replay(messages, receive), send)
            return
        if await self._refused_for_scope(scope, send, record, called_tool({}, message)):
            return
        target = self.streaming if handshake_request_streams(message, header(scope, b"accept")) else self.plain
        await target(scope, replay(messages, receive), send)

    async def _refused_for_protocol(self, scope: Scope, send: Send, record: RequestRecord, version: str | None,
                                    message: Any) -> bool:
        found = rejection(version, header(scope, b"mcp-method"), header(scope, b"mcp-name"), message)
        if found is None:
            return False
        # Authorization applies to every request: without a valid token the SDK answers 401.
        if self.scope_check is not None and await self.scope_check.token(header(scope, b"authorization")) is None:
            return False
        record.refused = "protocol"
        await plain_response(send, 400, found.body())
        return True

    async def _refused_for_scope(self, scope: Scope, send: Send, record: RequestRecord, tool: str | None) -> bool:
        if self.scope_check is None or tool is None:
            return False
        refusal = await self.scope_check.refusal(header(scope, b"authorization"), tool)
        if refusal is None:
            return False
        status, body, headers = refusal
        record.refused = "insufficient scope"
        await plain_response(send, status, body, headers)
        return True
