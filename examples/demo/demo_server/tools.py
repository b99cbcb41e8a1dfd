"""The server's tools: the one module to edit to change what the demo serves.

Each tool is a typed function registered on the SDK's ``MCPServer``; the SDK derives
its input schema from the signature and its description from the docstring, and its
output schema from the return type (structured output). A tool that takes a
``Context`` can report progress: the server then answers that call as an SSE stream
(the Function URL's RESPONSE_STREAM carries it), every other call as plain JSON.

The server is stateless: a tool must not rely on anything kept between requests
(another request may land on another instance, or in another region).

Authorization is the edge's: it verifies every bearer token and, for a tool listed in
the stack's ``server.toolScopes``, the scopes a call needs (``whoami`` is meant to need
``mcp:identity``: it reveals who the token is for). What the edge verified reaches a tool
in headers the edge always sets and replaces (``settings.EDGE_*_HEADER``).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from .settings import EDGE_CLIENT_ID_HEADER, EDGE_SCOPES_HEADER, EDGE_SUBJECT_HEADER

MAX_COUNTDOWN_STEPS = 50
MAX_COUNTDOWN_INTERVAL_S = 2.0
# The scope the stack is meant to require for whoami (server.toolScopes).
IDENTITY_SCOPE = "mcp:identity"


class ServedBy(BaseModel):
    region: str = Field(description="AWS region (or 'local') whose origin answered")
    server: str = Field(description="Name of the MCP server")


class CountdownResult(BaseModel):
    steps: int
    message: str


class Caller(BaseModel):
    client_id: str | None = Field(description="OAuth client the token was issued to, if the token names one")
    subject: str | None = Field(description="Resource owner (sub claim), if any")
    scopes: list[str] = Field(description="Scopes the token grants")


def caller_from_headers(headers: Mapping[str, str] | None) -> Caller:
    """The identity the edge verified, from its headers (percent-encoded where a claim is
    not printable ASCII). A request that carries none did not come through the edge."""
    headers = headers or {}
    if EDGE_SUBJECT_HEADER not in headers and EDGE_CLIENT_ID_HEADER not in headers:
        raise ToolError(f"no verified identity in this request: the edge sets {EDGE_SUBJECT_HEADER} and "
                         f"{EDGE_CLIENT_ID_HEADER} on every request it forwards")

    def value(name: str) -> str | None:
        raw = headers.get(name)
        return unquote(raw) if raw else None

    return Caller(client_id=value(EDGE_CLIENT_ID_HEADER), subject=value(EDGE_SUBJECT_HEADER),
                  scopes=(value(EDGE_SCOPES_HEADER) or "").split())


def register_tools(server: MCPServer, *, served_region: str) -> None:
    """Add this server's tools to ``server``."""

    @server.tool(title="Echo")
    def echo(text: str = Field(description="Text to send back", max_length=10_000)) -> str:
        """Return the text unchanged: a quick round trip."""
        return text

    @server.tool(title="Countdown with progress")
    async def countdown(
        ctx: Context,
        steps: int = Field(default=5, ge=1, le=MAX_COUNTDOWN_STEPS, description="How many steps to count"),
        interval_s: float = Field(
            default=0.2, ge=0.0, le=MAX_COUNTDOWN_INTERVAL_S, description="Seconds between steps"
        ),
    ) -> CountdownResult:
        """A long-running task: counts down, reporting progress after every step."""
        for done in range(1, steps + 1):
            await anyio.sleep(interval_s)
            await ctx.report_progress(done, total=steps, message=f"step {done} of {steps}")
        return CountdownResult(steps=steps, message=f"counted down {steps} steps")

    @server.tool(title="Which region served this call")
    def served_by() -> ServedBy:
        """Report which regional origin answered (for routing checks and probes)."""
        return ServedBy(region=served_region, server=server.name)

    @server.tool(title="Who is calling")
    def whoami(ctx: Context) -> Caller:
        """Report the OAuth client, subject and scopes of the caller's token, as the edge verified them."""
        return caller_from_headers(ctx.headers)
