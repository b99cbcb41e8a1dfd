"""The server's tools: the one module to edit to ship your own.

Each tool is a typed function registered on the SDK's ``MCPServer``; the SDK derives
its input schema from the signature and its description from the docstring. A tool
that takes a ``Context`` can report progress: the origin then answers that call as
an SSE stream (the Function URL's RESPONSE_STREAM carries it), every other call as
plain JSON.

The origin is stateless: a tool must not rely on anything kept between requests
(another request may land on another instance, or in another region).

A tool may need OAuth scopes beyond a valid token: declare them next to the tool
(``@tool(..., scopes=("files:write",))``). A call whose token lacks one is refused
before the tool runs with ``403`` and ``WWW-Authenticate: Bearer error="insufficient_scope",
scope="..."``, so the client can ask for them (MCP step-up authorization); ``tools/list``
still lists every tool (the spec does not ask to hide them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

MAX_COUNTDOWN_STEPS = 50
MAX_COUNTDOWN_INTERVAL_S = 2.0
# The scope a token needs for whoami (it reveals who the token is for).
IDENTITY_SCOPE = "mcp:identity"
F = TypeVar("F", bound=Callable[..., Any])


class ServedBy(BaseModel):
    region: str = Field(description="AWS region (or 'local') whose origin answered")
    server: str = Field(description="Name of the MCP server")


class CountdownResult(BaseModel):
    steps: int
    message: str


class Caller(BaseModel):
    client_id: str = Field(description="OAuth client the token was issued to")
    subject: str | None = Field(description="Resource owner (sub claim), if any")
    scopes: list[str] = Field(description="Scopes the token grants")


def register_tools(server: MCPServer, *, served_region: str) -> Mapping[str, tuple[str, ...]]:
    """Add this server's tools to ``server``; answers the scopes each scoped tool needs."""
    scopes_by_tool: dict[str, tuple[str, ...]] = {}

    def tool(*, title: str, scopes: tuple[str, ...] = ()) -> Callable[[F], F]:
        def register(fn: F) -> F:
            if scopes:
                scopes_by_tool[fn.__name__] = scopes
            return server.tool(title=title)(fn)

        return register

    @tool(title="Echo")
    def echo(text: str = Field(description="Text to send back", max_length=10_000)) -> str:
        """Return the text unchanged: a quick round trip."""
        return text

    @tool(title="Countdown with progress")
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

    @tool(title="Which region served this call")
    def served_by() -> ServedBy:
        """Report which regional origin answered (for routing checks and probes)."""
        return ServedBy(region=served_region, server=server.name)

    @tool(title="Who is calling", scopes=(IDENTITY_SCOPE,))
    def whoami() -> Caller:
        """Report the OAuth client, subject and scopes of the caller's token."""
        token = get_access_token()
        if token is None:  # the origin serves no request without a verified token
            raise ValueError("no verified access token in this request")
        return Caller(client_id=token.client_id, subject=token.subject, scopes=list(token.scopes))

    return scopes_by_tool
