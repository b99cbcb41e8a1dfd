"""What a server author must change when their server works on a laptop and will not on Lambda.

One module for every place that says it: the probe's errors and degraded reasons
(``exchange.py``, ``probe.py``), the local twin and ``scripts/run-local`` (``local/``: the
local Function URL's notices), so the words and the settings named are the same wherever a
user meets them, word for word. No imports: the probe ships it as ``probe.advice``.

- ``stateful_server_advice()``: the server issues ``mcp-session-id`` and wants it back; on
  Lambda the next request may reach another instance, which never saw that session.
- ``host_check_advice(status, body)``: the answer is an SDK's DNS-rebinding protection
  refusing the Function URL's Host; None for any other answer.

The settings named were read in the SDKs' own sources:

- Python SDK (``mcp`` 2.x): ``MCPServer.streamable_http_app(stateless_http=...,
  transport_security=...)`` (also ``run("streamable-http", ...)``; the low-level server's
  ``StreamableHTTPSessionManager(app, stateless=True)``; mcp 1.x took them in ``FastMCP(...)``); ``mcp/server/transport_security.py`` answers 421 "Invalid Host
  header" when ``TransportSecuritySettings.enable_dns_rebinding_protection`` is on and the Host
  is not in ``allowed_hosts`` (on by default for a server bound to 127.0.0.1/localhost);
  ``streamable_http.py`` answers 400 "Bad Request: Missing session ID" and
  ``streamable_http_manager.py`` 404 "Session not found".
- FastMCP (``fastmcp``, 4.x): ``mcp.run(transport="http", stateless_http=True,
  host_origin_protection=..., allowed_hosts=[...])`` (``server/mixins/transport.py``; also
  ``http_app(...)`` and ``FASTMCP_STATELESS_HTTP``; ``FastMCP(..., stateless_http=...)`` is
  refused there, ``server/server.py`` ``_REMOVED_KWARGS``); its guard answers 421 "Misdirected Request" (``server/http.py``);
  ``allowed_hosts`` takes wildcards such as ``*.lambda-url.*.on.aws``.
- TypeScript SDK (``@modelcontextprotocol/sdk``): ``createMcpExpressApp()`` binds 127.0.0.1 by
  default and then validates Host against localhost only (``src/server/express.ts``),
  answering 403 "Invalid Host: <host>"; ``createMcpExpressApp({ host: '0.0.0.0' })`` or
  ``allowedHosts`` change that. ``StreamableHTTPServerTransport({ sessionIdGenerator:
  undefined })`` is its stateless mode.
"""

from __future__ import annotations

# The Host a Function URL request carries on AWS (the id is known only once the function exists).
FUNCTION_URL_HOST = "<url-id>.lambda-url.<region>.on.aws"
FUNCTION_URL_HOST_PATTERN = "*.lambda-url.*.on.aws"
# What the SDKs answer to a Host outside their allow-list: Python SDK 421 "Invalid Host header",
# FastMCP 421 "Misdirected Request", TypeScript SDK 403 "Invalid Host: <host>".
_HOST_REFUSAL_STATUSES = (400, 403, 421)
_HOST_REFUSAL_WORDS = ("invalid host", "misdirected request", "host header", "host not allowed", "host not served")


def stateful_server_advice() -> str:
    """Why a server that issues session ids fails on Lambda, and the one setting per SDK that fixes it."""
    return (
        "the server is stateful: it answered initialize with an mcp-session-id header and refuses requests that do "
        "not bring it back to the instance holding that session. On Lambda each request may reach another "
        "instance, which never saw the session, so clients get 400 \"Missing session ID\" or 404 \"Session not "
        "found\". Make the server stateless: FastMCP `mcp.run(transport=\"http\", stateless_http=True)` (or "
        "`http_app(stateless_http=True)`, or FASTMCP_STATELESS_HTTP=true); the MCP Python SDK "
        "`MCPServer(...).streamable_http_app(stateless_http=True)` or `mcp.run(\"streamable-http\", "
        "stateless_http=True)` (mcp 1.x: `FastMCP(\"name\", stateless_http=True)`), and with the low-level server "
        "`StreamableHTTPSessionManager(app, stateless=True)`; the MCP TypeScript SDK "
        "`new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })`"
    )


def is_host_refusal(status: int, body: str) -> bool:
    """Whether an answer is an SDK's DNS-rebinding protection refusing the request's Host.

    421 (Misdirected Request) is about the Host whatever the body says; 400 and 403 only
    with the SDKs' words for it (a 403 alone is as likely a refused token)."""
    if status == 421:
        return True
    text = body.lower()
    return status in _HOST_REFUSAL_STATUSES and any(word in text for word in _HOST_REFUSAL_WORDS)


def host_check_advice(status: int, body: str) -> str | None:
    """The cause and the fix of an answer that is a Host-check refusal, else None."""
    if not is_host_refusal(status, body):
        return None
    return (
        f"the server refused the request's Host header (it answered {status}): its DNS-rebinding protection "
        f"accepts only localhost, but on AWS every request reaches it through a Lambda Function URL with "
        f"Host: {FUNCTION_URL_HOST}. Only the edge's SigV4-signed requests reach a Function URL, and the edge "
        f"has checked the viewer's Host and Origin, so allow that host or turn the check off. The MCP Python SDK: "
        f"`streamable_http_app(transport_security=TransportSecuritySettings("
        f"enable_dns_rebinding_protection=False))` (or its allowed_hosts); FastMCP: "
        f"`mcp.run(transport=\"http\", allowed_hosts=[\"{FUNCTION_URL_HOST_PATTERN}\"])` "
        f"(or host_origin_protection=False); the MCP TypeScript SDK: `createMcpExpressApp({{ host: '0.0.0.0' }})` "
        f"(no Host check) or `allowedHosts` listing the Function URL's host"
    )
