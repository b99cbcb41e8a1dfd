"""The local edge's HTTP/1.1 client to the origins: keep-alive connections, streamed bodies.

What CloudFront does towards a custom origin, and no more: one request per connection
at a time, connections kept for the next request (``keepaliveTimeout``), the answer's
body passed on as it arrives, and a read timeout *between packets* (the origin's
``readTimeout``): waiting longer than that for the status line or for the next piece
of the body is ``OriginTimeoutError``. A connection that cannot be made is
``OriginConnectError``; an answer that is not HTTP/1.1, ``OriginProtocolError``.

Built on an asyncio protocol and httptools' C parser (already the edge's server parser):
what arrives is parsed in the protocol's ``data_received``, and a request waits for each
packet on one future cut by one timer (asyncio streams, before, added a stream buffer, a
read task and ``wait_for``'s timeout per read: 37-42 against 31-33 us an exchange with a
loopback server that answers at once); reading pauses while more than two reads' worth of
body waits for a slow viewer, as the stream's limit did. The general-purpose client it
replaced (httpx) spent about a millisecond a request of its own on the edge's sequential
path, as long as the origin took to answer.

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
covered by tests/local/cloudfront/test_origin_client.py.
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
    # Asked for (``OriginPool.request(whole=True)``): a sized answer is awaited whole, so
    # its head alone wakes no one (``hold``, decided once the head is in).
    whole: bool = False
    hold: bool = False

    def on_message_begin(self) -> None:
        # A 1xx answer (103 Early Hints) is followed by the real one on the same stream.
        self.headers, self.headers_done, self.body, self.complete, self.hold = [], False, [], False, False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        # Asked here: once the message is complete, httptools answers False.
        self.keep_alive = self.parser.should_keep_alive()
        self.hold = self.whole and self.parser.get_status_code() >= 200 and sized(self.headers)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


def header_value(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` (lower case, as the parser stores them), or None."""
    return next((v for n, v in headers if n == name), None)


def sized(headers: list[tuple[str, str]]) -> bool:
    """Whether an answer (its lower-case header names) is sized and not a stream: a
    ``content-length``, and not ``text/event-stream``. The local edge passes such an answer
    on whole, every other one as it arrives."""
    return header_value(headers, "content-length") is not None and not (
        header_value(headers, "content-type") or "").startswith("text/event-stream")


