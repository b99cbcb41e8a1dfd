"""Before the server reports ready: the request path, run in process and through its socket.

The first request a fresh process serves pays for everything done once per process:
the SDK's first pass through its transports, pydantic's first validations and
serializations, Starlette's and the gate's first calls. That is init work: the
lifespan runs ``warm_up`` before uvicorn listens, so before the Web Adapter's
readiness check passes and Lambda sends the first invoke (on Lambda it is part of the
init phase, like the imports).

- ``WARM_UP_CALLS``: what clients send first, in both protocol eras and on both
  transports (``server/discover``, ``initialize``, ``tools/list``, and a
  ``tools/call`` of a tool no server can have, so that no tool runs), sent through
  the whole app. Their request log lines are built, not written (``logs.QUIET``).

Then, once uvicorn listens, ``SocketWarmUp``: the first readiness check (the Web
Adapter's, which it repeats every 10 ms until one is answered below 500, and only
then sends the first invoke) waits while ``SOCKET_CALLS`` go through the very socket
it came in on, over one keep-alive connection, as the adapter's requests do. They run
what the in-process calls cannot: uvicorn's HTTP parsing of a POST with a body, the
response paths of a sized JSON answer and of an SSE stream, the connection's
keep-alive cycle. They carry a random marker header, so their request log lines are
built, not written. Bounded by ``SOCKET_WARM_UP_TIMEOUT_S``; a server not on a
loopback address (an in-process test client) is not warmed this way.

A warm-up that fails (an answer other than the one expected) is logged and start-up
goes on: warming is never a reason not to serve.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httptools

from .logs import QUIET
from .origin_gate import ASGIApp, Message, Scope, header
from .settings import Settings

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
WARM_UP_CLIENT = "demo warm-up"
# The header that marks the socket warm-up's own requests (its value is random per process).
WARM_UP_HEADER = "x-demo-warm-up"
# What the warm-up's requests carry as Host (the server checks none: the edge does).
WARM_UP_HOST = "127.0.0.1"
# Spaces are not allowed in MCP tool names: no server registers this one, so the call
# exercises the streaming transport and the SDK answers "unknown tool" without running code.
NO_SUCH_TOOL = "origin warm-up (no such tool)"


@dataclass(frozen=True)
class WarmUpCall:
    """One request of the warm-up: a JSON-RPC message and its era's headers."""

    message: dict[str, Any]
    headers: Mapping[str, str]

    @property
    def label(self) -> str:
        return f"{self.headers.get('mcp-protocol-version', HANDSHAKE)} {self.message['method']}"


def _modern(method: str, params: dict[str, Any], **headers: str) -> WarmUpCall:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    return WarmUpCall({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}},
                      {"mcp-protocol-version": MODERN, "mcp-method": method, **headers})


