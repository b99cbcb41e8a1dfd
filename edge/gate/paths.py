"""Which requests the gate lets through, by path, method and query string, before any token.

``route(method, uri, querystring, headers, table)`` names what a request is, or raises
``RefusedError`` with the status, the reason token of the refusal mark and a message:

- the RFC 9728 metadata paths (``table.metadata_paths``): ``GET``/``HEAD`` -> ``METADATA``
  (served by the gate), a CORS preflight -> ``METADATA_PREFLIGHT`` (answered by the gate),
  anything else 405;
- a path of ``table.routes`` (public path -> ``{"kind": "mcp", "get_stream": bool,
  "origin_path": str}`` or ``{"kind": "readiness", "origin_path": str}``; one MCP path
  today, ``/<name>/mcp`` rows with the many-servers issue), compared byte for byte with the
  request's URI: no percent-decoding, no dot segments or duplicate slashes resolved, no case
  folding. ``/MCP``, ``//mcp``, ``/./mcp``, ``/%6Dcp`` and ``/mcp/`` are other paths,
  whatever a server might make of them. A forwarded request goes to the row's
  ``origin_path`` (``origin_path(uri, table)``: the server's own path, which its public
  path maps onto), so an origin sees its MCP path only as configured, whatever the viewer
  sent; a client uses the URL the metadata names;
- any other path: 404.

On a listed path a query string is refused (400: MCP sends none, and what is refused
before signing can never reach the signer). On the MCP path: ``POST`` -> ``MCP``; a real
CORS preflight (``Origin`` and ``Access-Control-Request-Method``, from an allowed origin)
-> ``PREFLIGHT``, any other ``OPTIONS`` 403 (a disallowed origin) or 405; ``GET`` -> ``MCP``
only where the server streams on GET (``get_stream``), else 405 with ``Allow: POST``, as
Streamable HTTP allows; every other method 405. On the readiness path: ``GET``/``HEAD`` ->
``READINESS`` (the handler forwards it for the probes' verified client only), else 405.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
    from typing import Any

METADATA = "metadata"
METADATA_PREFLIGHT = "metadata-preflight"
MCP = "mcp"
PREFLIGHT = "preflight"
READINESS = "readiness"
READ_METHODS = ("GET", "HEAD")


class RefusedError(Exception):
    """A request the gate answers itself: ``status``, ``reason`` (the refusal mark's token),
    the message, and the ``Allow`` value of a 405."""

    def __init__(self, status: int, reason: str, message: str, allow: str | None = None):
        super().__init__(message)
        self.status, self.reason, self.allow = status, reason, allow


class RouteTable:
    """The paths the gate serves or forwards, from the rendered gate config."""

    def __init__(self, routes: Mapping[str, Mapping[str, Any]], metadata_paths: Collection[str],
                 allowed_origins: Collection[str]):
        self.routes = dict(routes)
        self.metadata_paths = frozenset(metadata_paths)
        self.allowed_origins = frozenset(allowed_origins)
        self.mcp_paths = sorted(p for p, r in self.routes.items() if r.get("kind") == MCP)

    def origin_path(self, uri: str) -> str:
        """Where a routed request goes on the origin: its row's ``origin_path`` (the server's
        own path), the public path itself for a row without one."""
        return str(self.routes[uri].get("origin_path") or uri)


def _one(headers: Mapping[str, Any], name: str) -> str | None:
    """The value of a header sent exactly once, without its optional whitespace; None otherwise."""
    entries = headers.get(name)
    if not entries or len(entries) != 1:
        return None
    value = str(entries[0].get("value", "")).strip(" \t")
    return value or None


def is_preflight(headers: Mapping[str, Any]) -> bool:
    """A CORS preflight: one ``Origin`` and one ``Access-Control-Request-Method``."""
    return _one(headers, "origin") is not None and _one(headers, "access-control-request-method") is not None


def not_found(table: RouteTable) -> RefusedError:
    where = " or ".join(table.mcp_paths) or "configured"
    return RefusedError(404, "not-found", f"no MCP endpoint at this path: the MCP endpoint is {where}, exactly")


def _not_allowed(what: str, allow: str) -> RefusedError:
    return RefusedError(405, "method-not-allowed", f"{what}; this path allows {allow}", allow)


def route(method: str, uri: Any, querystring: Any, headers: Mapping[str, Any], table: RouteTable) -> str:
    """What the request is (``METADATA``, ``METADATA_PREFLIGHT``, ``MCP``, ``PREFLIGHT``,
    ``READINESS``); ``RefusedError`` when the gate answers it itself."""
    if uri in table.metadata_paths:
        if method in READ_METHODS:
            return METADATA
        if method == "OPTIONS" and is_preflight(headers):
            return METADATA_PREFLIGHT
        raise _not_allowed(f"{method} is not served on the resource metadata", "GET, HEAD")
    entry = table.routes.get(uri) if isinstance(uri, str) else None
    if entry is None:
        raise not_found(table)
    if querystring:
        raise RefusedError(400, "bad-request", "the MCP endpoint takes no query string: send the request to "
                                          f"{uri} without '?...'")
    if entry.get("kind") == READINESS:
        if method in READ_METHODS:
            return READINESS
        raise _not_allowed(f"{method} is not served on the readiness path", "GET, HEAD")
    allow = "GET, POST" if entry.get("get_stream") else "POST"
    if method == "POST" or (method == "GET" and entry.get("get_stream")):
        return MCP
    if method == "OPTIONS":
        if not is_preflight(headers):
            raise _not_allowed("OPTIONS without Origin and Access-Control-Request-Method is not a CORS preflight",
                               allow)
        if _one(headers, "origin") not in table.allowed_origins:
            raise RefusedError(403, "origin-not-allowed", "Origin not allowed")
        return PREFLIGHT
    if method == "GET":
        raise _not_allowed("this server offers no GET stream (it answers each POST)", allow)
    if method == "DELETE":
        raise _not_allowed("the server keeps no session to DELETE", allow)
    raise _not_allowed(f"{method} is not an MCP method", allow)
