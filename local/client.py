"""A small MCP client for the local edge: the official SDK, a token from the dev issuer.

``python -m local client`` lists the tools and calls one, printing progress as it
arrives, to show the whole path (edge function, router, origin, SSE) working.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client

from local.plan import token_for

__all__ = ["connect", "demo", "token_for"]


def connect(url: str, token: str, *, mode: str = "auto", headers: dict[str, str] | None = None) -> mcp.Client:
    """An SDK client for ``url`` sending the bearer token (and any extra headers) on every request."""
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {token}", **(headers or {})},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    return mcp.Client(streamable_http_client(url, http_client=http), mode=mode)


async def demo(url: str, token: str, *, mode: str, tool: str | None, arguments: dict[str, Any],
               country: str | None, out: Callable[[str], None] = print) -> None:
    headers = {"cloudfront-viewer-country": country} if country else {}
    async with connect(url, token, mode=mode, headers=headers) as client:
        out(f"connected to {url} (protocol {client.protocol_version}, mode {mode})")
        tools = await client.list_tools()
        out("tools: " + ", ".join(t.name for t in tools.tools))
        name = tool or ("countdown" if any(t.name == "countdown" for t in tools.tools) else tools.tools[0].name)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            out(f"  progress {progress:g}/{total if total is not None else '?'} {message or ''}")

        result = await client.call_tool(name, arguments, progress_callback=progress)
        payload = result.structured_content if result.structured_content is not None else [
            c.model_dump(mode="json") for c in result.content]
        out(f"{name} -> {json.dumps(payload)}" + (" (error)" if result.is_error else ""))
