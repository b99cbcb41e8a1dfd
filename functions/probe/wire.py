"""One JSON-RPC message over HTTP, the way an MCP client sends it, with timings and a
hard deadline.

``McpHttp.post`` sends one JSON-RPC request (or notification) and reads the answer,
whether ``application/json`` or ``text/event-stream`` (skipping notifications and
pings until the response with our id arrives), and measures connect time (DNS, TCP,
TLS) and time to first byte through httpx's trace hook.

The deadline is absolute and enforced in the transport (``DeadlineTransport``, what
``new_probe_client`` builds): every socket operation (name resolution, connect, TLS,
each write, each read, while waiting for headers too) gets at most the time left, so a server that
trickles header or body bytes cannot stretch a probe past its deadline, on the main
thread or off it (no signal needed). Bodies are decompressed here, in bounded
pieces (``BoundedDecoder``), against one byte budget for the whole exchange
(``ExchangeBudget``): a compressed bomb, an endless stream or endless pages end as a
typed ``ProbeLimitError`` long before the function's memory does.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import ipaddress
import json
import re
import ssl
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

from .errors import ProbeHttpError, ProbeLimitError, ProbeProtocolError, ProbeTimeoutError
from .secrets_manager import resolve_within

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"
ACCEPT = f"{JSON_TYPE}, {SSE_TYPE}"
# Tool lists of large servers are big, but not this big; caps keep a broken or
# hostile server from exhausting the probe's memory (256 MB) before the deadline:
# one body, every body of the exchange together (decompressed), and the tools kept.
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_EXCHANGE_BYTES = 8 * 1024 * 1024
# Decompressed output is produced (and the deadline checked) this much at a time.
DECODE_PIECE_BYTES = 64 * 1024
ACCEPT_ENCODING = "gzip, deflate"  # what BoundedDecoder decodes; never br or zstd
_EXCERPT = 300
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # SSE ends a line at CRLF, LF or a lone CR


class Deadline:
    """A point in time (monotonic) after which the probe gives up."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self.expires_at = clock() + seconds

    def remaining(self) -> float:
        return self.expires_at - self._clock()

    def timeout_for(self, what: str) -> float:
        """The time left for one blocking operation; raises once none is left."""
        left = self.remaining()
        if left <= 0:
            raise ProbeTimeoutError(f"probe exceeded its {self.seconds:.3g} s deadline ({what})")
        return left


_ACTIVE_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("probe_deadline", default=None)


