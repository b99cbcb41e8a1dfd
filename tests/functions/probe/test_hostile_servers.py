"""Hostile MCP servers on loopback, at the wire: whatever a server does, the probe ends
within its deadline with one of its typed errors, on the main thread (where the
handler's SIGALRM watchdog exists) and off it (where only the transport can hold the
deadline, as the local workers run it).

The servers are raw sockets, so they can do what no framework would: trickle header
bytes, never finish, send gzip bombs, lie about ids, page forever.
"""

from __future__ import annotations

import functools
import json
import socket
import socketserver
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest

from functions.probe import handler as probe_handler
from functions.probe.auth import MAX_TOKEN_RESPONSE_BYTES, TokenSource
from functions.probe.errors import (
    ProbeAuthError,
    ProbeError,
    ProbeHttpError,
    ProbeLimitError,
    ProbeProtocolError,
    ProbeTimeoutError,
)
from functions.probe.exchange import MAX_TOOLS
from functions.probe.wire import MAX_BODY_BYTES, MAX_EXCHANGE_BYTES, Deadline, McpHttp, new_probe_client
from tests.loopback import ThreadedSocketServer

DEADLINE_S = 1.5
# "Never outlives the deadline": the deadline, the watchdog's grace and scheduling slack,
# far below what these servers would take (forever, or tens of seconds).
SLACK_S = 2.5
DISCOVER_RESULT = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
Behaviour = Callable[["Conn", dict[str, Any]], None]


# --- a raw HTTP/1.1 server ---------------------------------------------------------------


def read_request(sock: socket.socket) -> dict[str, Any]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return {}
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += sock.recv(65536)
    try:
        return json.loads(body) if body else {"empty": True}
    except ValueError:
        return {"form": body.decode()}  # the token request


def head(status: int = 200, content_type: str = "application/json", **headers: Any) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"content-type: {content_type}",
             *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def answer(sock: Conn, message: dict[str, Any], **headers: Any) -> None:
    body = json.dumps(message).encode()
    sock.sendall(head(**headers, content_length=str(len(body))) + body)


def rpc(body: dict[str, Any], result: dict[str, Any], id_: Any = ...) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": body.get("id") if id_ is ... else id_, "result": result}


class Conn:
    """What a behaviour writes to: the connection, counting the bytes sent."""

    def __init__(self, sock: socket.socket, server: RawServer):
        self.sock = sock
        self.server = server

    def sendall(self, data: bytes) -> None:
        self.server.sent += len(data)
        self.sock.sendall(data)


