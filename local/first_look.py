"""What ``scripts/run-local`` learns of the user's server once the topology is up, and says.

- ``first_look(mcp_url, token)``: one handshake through the local edge (initialize, then
  tools/list), as a client makes it: the server's tools (for the banner), and whether it
  answered with ``mcp-session-id`` (stateful). It never raises: a server that fails the
  handshake is what the notices below explain.
- ``new_notices(folder, printed)``: what the local Function URLs noticed of the server (an
  ``mcp-session-id``, a Host check refusing the Function URL's Host), each the advice of
  ``functions.probe.advice``, once each: printed at start-up and whenever one appears.
- ``try_lines(...)``: the banner's suggestions, for what this server has (its tools, the
  stack's regions): no ``countdown`` unless it has one, no region it lacks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

PROTOCOL_VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
DEMO_TOOL = "countdown"  # the demo's tool that reports progress


@dataclass(frozen=True)
class Tool:
    name: str
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FirstLook:
    tools: tuple[Tool, ...] | None  # None: tools/list did not answer
    stateful: bool = False
    problem: str = ""  # what went wrong, for the log


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, JSON or an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = []
        for line in response.text.splitlines():
            if line.startswith("data:"):
                try:
                    found.append(json.loads(line[5:].strip()))
                except ValueError:
                    continue
        return [m for m in found if isinstance(m, dict)]
    try:
        message = response.json()
    except ValueError:
        return []
    return [message] if isinstance(message, dict) else [m for m in message if isinstance(m, dict)]


def first_look(mcp_url: str, token: str, timeout_s: float = 20.0) -> FirstLook:
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json", "accept": ACCEPT}
    try:
        with httpx.Client(timeout=timeout_s, headers=headers) as client:
            initialized = client.post(mcp_url, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                           "clientInfo": {"name": "scripts/run-local", "version": "1"}}})
            stateful = "mcp-session-id" in initialized.headers
            if initialized.status_code != 200:
                return FirstLook(None, stateful, f"initialize answered {initialized.status_code}")
            follow = {"mcp-protocol-version": PROTOCOL_VERSION}
            if stateful:
                follow["mcp-session-id"] = initialized.headers["mcp-session-id"]
            client.post(mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=follow)
            listed = client.post(mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=follow)
    except httpx.HTTPError as exc:
        return FirstLook(None, False, f"{type(exc).__name__}: {exc}")
    if listed.status_code != 200:
        return FirstLook(None, stateful, f"tools/list answered {listed.status_code}")
    for message in _messages(listed):
        result = message.get("result")
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            tools = tuple(Tool(str(t.get("name")), t.get("inputSchema") or {}) for t in result["tools"]
                          if isinstance(t, dict) and t.get("name"))
            return FirstLook(tools, stateful)
    return FirstLook(None, stateful, "tools/list answered no tools")


def new_notices(folder: Path, printed: set[str]) -> list[str]:
    """Advice the Function URLs left in ``folder`` and not yet in ``printed`` (one per kind,
    whichever region saw it first; ``printed`` grows by it)."""
    out: list[str] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return out
    for path in entries:
        kind, _, region = path.name.partition(".")
        if kind in printed:
            continue
        try:
            advice = path.read_text().strip()
        except OSError:
            continue
        printed.add(kind)
        out.append(f"origin in {region}: {advice}")
    return out


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Placeholder arguments for a tool's required properties, by their JSON Schema type."""
    properties = schema.get("properties") or {}
    examples = {"string": "text", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    return {name: examples.get(str((properties.get(name) or {}).get("type")), "value")
            for name in schema.get("required") or [] if isinstance(name, str)}


def try_lines(stack: str, tools: Sequence[Tool] | None, regions: Sequence[str], default_region: str) -> list[str]:
    """The banner's "Try it" commands for this server and stack (``stack``: `` --stack x`` or "")."""
    client = f"scripts/run-local client{stack}"
    names = [t.name for t in tools or ()]
    if DEMO_TOOL in names:
        lines = [f"  {client:<45} # list tools, call {DEMO_TOOL} with progress over SSE"]
    elif tools:
        first = tools[0]
        lines = [f"  {client:<45} # list tools ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}), "
                 f"call {first.name}"]
        arguments = example_arguments(first.input_schema)
        if arguments:
            lines.append(f"  {client} --tool {first.name} --args '{json.dumps(arguments)}'")
    elif tools is not None:
        lines = [f"  {client:<45} # the server lists no tools"]
    else:
        lines = [f"  {client:<45} # list tools, call the first"]
    if len(regions) > 1:
        lines.append(f"  {client + ' --country JP':<45} # routed as a viewer in Japan would be")
    lines.append(f"  {client + ' --oauth':<45} # no token: the SDK's OAuth provider authorizes itself")
    return lines


def fail_lines(stack: str, regions: Sequence[str], default_region: str) -> list[str]:
    """The banner's fail/restore commands, for a region this stack has."""
    others = [r for r in regions if r != default_region]
    region = others[0] if others else default_region
    head = ("Fail a region and bring it back (or use the status page's operator section):" if others else
            f"Fail the only region, {region}, and bring it back (every request then fails; with more regions, "
            "its viewers would fail over):")
    return [head, f"  scripts/run-local fail {region}{stack} [--mode stop|error|hang]",
            f"  scripts/run-local restore {region}{stack}"]
