"""What the examples' tests do with a running example: an official Python SDK client
session (``mcp.Client``) in a chosen mode, and raw HTTP requests for what a client never
shows (status codes, headers)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx
from mcp import Client

JSON_AND_SSE = "application/json, text/event-stream"
HANDSHAKE_VERSION = "2025-11-25"
FUNCTION_URL_HOST = "abcdefghij0123456789klmnopqrstuv.lambda-url.eu-west-1.on.aws"


@dataclass
class Session:
    """What one client session negotiated and got back."""

    protocol_version: str
    tool_names: list[str]
    stats: Any
    digest: Any
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)


async def _session(url: str, mode: str, text: str, rounds: int) -> Session:
    reported: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, total, message))

    async with Client(url, mode=mode, read_timeout_seconds=20) as client:
        tools = await client.list_tools()
        stats = await client.call_tool("text_stats", {"text": text, "top": 2})
        digest = await client.call_tool("hash_rounds", {"text": text, "rounds": rounds}, progress_callback=on_progress)
        assert not stats.is_error, stats
        assert not digest.is_error, digest
        return Session(protocol_version=client.protocol_version, tool_names=sorted(t.name for t in tools.tools),
                       stats=stats, digest=digest, progress=reported)


def run_session(url: str, mode: str, text: str, rounds: int) -> Session:
    return asyncio.run(_session(url, mode, text, rounds))


def post(url: str, message: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    """One JSON-RPC request as a handshake-era client sends it (no session id: stateless)."""
    sent = {"content-type": "application/json", "accept": JSON_AND_SSE, "mcp-protocol-version": HANDSHAKE_VERSION,
            **(headers or {})}
    return httpx.post(url, json=message, headers=sent, timeout=10)


def initialize(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
        "clientInfo": {"name": "examples-test", "version": "1"}}}, headers)


def tools_list(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, headers)
