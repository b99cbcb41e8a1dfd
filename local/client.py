"""A small MCP client for the local edge: the official SDK, with a token from the dev issuer
or doing OAuth itself (the SDK's OAuth client provider, from the 401 on).

``python -m local client`` lists the tools and calls one, printing progress as it
arrives and which region served each call, to show the whole path (edge function,
router, origin, SSE) working.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client

from local.plan import token_for

__all__ = ["EdgeRefusedError", "ErrorResponses", "ServedRegions", "connect", "demo", "token_for"]

SERVED_REGION_HEADER = "x-mcp-edge-served-region"
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class EdgeRefusedError(RuntimeError):
    """The edge (or the origin behind it) answered an HTTP error: the message says which,
    and what to do about it. The SDK itself reports only "Server returned an error response"."""

    def __init__(self, status: int, url: str, challenge: str, body: str):
        self.status, self.url = status, url
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        self.error = str(params.get("error") or data.get("error") or "")
        self.scope = str(params.get("scope") or data.get("scope") or "")
        description = str(params.get("error_description") or data.get("error_description")
                          or data.get("message") or data.get("Message") or "")
        head = f"{url} answered HTTP {status}" + (f" {self.error}" if self.error else "")
        super().__init__(head + (f": {description}" if description else "") + "\n" + self._hint())

    def _hint(self) -> str:
        if self.error == "insufficient_scope" and self.scope:
            return f"ask for the scope it names: scripts/run-local client --scope '{self.scope}' (or token --scope)"
        if self.error == "insufficient_scope":
            return "the token lacks a scope this call needs: ask for it with --scope"
        if self.status == 401:
            return "the token was refused (expired, or from another run's issuer): get a new one, or use --oauth"
        if self.status == 404:
            return "nothing is served at that path: check --url (default: the local edge's MCP endpoint)"
        if self.status >= 500:
            return "the edge or an origin failed: the status page and .local/<stack>/logs/ say which"
        return "see the answer above"


class ErrorResponses:
    """The last HTTP error response (an httpx2 response hook), to explain what the SDK
    reports only as an error."""

    def __init__(self) -> None:
        self.last: EdgeRefusedError | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        # Only the JSON-RPC POSTs: a GET for the optional SSE stream may be refused (405)
        # without anything failing, and an OAuth flow's 401 is followed by a success.
        if response.request.method != "POST":
            return
        if response.status_code < 400:
            self.last = None
        else:
            await response.aread()
            self.last = EdgeRefusedError(response.status_code, str(response.request.url),
                                         response.headers.get("www-authenticate", ""), response.text[:2000])


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
            auth: httpx2.Auth | None = None, served: ServedRegions | None = None,
            errors: ErrorResponses | None = None) -> mcp.Client:
    """An SDK client for ``url`` sending the bearer token, or authorizing through ``auth`` (an
    SDK OAuth provider), and any extra headers on every request."""
    base = {"authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(
        headers={**base, **(headers or {})},
        timeout=httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        event_hooks={"response": [hook for hook in (served, errors) if hook is not None]},
    )
    return mcp.Client(streamable_http_client(url, http_client=http), mode=mode)


async def demo(url: str, token: str | None, *, mode: str, tool: str | None, arguments: dict[str, Any],
               country: str | None, out: Callable[[str], None] = print, auth: httpx2.Auth | None = None) -> None:
    errors = ErrorResponses()
    try:
        await _demo(url, token, mode=mode, tool=tool, arguments=arguments, country=country, out=out, auth=auth,
                    errors=errors)
    except Exception as exc:
        # The SDK turns an HTTP error into "Server returned an error response" inside
        # exception groups: say what the server answered instead.
        if errors.last is not None:
            raise errors.last from exc
        raise


async def _demo(url: str, token: str | None, *, mode: str, tool: str | None, arguments: dict[str, Any],
                country: str | None, out: Callable[[str], None], auth: httpx2.Auth | None,
                errors: ErrorResponses) -> None:
    headers = {"cloudfront-viewer-country": country} if country else {}
    served = ServedRegions()
    async with connect(url, token, mode=mode, headers=headers, auth=auth, served=served, errors=errors) as client:
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