@contextlib.contextmanager
def deadline_active(deadline: Deadline) -> Iterator[None]:
    """Bind ``deadline`` to every socket operation of a ``DeadlineTransport`` in this context."""
    token = _ACTIVE_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _ACTIVE_DEADLINE.reset(token)


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    deadline = _ACTIVE_DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline.remaining()
    if left <= 0:
        raise error(f"probe deadline of {deadline.seconds:.3g} s reached")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """The host's addresses. ``getaddrinfo`` has no timeout of its own, so it runs in a
    helper thread that the deadline stops waiting for (the thread ends on its own)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    try:
        answers = resolve_within(host, port, timeout)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"resolving {host} did not finish within the deadline") from None
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in answers))


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        failure: Exception | None = None
        for address in _resolve(host, port, _bounded(timeout, httpcore.ConnectTimeout)):
            try:
                # TLS still verifies the host name: httpcore passes it to start_tls.
                return _DeadlineStream(self._backend.connect_tcp(
                    address, port, _bounded(timeout, httpcore.ConnectTimeout), local_address, socket_options))
            except httpcore.ConnectError as exc:
                failure = exc  # the next address (IPv6, then IPv4...), as create_connection would
        raise failure or httpcore.ConnectError(f"{host} has no address")

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _bounded(timeout, httpcore.ConnectTimeout),
                                                                 socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a network backend that bounds each socket operation by
    the active probe deadline (``deadline_active``); without one it is plain httpx."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None):
        super().__init__(verify=ssl_context or True, trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context or ssl.create_default_context(),
            network_backend=_DeadlineBackend(),
            max_connections=10,
            max_keepalive_connections=10,
        )


def new_probe_client(ssl_context: ssl.SSLContext | None = None, **kwargs: Any) -> httpx.Client:
    """The client a probe speaks MCP with: the deadline in the transport, no proxies
    from the environment (the probe measures the direct path), no redirects."""
    return httpx.Client(transport=DeadlineTransport(ssl_context), trust_env=False, follow_redirects=False, **kwargs)


class ExchangeBudget:
    """Bytes (decompressed) read across every answer of one exchange."""

    def __init__(self, limit: int = MAX_EXCHANGE_BYTES):
        self.limit = limit
        self.used = 0

    def spend(self, n: int, method: str) -> None:
        self.used += n
        if self.used > self.limit:
            raise ProbeLimitError(
                f"{method}: the exchange read more than {self.limit} bytes (decompressed) across its answers")


class BoundedDecoder:
    """``Content-Encoding`` decoding that yields at most ``DECODE_PIECE_BYTES`` at a time
    (httpx's decoder inflates a whole chunk at once: 64 KB of gzip can be 64 MB)."""

    def __init__(self, content_encoding: str):
        encoding = content_encoding.strip().lower()
        self._inflate: Any = None
        self._fed = False  # an empty body (a 202) is not a truncated stream
        if encoding in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._inflate = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            raise ProbeProtocolError(f"unsupported Content-Encoding {content_encoding[:40]!r} (asked for {ACCEPT_ENCODING})")

    def decode(self, data: bytes) -> Iterator[bytes]:
        if self._inflate is None:
            if data:
                yield data
            return
        pending = data
        self._fed = self._fed or bool(data)
        try:
            while True:
                piece = self._inflate.decompress(pending, DECODE_PIECE_BYTES)
                pending = self._inflate.unconsumed_tail
                if piece:
                    yield piece
                if not pending and len(piece) < DECODE_PIECE_BYTES:
                    return
        except zlib.error as exc:
            raise ProbeProtocolError(f"compressed body is corrupt: {exc}") from None

    def finish(self) -> None:
        """The body ended: a compressed one must have reached its own end too."""
        if self._inflate is not None and self._fed and not self._inflate.eof:
            raise ProbeProtocolError("compressed body is corrupt: it ends before the compressed stream does")


def decoded_pieces(response: httpx.Response, deadline: Deadline, budget: ExchangeBudget, what: str) -> Iterator[bytes]:
    """A streamed response's body, decoded in bounded pieces, each counted against
    ``budget``, the deadline checked between pieces (the transport bounds each read)."""
    decoder = BoundedDecoder(response.headers.get("content-encoding", ""))
    for raw in response.iter_raw():
        for piece in decoder.decode(raw):
            deadline.timeout_for(f"reading the {what} response")
            budget.spend(len(piece), what)
            yield piece
    decoder.finish()


@dataclass
class Answer:
    """What one HTTP exchange produced."""

    method: str
    status: int
    headers: httpx.Headers
    content_type: str  # media type only, lower case ("" if none)
    message: dict[str, Any] | None  # the JSON-RPC response to our request, if any
    body_excerpt: str
    connect_ms: float
    first_byte_ms: float
    total_ms: float

    @property
    def error(self) -> dict[str, Any] | None:
        if self.message is not None and isinstance(self.message.get("error"), dict):
            return self.message["error"]
        return None

    def step(self) -> dict[str, Any]:
        return {"method": self.method, "httpStatus": self.status, "ms": round(self.total_ms, 1)}


@dataclass
class _Timings:
    started: float
    connect_started: float | None = None
    connect_done: float | None = None
    first_byte: float | None = None

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        if event == "connection.connect_tcp.started":
            self.connect_started = now
        elif event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.connect_done = now
        elif event.endswith(".receive_response_headers.complete"):
            self.first_byte = now

    def connect_ms(self) -> float:
        if self.connect_started is None or self.connect_done is None:
            return 0.0  # reused keep-alive connection
        return (self.connect_done - self.connect_started) * 1000


class SseDecoder:
    """Incremental ``text/event-stream`` parser (WHATWG rules), yielding ``(event, data)``."""

    def __init__(self, max_event_bytes: int = MAX_BODY_BYTES):
        self._text = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._buffer = ""
        self._scanned = 0  # how much of _buffer is known to hold no line break
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._max = max_event_bytes
        self._started = False

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        try:
            self._buffer += self._text.decode(chunk)
        except UnicodeDecodeError as exc:
            raise ProbeProtocolError(f"SSE stream is not valid UTF-8: {exc}") from None
        if not self._started and self._buffer:
            self._buffer = self._buffer.removeprefix("\ufeff")
            self._started = True
        events: list[tuple[str, str]] = []
        buffer, start = self._buffer, 0
        # The text before _scanned held no line break when the last chunk arrived:
        # searching from there keeps a long line fed in many chunks linear, not quadratic.
        search_from = self._scanned
        while (brk := _LINE_BREAK.search(buffer, search_from)) is not None:
            if brk.group() == "\r" and brk.end() == len(buffer):
                break  # could be the first half of CRLF
            event = self._line(buffer[start:brk.start()])
            if event is not None:
                events.append(event)
            start = search_from = brk.end()
        self._buffer = buffer[start:]  # one cut per chunk, not one per line
        self._scanned = (brk.start() if brk is not None else len(buffer)) - start
        if len(self._buffer) + self._size > self._max:
            raise ProbeLimitError(f"SSE event larger than {self._max} bytes")
        return events

    def _line(self, line: str) -> tuple[str, str] | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            event = (self._event or "message", "\n".join(self._data))
            self._event, self._data, self._size = "", [], 0
            return event
        if line.startswith(":"):
            return None  # comment (keep-alive ping)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._size += len(value) + 1
        elif name == "event":
            self._event = value
        return None  # id, retry and unknown fields do not matter to a probe


def _media_type(headers: httpx.Headers) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


def _same_id(value: Any, request_id: int) -> bool:
    """JSON-RPC ids match by type and value: ``true`` is not 1, ``null`` is nobody's."""
    return type(value) is int and value == request_id


def _matches(message: Any, request_id: int) -> bool:
    return isinstance(message, dict) and _same_id(message.get("id"), request_id) and ("result" in message or "error" in message)


def rpc_error_text(error: Mapping[str, Any]) -> str:
    return f"JSON-RPC error {error.get('code')}: {str(error.get('message'))[:200]}"


def _validate_response(message: dict[str, Any], method: str) -> dict[str, Any]:
    if message.get("jsonrpc") != "2.0":
        raise ProbeProtocolError(f"{method}: response is not JSON-RPC 2.0 (jsonrpc={message.get('jsonrpc')!r})")
    if ("result" in message) == ("error" in message):
        raise ProbeProtocolError(f"{method}: JSON-RPC response must have exactly one of result and error")
    if "result" in message and not isinstance(message["result"], dict):
        raise ProbeProtocolError(f"{method}: JSON-RPC result must be an object, got {type(message['result']).__name__}")
    if "error" in message and not isinstance(message["error"], dict):
        raise ProbeProtocolError(f"{method}: JSON-RPC error must be an object")
    return message


@dataclass
class McpHttp:
    """Posts JSON-RPC to one MCP endpoint within one deadline."""

    client: httpx.Client
    url: str
    deadline: Deadline
    headers: Mapping[str, str] = field(default_factory=dict)
    budget: ExchangeBudget = field(default_factory=ExchangeBudget)
    # (method, url, body) -> headers that sign the request (sigv4.FunctionUrlSigner), or None.
    sign: Callable[[str, str, bytes], Mapping[str, str]] | None = None
    _next_id: int = 0

    def request(self, method: str, params: dict[str, Any], headers: Mapping[str, str] | None = None) -> Answer:
        self._next_id += 1
        body = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        return self._post(method, body, self._next_id, headers or {})

    def notify(self, method: str, params: dict[str, Any] | None, headers: Mapping[str, str] | None = None) -> Answer:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        return self._post(method, body, None, headers or {})

    def delete(self, headers: Mapping[str, str], budget_s: float) -> int | None:
        """Best effort (ending a legacy session); the status, or None if it failed."""
        timeout = min(budget_s, self.deadline.remaining())
        if timeout <= 0:
            return None
        try:
            with deadline_active(self.deadline):
                signed = self.sign("DELETE", self.url, b"") if self.sign else {}
                response = self.client.delete(self.url, headers={**self.headers, **headers, **signed}, timeout=timeout)
        except httpx.HTTPError:
            return None
        return response.status_code

    def _post(self, method: str, body: dict[str, Any], request_id: int | None, headers: Mapping[str, str]) -> Answer:
        timings = _Timings(started=time.perf_counter())
        content = json.dumps(body, separators=(",", ":")).encode()
        timeout = self.deadline.timeout_for(f"before sending {method}")
        request = self.client.build_request(
            "POST",
            self.url,
            content=content,
            headers={
                "accept": ACCEPT,
                "accept-encoding": ACCEPT_ENCODING,
                "content-type": JSON_TYPE,
                **self.headers,
                **headers,
                **(self.sign("POST", self.url, content) if self.sign else {}),
            },
            timeout=httpx.Timeout(timeout),
            extensions={"trace": timings.trace},
        )
        with deadline_active(self.deadline):
            return self._exchange(method, request, request_id, timings)

    def _exchange(self, method: str, request: httpx.Request, request_id: int | None, timings: _Timings) -> Answer:
        try:
            response = self.client.send(request, stream=True)
        except httpx.TimeoutException:
            raise ProbeTimeoutError(
                f"{method}: no response within the {self.deadline.seconds:.3g} s deadline ({self._where(timings)})"
            ) from None
        except httpx.HTTPError as exc:
            raise ProbeHttpError(f"{method}: could not reach {self.url}: {type(exc).__name__}: {exc}", status=0) from None
        try:
            message, excerpt = self._read(response, method, request_id)
        except httpx.TimeoutException:
            raise ProbeTimeoutError(
                f"{method}: response not complete within the {self.deadline.seconds:.3g} s deadline "
                f"(HTTP {response.status_code}, {_media_type(response.headers) or 'no content type'})"
            ) from None
        except httpx.HTTPError as exc:
            raise ProbeHttpError(
                f"{method}: connection failed while reading the response: {type(exc).__name__}: {exc}",
                status=response.status_code,
            ) from None
        finally:
            response.close()
        done = time.perf_counter()
        first = timings.first_byte if timings.first_byte is not None else done
        return Answer(
            method=method,
            status=response.status_code,
            headers=response.headers,
            content_type=_media_type(response.headers),
            message=message,
            body_excerpt=excerpt,
            connect_ms=timings.connect_ms(),
            first_byte_ms=(first - timings.started) * 1000,
            total_ms=(done - timings.started) * 1000,
        )

    def _where(self, timings: _Timings) -> str:
        if timings.connect_started is not None and timings.connect_done is None:
            return "while connecting"
        if timings.first_byte is None:
            return "waiting for the first byte"
        return "reading the body"

    def _chunks(self, response: httpx.Response, method: str) -> Iterator[bytes]:
        return decoded_pieces(response, self.deadline, self.budget, method)

    def _read(self, response: httpx.Response, method: str, request_id: int | None) -> tuple[dict[str, Any] | None, str]:
        media = _media_type(response.headers)
        if request_id is not None and response.status_code == 200 and media == SSE_TYPE:
            return self._read_sse(response, method, request_id)
        raw = bytearray()
        for chunk in self._chunks(response, method):
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                raise ProbeLimitError(f"{method}: response body larger than {MAX_BODY_BYTES} bytes")
        excerpt = bytes(raw[:_EXCERPT]).decode("utf-8", errors="replace")
        if request_id is None or media != JSON_TYPE or not raw:
            return None, excerpt
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            if response.status_code >= 400:
                return None, excerpt  # an error page that claims to be JSON: the status says it all
            raise ProbeProtocolError(f"{method}: response is not valid JSON: {excerpt!r}") from None
        if response.status_code >= 400:
            # An error status explains itself; a JSON-RPC error body adds detail if present.
            is_rpc_error = isinstance(decoded, dict) and isinstance(decoded.get("error"), dict)
            return (decoded if is_rpc_error else None), excerpt
        if isinstance(decoded, list):  # a JSON-RPC batch answer (2025-03-26 allowed them)
            decoded = next((m for m in decoded if _matches(m, request_id)), None)
        if not isinstance(decoded, dict):
            raise ProbeProtocolError(f"{method}: response is not a JSON-RPC object: {excerpt!r}")
        if not _same_id(decoded.get("id"), request_id):
            error = decoded.get("error")
            detail = f" ({rpc_error_text(error)})" if isinstance(error, dict) else ""
            raise ProbeProtocolError(
                f"{method}: response id {decoded.get('id')!r:.40} does not match request id {request_id}{detail}")
        return _validate_response(decoded, method), excerpt

    def _read_sse(self, response: httpx.Response, method: str, request_id: int) -> tuple[dict[str, Any] | None, str]:
        decoder = SseDecoder()
        seen = 0
        for chunk in self._chunks(response, method):
            for event, data in decoder.feed(chunk):
                seen += 1
                if event != "message":
                    continue
                try:
                    decoded = json.loads(data)
                except (ValueError, RecursionError):
                    raise ProbeProtocolError(f"{method}: SSE event is not valid JSON: {data[:_EXCERPT]!r}") from None
                candidates = decoded if isinstance(decoded, list) else [decoded]
                for message in candidates:
                    if _matches(message, request_id):
                        # Our answer: stop reading (a legacy stream may stay open).
                        return _validate_response(message, method), data[:_EXCERPT]
        raise ProbeProtocolError(
            f"{method}: SSE stream ended after {seen} event(s) without the response to request {request_id}"
        )