def _handshake(method: str, params: dict[str, Any]) -> WarmUpCall:
    return WarmUpCall({"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      {"mcp-protocol-version": HANDSHAKE} if method != "initialize" else {})


WARM_UP_CALLS: tuple[WarmUpCall, ...] = (
    _modern("server/discover", {}),
    _modern("tools/list", {}),
    _modern("tools/call", {"name": NO_SUCH_TOOL, "arguments": {}}, **{"mcp-name": NO_SUCH_TOOL}),
    _handshake("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {},
                              "clientInfo": {"name": WARM_UP_CLIENT, "version": "1"}}),
    _handshake("tools/list", {}),
    _handshake("tools/call", {"name": NO_SUCH_TOOL, "arguments": {}}),
)


# Through the socket: an SSE stream and a sized JSON answer (the two response paths), the
# listing (what a fresh instance's first caller most often asks) last.
# Each once: every call of the warm-up runs once. Repeating the listing and the
# token check the server then ran (three times in process, three and two through the socket) only made the
# warm requests they were compared with look colder: with each request sent after the same
# pause, the first one read 0.96x the warm ones with the repeats and 0.94x without them
# (alternating cold starts, 14 each; bench/origin_bench.py's REQUEST_PAUSE_S), and they cost
# the cold start about 3 ms.
SOCKET_CALLS: tuple[WarmUpCall, ...] = (WARM_UP_CALLS[2], WARM_UP_CALLS[1])
SOCKET_WARM_UP_TIMEOUT_S = 2.0
READ_CHUNK = 65536


async def call(app: ASGIApp, host: str, headers: Mapping[str, str], body: bytes, mcp_path: str) -> tuple[int, bytes]:
    """One POST through ``app`` in process: the status and the body it answered."""
    sent: list[Message] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    done = anyio.Event()

    async def receive() -> Message:
        if pending:
            return pending.pop()
        await done.wait()  # as a server does: the client goes away once it has the answer
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    raw_headers = request_headers(host, headers, body)
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": mcp_path, "raw_path": mcp_path.encode(),
             "query_string": b"", "root_path": "", "headers": raw_headers, "client": ("127.0.0.1", 0),
             "server": ("127.0.0.1", 8080), "state": {}}
    await app(scope, receive, send)
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), 0)
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def request_headers(host: str, headers: Mapping[str, str], body: bytes) -> list[tuple[bytes, bytes]]:
    """A warm-up POST's headers: an allowed Host, JSON in, JSON or SSE out, ``headers``."""
    return [(b"host", host.encode()), (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"), (b"content-length", str(len(body)).encode()),
            *((k.encode(), v.encode()) for k, v in headers.items())]


def answered(status: int, body: bytes) -> bool:
    """A 200 carrying a JSON-RPC answer (plain JSON, or its last SSE event)."""
    if status != 200:
        return False
    text = body.decode("utf-8", "replace").strip()
    if not text.startswith("{"):
        events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = events[-1] if events else ""
    try:
        message = json.loads(text)
    except ValueError:
        return False
    return isinstance(message, dict) and ("result" in message or "error" in message)


Post = Callable[[str, Mapping[str, str], bytes], Awaitable[tuple[int, bytes]]]


async def send_calls(calls: Sequence[WarmUpCall], post: Post, host: str, base: Mapping[str, str],
                     label: str = "") -> list[str]:
    """Each call through ``post(host, headers, body)``; answers the ones not answered as expected."""
    problems = []
    for item in calls:
        status, answer = await post(host, {**base, **item.headers}, json.dumps(item.message).encode())
        if not answered(status, answer):
            problems.append(f"{label}{item.label}: answered {status} {answer[:120]!r}")
    return problems


async def warm_up(app: ASGIApp, settings: Settings, logger: Any) -> list[str]:
    """Run the warm-up; answers what did not go as expected (also logged as warnings)."""
    quiet = QUIET.set(True)
    try:
        problems = await send_calls(
            WARM_UP_CALLS, lambda h, headers, body: call(app, h, headers, body, settings.mcp_path), WARM_UP_HOST, {})
    finally:
        QUIET.reset(quiet)
    for problem in problems:
        logger.warning("warm-up incomplete", extra={"problem": problem})
    return problems


def loopback_address(server: Any) -> tuple[str, int] | None:
    """The ASGI scope's ``server`` when it is a loopback IP address and a port, else None."""
    if not (isinstance(server, Sequence) and len(server) == 2 and isinstance(server[1], int)):
        return None
    try:
        return (server[0], server[1]) if ipaddress.ip_address(server[0]).is_loopback else None
    except ValueError:  # a name ("testserver"), not an address
        return None


class _Answer:
    """httptools' callbacks for one answer: its body, and whether it ended."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.complete = False

    def on_body(self, body: bytes) -> None:
        self.chunks.append(bytes(body))

    def on_message_complete(self) -> None:
        self.complete = True


async def exchange(stream: anyio.abc.ByteStream, host: str, headers: Mapping[str, str], body: bytes,
                   mcp_path: str) -> tuple[int, bytes]:
    """One POST over ``stream`` (keep-alive): the status and the body answered.

    The answer is parsed by httptools, the C parser uvicorn serves with (run.sh's
    ``--http httptools``), already imported: h11 would cost the cold start its import
    (about 8 ms) for these few requests."""
    head = b"".join(b"%s: %s\r\n" % pair for pair in request_headers(host, headers, body))
    await stream.send(b"POST %s HTTP/1.1\r\n%s\r\n%s" % (mcp_path.encode(), head, body))
    answer = _Answer()
    parser = httptools.HttpResponseParser(answer)
    while not answer.complete:
        parser.feed_data(await stream.receive(READ_CHUNK))  # anyio.EndOfStream when the server closes
    return parser.get_status_code(), b"".join(answer.chunks)


class SocketWarmUp:
    """The server's readiness: ``await ready(scope["server"])`` before answering a
    readiness check. The first call sends ``SOCKET_CALLS`` to that address (once; later
    and concurrent calls wait for it), then every call returns at once."""

    def __init__(self, settings: Settings, logger: Any, *, timeout_s: float = SOCKET_WARM_UP_TIMEOUT_S):
        self.settings = settings
        self.logger = logger
        self.timeout_s = timeout_s
        self.done = False
        self.problems: list[str] = []
        self._marker: str | None = None  # the running warm-up's, while it runs
        self._lock = anyio.Lock()

    def sent(self, scope: Scope) -> bool:
        """Whether ``scope`` is one of the warm-up's own requests."""
        return self._marker is not None and header(scope, WARM_UP_HEADER.encode()) == self._marker

    async def ready(self, server: Any) -> None:
        if self.done:
            return
        async with self._lock:
            if self.done:
                return
            begun = time.perf_counter()
            address = loopback_address(server)
            try:
                if address is not None:
                    self.problems = await self._send(address)
            finally:
                self.done = True
                self._marker = None
            if address is not None:
                self.logger.info("readiness warm-up", extra={"calls": len(SOCKET_CALLS), "problems": len(self.problems),
                                                            "ms": round((time.perf_counter() - begun) * 1000, 1)})
            for problem in self.problems:
                self.logger.warning("warm-up incomplete", extra={"problem": problem})

    async def _send(self, address: tuple[str, int]) -> list[str]:
        mcp_path = self.settings.mcp_path
        self._marker = secrets.token_urlsafe(16)
        base = {WARM_UP_HEADER: self._marker}
        try:
            with anyio.fail_after(self.timeout_s):
                async with await anyio.connect_tcp(*address) as stream:
                    async def post(h: str, headers: Mapping[str, str], body: bytes) -> tuple[int, bytes]:
                        return await exchange(stream, h, headers, body, mcp_path)

                    return await send_calls(SOCKET_CALLS, post, WARM_UP_HOST, base, "socket ")
        except (TimeoutError, OSError, anyio.EndOfStream, httptools.HttpParserError) as exc:
            return [f"socket: {type(exc).__name__}: {exc}"[:300]]
