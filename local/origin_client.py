"""The local edge's HTTP/1.1 client to the origins: keep-alive connections, streamed bodies.

What CloudFront does towards a custom origin, and no more: one request per connection
at a time, connections kept for the next request (``keepaliveTimeout``), the answer's
body passed on as it arrives, and a read timeout *between packets* (the origin's
``readTimeout``): waiting longer than that for the status line or for the next piece
of the body is ``OriginTimeoutError``. A connection that cannot be made is
``OriginConnectError``; an answer that is not HTTP/1.1, ``OriginProtocolError``.

Built on asyncio streams and httptools' C parser (already the edge's server parser):
the general-purpose client it replaces (httpx) spent about a millisecond a request
of its own on the edge's sequential path, as long as the origin took to answer.

Why httptools and not h11 (the sans-IO library uvicorn's and httpcore's HTTP/1.1 is
built on, which the team's rule for well-kept libraries would otherwise favour: both are
maintained, httptools by uvicorn's authors): measured in the same run by
``python -m bench.origin_client_ab`` (2,000 sequential ``tools/list`` per client to the
real origin, alternating rounds), the same client on h11 costs 108-111 us of work per
exchange against 8.7 us here (request written, answer parsed, no socket), and over
loopback 1,464 against 1,209 us a request (p95 1,983 against 1,663 us), in a second run
1,159 against 1,001 us: 0.16-0.26 ms a request, up to a fifth of all the edge may add to
the origin (``bench/local_bench.py``'s goal). What is hand-written here is the little HTTP/1.1
client logic on top of the parser (keep-alive, 1xx, HEAD, length-less answers), each
covered by tests/local/test_origin_client.py.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httptools

READ_SIZE = 64 * 1024
# Headers the client writes itself (the body's length) or that describe the viewer's
# connection: never copied from the request it forwards.
OWN_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive",
                         # the body goes with the head at once: nothing to wait for
                         "expect"})


class OriginError(Exception):
    pass


class OriginConnectError(OriginError):
    pass


class OriginTimeoutError(OriginError):
    pass


class OriginProtocolError(OriginError):
    pass


@dataclass
class _Parsed:
    """httptools' callbacks: what the parser has read of one response so far."""

    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    headers_done: bool = False
    keep_alive: bool = False
    body: list[bytes] = field(default_factory=list)
    complete: bool = False
    parser: Any = None

    def on_message_begin(self) -> None:
        # A 1xx answer (103 Early Hints) is followed by the real one on the same stream.
        self.headers, self.headers_done, self.body, self.complete = [], False, [], False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        # Asked here: once the message is complete, httptools answers False.
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.idle_since = time.monotonic()

    def usable(self, keepalive_s: float) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing() and \
            time.monotonic() - self.idle_since < keepalive_s

    def close(self) -> None:
        self.writer.close()


class OriginResponse:
    """An origin's answer: ``status`` and ``headers`` (lower-case names) once it started;
    ``chunks()`` yields the body as it arrives; ``aclose()`` returns or drops the connection."""

    def __init__(self, pool: OriginPool, key: tuple[str, int, str], connection: _Connection, parser: Any,
                 parsed: _Parsed, read_timeout_s: float):
        self._pool, self._key, self._connection = pool, key, connection
        self._parser, self._parsed, self._read_timeout_s = parser, parsed, read_timeout_s
        self.status = parsed.status
        self.headers = parsed.headers

    def header(self, name: str) -> str | None:
        return next((v for n, v in self.headers if n == name), None)

    async def chunks(self) -> AsyncIterator[bytes]:
        parsed = self._parsed
        while True:
            while parsed.body:
                yield parsed.body.pop(0)
            if parsed.complete:
                return
            try:
                await _feed(self._connection, self._parser, self._read_timeout_s)
            except _ClosedError:
                if self.header("content-length") is None and self.header("transfer-encoding") is None:
                    return  # no length given: the body ends with the connection (RFC 9112 6.3)
                raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None  # type: ignore[assignment]
        if connection is None:
            return
        if self._parsed.complete and self._parsed.keep_alive:
            self._pool.release(self._key, connection)
        else:
            connection.close()


