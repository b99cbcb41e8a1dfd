"""What to tell a server's author when their server will fail on Lambda, in one place: the
probes say it (``functions/probe``), and so does the local twin (``scripts/run-local``,
``local/``), word for word. Plain text, no imports: the probe package ships it alone.

- ``stateful_server_advice()``: the server issues ``mcp-session-id`` and wants it back; on
  Lambda the next request may reach another instance, which never saw that session.
- ``host_check_advice(status, body)``: the answer is an SDK's DNS-rebinding protection
  refusing the Function URL's Host (the Python SDK answers 421, the TypeScript SDK 403
  "Invalid Host"); None for any other answer.
"""

from __future__ import annotations

import re

# The Host a Lambda Function URL request carries (what the Web Adapter passes the server).
FUNCTION_URL_HOST = "<url-id>.lambda-url.<region>.on.aws"
# A pattern an allow-list can take for it (fnmatch style, as the Python SDK's allowed_hosts).
FUNCTION_URL_HOST_PATTERN = "*.lambda-url.*.on.aws"

_INVALID_HOST = re.compile(r"invalid host|host header|misdirected|host not (allowed|served)", re.IGNORECASE)


def stateful_server_advice() -> str:
    """Why a server that keeps sessions in memory fails behind the edge, and the setting that fixes it."""
    return (
        "Your server is stateful: it answered with an mcp-session-id header and expects it back on every request. "
        "On Lambda each request may reach another instance of the function, which never saw that session, so "
        "clients get 400 \"Missing session ID\" or 404 \"Session not found\". Make the server stateless: "
        "FastMCP: FastMCP(\"name\", stateless_http=True) (or mcp.run(transport=\"http\", stateless_http=True)); "
        "the MCP Python SDK: FastMCP(\"name\", stateless_http=True), or StreamableHTTPSessionManager(app, "
        "stateless=True) with the low-level server; the MCP TypeScript SDK: new StreamableHTTPServerTransport("
        "{ sessionIdGenerator: undefined })."
    )


def host_check_advice(status: int, body: str) -> str | None:
    """The advice for an answer that is a DNS-rebinding check refusing the Function URL's Host
    (421 from the Python SDK, whatever its body; 403 whose body names the Host from the
    TypeScript SDK), else None."""
    if status == 421 or (status in (400, 403) and _INVALID_HOST.search(body or "")):
        return (
            f"Your server refused the Host header (it answered {status}): its DNS-rebinding protection accepts "
            f"only localhost, and on Lambda every request carries the Function URL's Host, {FUNCTION_URL_HOST}. "
            "The edge checks the viewer's Host and Origin before a request reaches the server, so allow that "
            "host or turn the check off: the MCP Python SDK and FastMCP: transport_security="
            "TransportSecuritySettings(enable_dns_rebinding_protection=False), or allowed_hosts="
            f"[\"{FUNCTION_URL_HOST_PATTERN}\"] in it; the MCP TypeScript SDK: leave out its host validation "
            "(createMcpExpressApp({ host: \"0.0.0.0\" }) adds none; no allowedHosts/enableDnsRebindingProtection "
            "on the transport), or allow hosts matching /^[a-z0-9]+\\.lambda-url\\.[a-z0-9-]+\\.on\\.aws$/."
        )
    return None
