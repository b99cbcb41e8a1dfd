"""The local edge's HTTP server protocol: uvicorn's httptools protocol, a response's
head sent to the viewer together with the body that follows it.

uvicorn writes a response's status line and headers as soon as the app starts the
response, and each body chunk as it comes; on uvloop every write is a ``send`` at once.
An answer the edge has whole (a sized JSON answer, read from the origin before it is
passed on) then reached the viewer as two segments, waking the viewer's process twice.
Here a write is held until the next write or the next turn of the event loop, whichever
comes first: held with the next, both go as one ``send`` (the head and the body of a
sized answer, sent one after the other); otherwise it goes at the start of the next
turn (``loop.call_soon``), so a streamed answer (SSE) still goes out chunk by chunk as
it arrives, nothing held back for more data. Everything else is uvicorn's.

The edge is served with ``--http local.cloudfront.http_protocol:EdgeHttpToolsProtocol``
(``EDGE_HTTP_PROTOCOL``, ``local/topology.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

EDGE_HTTP_PROTOCOL = "local.cloudfront.http_protocol:EdgeHttpToolsProtocol"


class CoalescingTransport:
    """A transport that holds one ``write`` until the next (then sends both as one) or
    the next loop turn; ``close`` and ``write_eof`` send what is held first. Every other
    attribute is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        data, self._held = self._held + bytes(data), None
        self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Send what is held, now."""
        data, self._held = self._held, None
        if data is not None and not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class EdgeHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a ``CoalescingTransport``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