async def _feed(connection: _Connection, parser: Any, timeout_s: float) -> None:
    try:
        data = await asyncio.wait_for(connection.reader.read(READ_SIZE), timeout_s)
    except TimeoutError:
        connection.close()
        raise OriginTimeoutError(f"no data from the origin for {timeout_s:g} s") from None
    except OSError as exc:
        connection.close()
        raise OriginProtocolError(f"connection lost: {type(exc).__name__}: {exc}") from None
    if not data:
        connection.close()
        raise _ClosedError("the origin closed the connection before the answer ended")
    try:
        parser.feed_data(data)
    except httptools.HttpParserError as exc:
        connection.close()
        raise OriginProtocolError(f"not an HTTP/1.1 answer: {exc}") from None


class _ClosedError(OriginProtocolError):
    """The origin closed the connection: the end of an answer sized by its close, else an error."""


class _StaleConnectionError(Exception):
    """A kept connection the origin had closed before it read our request."""


class OriginPool:
    """Idle keep-alive connections per origin (scheme, host, port)."""

    def __init__(self, keepalive_s: float = 5.0):
        self.keepalive_s = keepalive_s
        self._idle: dict[tuple[str, int, str], list[_Connection]] = {}

    def release(self, key: tuple[str, int, str], connection: _Connection) -> None:
        connection.idle_since = time.monotonic()
        self._idle.setdefault(key, []).append(connection)

    async def _connect(self, key: tuple[str, int, str], timeout_s: float) -> _Connection:
        host, port, scheme = key
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                host, port, ssl=ssl.create_default_context() if scheme == "https" else None,
                limit=READ_SIZE), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise OriginConnectError(f"{host}:{port}: {type(exc).__name__}: {exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer)

    async def request(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes, *,
                      connect_timeout_s: float, read_timeout_s: float) -> OriginResponse:
        """Send the request; answers once the status line and headers are in."""
        parts = urlsplit(url)
        scheme = parts.scheme or "http"
        port = parts.port or (443 if scheme == "https" else 80)
        key = (parts.hostname or "", port, scheme)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"{method} {target} HTTP/1.1"]
        if not any(n == "host" for n, _ in headers):
            lines.append(f"host: {parts.netloc}")
        lines += [f"{n}: {v}" for n, v in headers if n not in OWN_HEADERS]
        if body or method not in ("GET", "HEAD", "OPTIONS", "DELETE"):
            lines.append(f"content-length: {len(body)}")
        payload = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        idle = self._idle.get(key, [])
        while idle:
            connection = idle.pop()
            if not connection.usable(self.keepalive_s):
                connection.close()
                continue
            try:
                return await self._exchange(key, connection, payload, read_timeout_s, reused=True,
                                            head=method == "HEAD")
            except _StaleConnectionError:
                continue  # closed while idle: our request never reached it; try another
        connection = await self._connect(key, connect_timeout_s)
        return await self._exchange(key, connection, payload, read_timeout_s, reused=False, head=method == "HEAD")

    async def _exchange(self, key: tuple[str, int, str], connection: _Connection, payload: bytes,
                        read_timeout_s: float, *, reused: bool, head: bool = False) -> OriginResponse:
        parsed = _Parsed()
        parser = parsed.parser = httptools.HttpResponseParser(parsed)
        try:
            connection.writer.write(payload)
            await connection.writer.drain()
        except OSError as exc:
            connection.close()
            if reused:
                raise _StaleConnectionError from None
            raise OriginConnectError(f"{key[0]}:{key[1]}: {type(exc).__name__}: {exc}") from None
        while not parsed.headers_done or parsed.status < 200:  # a 1xx is not the answer
            try:
                await _feed(connection, parser, read_timeout_s)
            except OriginProtocolError:
                if reused and not parsed.status:  # nothing came back: the origin had closed it
                    raise _StaleConnectionError from None
                raise
            parsed.status = parser.get_status_code()
        if head:  # the answer to HEAD has no body, whatever its content-length says
            parsed.body, parsed.complete = [], True
        return OriginResponse(self, key, connection, parser, parsed, read_timeout_s)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