class _Connection(asyncio.Protocol):
    """One connection to an origin, as an asyncio protocol: what arrives goes straight into
    the parser of the answer in progress (no stream buffer in between, no task per read),
    and the request waits for each packet on one future, cut by one timer (``wait``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.idle_since = time.monotonic()
        self.parsed: _Parsed | None = None  # the answer in progress, None between answers
        self.buffered = 0  # body bytes parsed and not yet taken (``take``)
        self.paused = False  # reading paused until the body is taken
        self.closed = False  # the origin closed it, or the connection was lost
        self.error: OriginError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None  # the running wait's read timeout
        self._timeout_s = 0.0
        self._writable: asyncio.Future[None] | None = None  # while the transport's buffer is full

    # --- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        parsed = self.parsed
        if parsed is None:  # nothing asked: the connection cannot be trusted with the next request
            self._fail(OriginProtocolError("the origin sent data it was not asked for"))
            return
        try:
            parsed.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(OriginProtocolError(f"not an HTTP/1.1 answer: {exc}"))
            return
        self.buffered = sum(len(piece) for piece in parsed.body)
        if self.buffered > 2 * READ_SIZE and not self.paused and self.transport is not None:
            self.paused = True  # a viewer slower than its origin: wait until the body is taken
            self.transport.pause_reading()
        if parsed.hold and not parsed.complete and not self.paused:
            # A sized answer awaited whole: no one to wake before its end (its head often comes
            # a packet ahead of its body; waking for it cost the edge a turn of its task). The
            # read timeout is between packets: this one starts it again.
            self._restart_timer()
            return
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is not None and self.error is None:
            self.error = OriginProtocolError(f"connection lost: {type(exc).__name__}: {exc}")
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    # --- the request's side ----------------------------------------------------------
    def usable(self, keepalive_s: float) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing() and \
            time.monotonic() - self.idle_since < keepalive_s

    async def send(self, payload: bytes, parsed: _Parsed) -> None:
        """Write a request, its answer to be parsed into ``parsed``."""
        parsed.parser = httptools.HttpResponseParser(parsed)
        self.parsed, self.buffered = parsed, 0
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        self.transport.write(payload)
        if self._writable is not None:
            await self._writable
        if self.error is not None:
            raise ConnectionResetError(str(self.error))

    def take(self) -> list[bytes]:
        """The body pieces parsed since the last call."""
        parsed = self.parsed
        if parsed is None or not parsed.body:
            return []
        pieces, parsed.body, self.buffered = parsed.body, [], 0
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()
        return pieces

    async def wait(self, timeout_s: float) -> None:
        """Until more of the answer arrives, at most ``timeout_s`` (the read timeout between
        packets: ``OriginTimeoutError``); ``_ClosedError`` once the origin closed it, the
        error once it failed."""
        if self.error is not None:
            raise self.error
        if self.closed:
            raise _ClosedError("the origin closed the connection before the answer ended")
        waiter = self._waiter = self.loop.create_future()
        self._timeout_s = timeout_s
        self._timer = self.loop.call_later(timeout_s, _expire, waiter)
        try:
            await waiter
        except TimeoutError:
            self.close()
            raise OriginTimeoutError(f"no data from the origin for {timeout_s:g} s") from None
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self._waiter, self._timer = None, None
        if self.error is not None:
            raise self.error

    def answered(self) -> None:
        """The answer is over and the connection kept: data before the next request is no one's."""
        self.parsed, self.buffered = None, 0

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _restart_timer(self) -> None:
        """The running ``wait``'s read timeout, counted again from now (a packet came)."""
        waiter, timer = self._waiter, self._timer
        if waiter is not None and timer is not None and not waiter.done():
            timer.cancel()
            self._timer = self.loop.call_later(self._timeout_s, _expire, waiter)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: OriginError) -> None:
        self.error = error
        self.close()
        self._wake()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class OriginResponse:
    """An origin's answer: ``status`` and ``headers`` (lower-case names) once it started;
    ``chunks()`` yields the body as it arrives, ``read()`` answers all of it; ``aclose()``
    returns or drops the connection."""

    def __init__(self, pool: OriginPool, key: tuple[str, int, str], connection: _Connection,
                 parsed: _Parsed, read_timeout_s: float):
        self._pool, self._key, self._connection = pool, key, connection
        self._parsed, self._read_timeout_s = parsed, read_timeout_s
        self.status = parsed.status
        self.headers = parsed.headers

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    async def chunks(self) -> AsyncIterator[bytes]:
        connection, parsed = self._connection, self._parsed
        while True:
            for piece in connection.take():
                yield piece
            if parsed.complete:
                return
            try:
                await connection.wait(self._read_timeout_s)
            except _ClosedError:
                for piece in connection.take():
                    yield piece
                if self.header("content-length") is None and self.header("transfer-encoding") is None:
                    return  # no length given: the body ends with the connection (RFC 9112 6.3)
                raise

    async def read(self) -> bytes:
        """The whole body, under the same between-packets timeout as ``chunks()``."""
        if self._parsed.complete:  # a plain JSON answer usually comes whole with its head
            return b"".join(self._connection.take())
        return b"".join([piece async for piece in self.chunks()])

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None  # type: ignore[assignment]
        if connection is None:
            return
        if self._parsed.complete and self._parsed.keep_alive and connection.error is None:
            connection.answered()
            self._pool.release(self._key, connection)
        else:
            connection.close()


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
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(loop.create_connection(
                lambda: _Connection(loop), host, port,
                ssl=ssl.create_default_context() if scheme == "https" else None), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise OriginConnectError(f"{host}:{port}: {type(exc).__name__}: {exc}") from None
        return connection

    async def request(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes, *,
                      connect_timeout_s: float, read_timeout_s: float, whole: bool = False) -> OriginResponse:
        """Send the request; answers once the status line and headers are in, or, with
        ``whole``, once a sized answer (``sized``) is all in (its ``read()`` then waits
        for nothing)."""
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
                                            head=method == "HEAD", whole=whole)
            except _StaleConnectionError:
                continue  # closed while idle: our request never reached it; try another
        connection = await self._connect(key, connect_timeout_s)
        return await self._exchange(key, connection, payload, read_timeout_s, reused=False, head=method == "HEAD",
                                    whole=whole)

    async def _exchange(self, key: tuple[str, int, str], connection: _Connection, payload: bytes,
                        read_timeout_s: float, *, reused: bool, head: bool = False,
                        whole: bool = False) -> OriginResponse:
        parsed = _Parsed(whole=whole and not head)  # the answer to HEAD has no body to wait for
        try:
            await connection.send(payload, parsed)
        except OSError as exc:
            connection.close()
            if reused:
                raise _StaleConnectionError from None
            raise OriginConnectError(f"{key[0]}:{key[1]}: {type(exc).__name__}: {exc}") from None
        while not parsed.headers_done or parsed.status < 200:  # a 1xx is not the answer
            try:
                await connection.wait(read_timeout_s)
            except OriginProtocolError:
                if reused and not parsed.status:  # nothing came back: the origin had closed it
                    raise _StaleConnectionError from None
                raise
            parsed.status = parsed.parser.get_status_code()
        if head:  # the answer to HEAD has no body, whatever its content-length says
            connection.take()
            parsed.complete = True
        return OriginResponse(self, key, connection, parsed, read_timeout_s)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
