"""The server's tools: the one module to edit to ship your own.

Each tool is a typed function registered on the SDK's ``MCPServer``; the SDK derives
its input schema from the signature and its description from the docstring. A tool
that takes a ``Context`` can report progress: the origin then answers that call as
an SSE stream (the Function URL's RESPONSE_STREAM carries it), every other call as
plain JSON.

The origin is stateless: a tool must not rely on anything kept between requests
(another request may land on another instance, or in another region).
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

MAX_COUNTDOWN_STEPS = 50
MAX_COUNTDOWN_INTERVAL_S = 2.0


class ServedBy(BaseModel):
    region: str = Field(description="AWS region (or 'local') whose origin answered")
    server: str = Field(description="Name of the MCP server")


class CountdownResult(BaseModel):
    steps: int
    message: str


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
