"""A small MCP client for the local edge: the official SDK, with a token from the dev issuer
or doing OAuth itself (the SDK's OAuth client provider, from the 401 on).

``python -m local client`` lists the tools and calls one, printing progress as it
arrives and which region served each call, to show the whole path (edge function,
router, origin, SSE) working.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client

from local.plan import token_for

__all__ = ["ServedRegions", "connect", "demo", "token_for"]

SERVED_REGION_HEADER = "x-mcp-edge-served-region"


class ServedRegions:
    """The region each response named (an httpx2 response hook)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, response: httpx2.Response) -> None:
        region = response.headers.get(SERVED_REGION_HEADER)
        if region:
            self.seen.append(region)

    def since(self, mark: int) -> str:
        regions = list(dict.fromkeys(self.seen[mark:]))
        return ", ".join(regions) if regions else "no region named (answered by the edge)"


def connect(url: str, token: str | None, *, mode: str = "auto", headers: dict[str, str] | None = None,
            auth: httpx2.Auth | None = None, served: ServedRegions | None = None) -> mcp.Client:
    """An SDK client for ``url`` sending the bearer token, or authorizing through ``auth`` (an
    SDK OAuth provider), and any extra headers on every request."""
    base = {"authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(
        headers={**base, **(headers or {})},
        timeout=httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        event_hooks={"response": [served]} if served is not None else {},
    )
    return mcp.Client(streamable_http_client(url, http_client=http), mode=mode)


async def demo(url: str, token: str | None, *, mode: str, tool: str | None, arguments: dict[str, Any],
               country: str | None, out: Callable[[str], None] = print, auth: httpx2.Auth | None = None) -> None:
    headers = {"cloudfront-viewer-country": country} if country else {}
    served = ServedRegions()
    async with connect(url, token, mode=mode, headers=headers, auth=auth, served=served) as client:
        out(f"connected to {url} (protocol {client.protocol_version}, mode {mode}; served by {served.since(0)})")
        mark = len(served.seen)
        tools = await client.list_tools()
        out("tools: " + ", ".join(t.name for t in tools.tools) + f" (served by {served.since(mark)})")
        name = tool or ("countdown" if any(t.name == "countdown" for t in tools.tools) else tools.tools[0].name)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            out(f"  progress {progress:g}/{total if total is not None else '?'} {message or ''}")

        mark = len(served.seen)
        result = await client.call_tool(name, arguments, progress_callback=progress)
        payload = result.structured_content if result.structured_content is not None else [
            c.model_dump(mode="json") for c in result.content]
        out(f"{name} -> {json.dumps(payload)}" + (" (error)" if result.is_error else "")
            + f" (served by {served.since(mark)})")