class RawServer(ThreadedSocketServer):
    """Calls ``behaviour(conn, request_body)`` for every request (keep-alive aware)."""

    def __init__(self, behaviour: Behaviour):
        self.sent = 0
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                conn = Conn(sock, owner)
                try:
                    while body := read_request(sock):
                        owner.requests.append(body)
                        behaviour(conn, body)
                except OSError:
                    pass  # the probe gave up and closed the connection

        super().__init__(socketserver.ThreadingTCPServer, Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


# --- the behaviours ----------------------------------------------------------------------


def silent(sock: Conn, body: dict[str, Any]) -> None:
    time.sleep(60)


def trickling_headers(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(600):  # one header byte every 0.1 s: each read succeeds, the headers never end
        sock.sendall(b"x")
        time.sleep(0.1)


def trickling_body(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(head(content_type="text/event-stream", transfer_encoding="chunked"))
    for _ in range(600):
        sock.sendall(chunk(b": ping\n\n"))
        time.sleep(0.1)


def endless_blank_lines(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(head(content_type="text/event-stream", transfer_encoding="chunked"))
    block = chunk(b"\n" * 65536)
    while True:
        sock.sendall(block)


@cache
def gzip_blocks(size: int = 16 * 1024 * 1024) -> tuple[bytes, bytes]:
    """A gzip stream's first block and a block that may repeat forever, each ``size``
    bytes of blank lines once inflated (about 16 KB on the wire)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    first = compressor.compress(b"\n" * size) + compressor.flush(zlib.Z_SYNC_FLUSH)
    again = compressor.compress(b"\n" * size) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return first, again


def gzip_blank_lines(sock: Conn, body: dict[str, Any]) -> None:
    first, again = gzip_blocks()
    sock.sendall(head(content_type="text/event-stream", transfer_encoding="chunked", content_encoding="gzip"))
    sock.sendall(chunk(first))
    while True:
        sock.sendall(chunk(again))


@functools.cache
def gzip_json() -> bytes:
    """A JSON answer that inflates to 64 MB, compressed once (see ``gzip_bomb``)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    padding = b" " * (64 * 1024 * 1024)
    data = compressor.compress(b'{"jsonrpc": "2.0", "id": 1, "result": {"x": "') + compressor.compress(padding)
    return data + compressor.compress(b'"}}') + compressor.flush()


def gzip_json_bomb(sock: Conn, body: dict[str, Any]) -> None:
    """A JSON answer that inflates to far more than a body may hold."""
    data = gzip_json()
    sock.sendall(head(content_encoding="gzip", content_length=str(len(data))) + data)


def oversized_json(sock: Conn, body: dict[str, Any]) -> None:
    filler = "x" * (MAX_BODY_BYTES + 1024)
    answer(sock, rpc(body, {"supportedVersions": ["2026-07-28"], "filler": filler}))


def modern_then(tools_list: Behaviour) -> Behaviour:
    """A correct server/discover, then ``tools_list`` for every tools/list."""
    def behave(sock: Conn, body: dict[str, Any]) -> None:
        if body.get("method") == "server/discover":
            answer(sock, rpc(body, DISCOVER_RESULT))
        else:
            tools_list(sock, body)
    return behave


def big_pages(sock: Conn, body: dict[str, Any]) -> None:
    """1 MB pages with a fresh nextCursor, forever (each page under the body limit)."""
    n = int((body.get("params") or {}).get("cursor") or 0) + 1
    tools = [{"name": f"t{n}-{i}", "inputSchema": {"type": "object", "description": "d" * 10_000}} for i in range(100)]
    answer(sock, rpc(body, {"tools": tools, "nextCursor": str(n)}))


def many_tiny_tools(sock: Conn, body: dict[str, Any]) -> None:
    n = int((body.get("params") or {}).get("cursor") or 0) + 1
    answer(sock, rpc(body, {"tools": [{}] * 1000, "nextCursor": str(n)}))


def gzip_pages(sock: Conn, body: dict[str, Any]) -> None:
    """Pages of 3 MB each once inflated (under the body limit), a few KB on the wire."""
    n = int((body.get("params") or {}).get("cursor") or 0) + 1
    tools = [{"name": "t", "description": " " * (3 * 1024 * 1024)}]
    data = zlib.compress(json.dumps(rpc(body, {"tools": tools, "nextCursor": str(n)})).encode(), 9)
    sock.sendall(head(content_encoding="deflate", content_length=str(len(data))) + data)


def discover_with_id(id_: Any, *, stream: bool = False) -> Behaviour:
    def behave(sock: Conn, body: dict[str, Any]) -> None:
        message = rpc(body, DISCOVER_RESULT, id_)
        if stream:
            data = f"event: message\ndata: {json.dumps(message)}\n\n".encode()
            sock.sendall(head(content_type="text/event-stream", content_length=str(len(data))) + data)
        else:
            answer(sock, message)
    return behave


def error_with_null_id(sock: Conn, body: dict[str, Any]) -> None:
    answer(sock, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})


def endless_headers(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\n")
    while True:
        sock.sendall(b"x-filler: " + b"f" * 1000 + b"\r\n")


def garbage_status_line(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")


def closes_mid_body(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(head(content_length="1000") + b'{"jsonrpc": "2.0", "id": 1, ')
    sock.sock.shutdown(socket.SHUT_RDWR)


def brotli_answer(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(head(content_encoding="br", content_length="4") + b"\x0b\x02\x80\x00")


def corrupt_gzip(sock: Conn, body: dict[str, Any]) -> None:
    sock.sendall(head(content_encoding="gzip", content_length="12") + b"\x1f\x8b\x08\x00notgzip!")


# name -> (behaviour, the typed error, what its message says)
HOSTILE: dict[str, tuple[Behaviour, type[ProbeError], str]] = {
    "silent": (silent, ProbeTimeoutError, "deadline"),
    "endless headers": (endless_headers, ProbeHttpError, "server/discover"),
    "not HTTP": (garbage_status_line, ProbeHttpError, "server/discover"),
    "closes mid-body": (closes_mid_body, ProbeHttpError, "server/discover"),
    "brotli": (brotli_answer, ProbeProtocolError, "unsupported Content-Encoding 'br'"),
    "corrupt gzip": (corrupt_gzip, ProbeProtocolError, "compressed body is corrupt"),
    "trickling headers": (trickling_headers, ProbeTimeoutError, "deadline"),
    "trickling SSE keep-alives": (trickling_body, ProbeTimeoutError, "deadline"),
    "endless blank lines": (endless_blank_lines, ProbeError, ""),  # the deadline or the byte budget, first wins
    "gzip stream of blank lines": (gzip_blank_lines, ProbeError, ""),
    "gzip JSON bomb": (gzip_json_bomb, ProbeLimitError, f"larger than {MAX_BODY_BYTES} bytes"),
    "oversized JSON": (oversized_json, ProbeLimitError, f"larger than {MAX_BODY_BYTES} bytes"),
    "1 MB pages forever": (modern_then(big_pages), ProbeLimitError, f"more than {MAX_EXCHANGE_BYTES} bytes"),
    "gzip pages forever": (modern_then(gzip_pages), ProbeLimitError, f"more than {MAX_EXCHANGE_BYTES} bytes"),
    "many tiny tools": (modern_then(many_tiny_tools), ProbeLimitError, f"more than {MAX_TOOLS} tools"),
    "id null": (discover_with_id(None), ProbeProtocolError, "does not match request id 1"),
    "id true": (discover_with_id(True), ProbeProtocolError, "does not match request id 1"),
    "id '1'": (discover_with_id("1"), ProbeProtocolError, "does not match request id 1"),
    "id 1.0": (discover_with_id(1.0), ProbeProtocolError, "does not match request id 1"),
    "SSE id true": (discover_with_id(True, stream=True), ProbeProtocolError, "without the response to request 1"),
    "SSE id null": (discover_with_id(None, stream=True), ProbeProtocolError, "without the response to request 1"),
    "error with id null": (error_with_null_id, ProbeProtocolError, "Parse error"),
}


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[tuple[RawServer, type[ProbeError], str]]:
    behaviour, error, says = HOSTILE[request.param]
    server = RawServer(behaviour)
    yield server, error, says
    server.close()


@pytest.fixture
def probe_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe function's environment, without a token endpoint (no auth)."""
    for name in ("TOKEN_URL", "ORIGIN_SECRET", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROBE_DEADLINE_S", str(DEADLINE_S))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setattr(probe_handler, "_runtime", None)


def invoke(url: str, *, on_main_thread: bool) -> tuple[Any, float]:
    """The shipped handler, as Lambda (main thread) or the local worker (a thread) runs it."""
    event = {"endpoint": url, "serverId": "acme-mcp", "target": "origin", "targetRegion": "eu-west-1"}
    return timed(lambda: probe_handler.handler(event, None), on_main_thread=on_main_thread)


def timed(call: Callable[[], Any], *, on_main_thread: bool) -> tuple[Any, float]:
    """What ``call`` returned or raised, and how long it took, on the main thread or not."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # the outcome under test
            outcome.append(exc)

    started = time.monotonic()
    if on_main_thread:
        assert threading.current_thread() is threading.main_thread()
        run()
    else:
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(timeout=DEADLINE_S + 30)
        assert not worker.is_alive(), "the probe hung past its deadline off the main thread"
    return outcome[0], time.monotonic() - started


@pytest.mark.parametrize("on_main_thread", [True, False], ids=["main thread", "worker thread"])
@pytest.mark.parametrize("hostile", HOSTILE, indirect=True)
def test_a_hostile_server_gets_a_typed_error_within_the_deadline(probe_env, hostile, on_main_thread: bool):
    server, error, says = hostile
    gzip_json()  # made before the clock starts
    outcome, elapsed_s = invoke(server.url, on_main_thread=on_main_thread)
    assert isinstance(outcome, error), f"{type(outcome).__name__}: {outcome}"
    assert says in str(outcome)
    assert elapsed_s < DEADLINE_S + SLACK_S


@pytest.mark.parametrize("name", ["1 MB pages forever", "gzip pages forever", "gzip stream of blank lines"])
def test_what_a_probe_reads_is_bounded_across_pages_and_after_decompression(probe_env, name: str):
    behaviour, _, _ = HOSTILE[name]
    server = RawServer(behaviour)
    try:
        outcome, _ = invoke(server.url, on_main_thread=False)
    finally:
        server.close()
    assert isinstance(outcome, ProbeError)
    if name == "1 MB pages forever":  # uncompressed: the wire bytes are the decoded bytes
        assert server.sent < MAX_EXCHANGE_BYTES + 2 * 1024 * 1024
    pages = [r for r in server.requests if r.get("method") == "tools/list"]
    assert len(pages) <= MAX_EXCHANGE_BYTES // (1024 * 1024) + 1


@functools.cache
def gzip_bomb() -> bytes:
    """32 MB of token in about 32 KB of gzip, compressed once: compressing it per request
    took longer than the probe's read timeout on a loaded machine, so the probe timed out
    waiting for headers instead of meeting the bomb."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(b'{"access_token": "' + b"a" * (32 * 1024 * 1024) + b'"}') + compressor.flush()


def token_bomb(sock: Conn, body: dict[str, Any]) -> None:
    data = gzip_bomb()
    sock.sendall(head(content_encoding="gzip", content_length=str(len(data))) + data)


TOKEN_ENDPOINTS: dict[str, tuple[Behaviour, type[ProbeError], str]] = {
    "silent": (silent, ProbeAuthError, "Timeout"),
    "trickling headers": (trickling_headers, ProbeAuthError, "Timeout"),
    "gzip bomb": (token_bomb, ProbeLimitError, f"more than {MAX_TOKEN_RESPONSE_BYTES} bytes"),
}


@pytest.mark.parametrize("on_main_thread", [True, False], ids=["main thread", "worker thread"])
@pytest.mark.parametrize("name", TOKEN_ENDPOINTS)
def test_a_hostile_token_endpoint_fails_the_probe_within_the_deadline(name: str, on_main_thread: bool):
    behaviour, error, says = TOKEN_ENDPOINTS[name]
    gzip_bomb()  # made before the clock starts
    server = RawServer(behaviour)
    try:
        tokens = TokenSource(token_url=server.url, client_id="probe", read_client_secret=lambda: "secret",
                             audience=None, http=new_probe_client())
        outcome, elapsed_s = timed(lambda: tokens.token(Deadline(DEADLINE_S)), on_main_thread=on_main_thread)
    finally:
        server.close()
    assert isinstance(outcome, error), f"{type(outcome).__name__}: {outcome}"
    assert says in str(outcome)
    assert elapsed_s < DEADLINE_S + SLACK_S


@pytest.mark.parametrize("on_main_thread", [True, False], ids=["main thread", "worker thread"])
def test_a_resolver_that_hangs_cannot_outlast_the_deadline(monkeypatch: pytest.MonkeyPatch, on_main_thread: bool):
    real = socket.getaddrinfo

    def hanging(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-dns.example":
            time.sleep(30)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    http = McpHttp(new_probe_client(), "https://slow-dns.example/mcp", Deadline(DEADLINE_S))
    outcome, elapsed_s = timed(lambda: http.request("server/discover", {}), on_main_thread=on_main_thread)
    assert isinstance(outcome, ProbeTimeoutError), f"{type(outcome).__name__}: {outcome}"
    assert elapsed_s < DEADLINE_S + SLACK_S
