"""Long calls survive CloudFront's read timeout: they stream, with keep-alives.

CloudFront waits at most its origin read timeout (4-60 s here) *between packets* and
answers 504 to a POST that stays silent longer, while the function keeps running.
The official MCP SDK already keeps a response alive once it streams, in both eras:

- 2026-07-28 (the SDK's single-exchange transport, ``json_response=False``): a
  handler that completes within ``_SSE_PING_INTERVAL`` answers plain JSON; one still
  silent then commits ``text/event-stream`` and gets a ``: ping`` comment at that
  interval until it completes;
- handshake era (the SDK's streamable HTTP transport, ``json_response=False``): the
  answer is an ``EventSourceResponse``, SSE from its first byte, pinging every
  ``DEFAULT_PING_INTERVAL``.

So the origin only has to send every handshake-era request that runs a tool, resource
or prompt handler (the requests that may run long) to the streaming transport when
the client accepts SSE (the handshake-era spec says clients list both types); the
rest keep the cheaper plain-JSON transport. ``sdk_keepalive_s`` is the longest
silence the SDK's streaming leaves, which the stack config's read-timeout rule
(``ORIGIN_SSE_KEEPALIVE_S`` in ``edge.protocol``) is tested against.
"""

from __future__ import annotations

from typing import Any

from mcp.server import _streamable_http_modern
from sse_starlette import EventSourceResponse

# Handshake-era methods whose handler is the server's own code and may run long.
HANDLER_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


def sdk_keepalive_s() -> float:
    """Seconds the SDK's streaming lets a response stay silent, at most (both eras)."""
    return max(float(_streamable_http_modern._SSE_PING_INTERVAL), float(EventSourceResponse.DEFAULT_PING_INTERVAL))


def accepts_sse(accept: str | None) -> bool:
    """Whether an ``Accept`` value admits ``text/event-stream``, as the SDK's
    ``check_accept_headers`` reads it (media types without parameters, ``*/*``,
    ``text/*``): the streaming path answers 406 to a request that does not."""
    types = {t.split(";")[0].strip().lower() for t in (accept or "").split(",")}
    return not types.isdisjoint(("text/event-stream", "text/*", "*/*"))


def handshake_request_streams(message: Any, accept: str | None) -> bool:
    """A handshake-era request to answer through the SDK's streaming transport: one
    that runs a handler (it may outlast CloudFront's read timeout), from a client
    that accepts SSE. A client that accepts only JSON keeps plain JSON."""
    return isinstance(message, dict) and message.get("method") in HANDLER_METHODS and accepts_sse(accept)
