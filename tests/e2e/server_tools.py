"""What the stack's own server offers, asked of the server itself: a ``tools/list`` sent
straight to a region's local Function URL, SigV4-signed as the edge signs (the shipped
signer, the local credentials), with no edge in between. End-to-end tests take tool names
and counts from here, and tools with a particular role from the stack file (``toolScopes``,
``wafToolLimits``), so that none of them names a server's tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt

from edge.gate import signing
from functions.contract import EDGE_AUTHORIZATION_HEADER
from local.plan import LOOPBACK, LocalPlan, token_for

HANDSHAKE_ERA = "2025-11-25"  # every example speaks it (the TypeScript SDK 1.x speaks no later one)
ACCEPT = "application/json, text/event-stream"


def jsonrpc_answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer sent as JSON or as one SSE event stream (the last
    message that carries a result or an error: progress notifications come before it)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        answer: dict[str, Any] = response.json()
        return answer
    messages = [json.loads(line[len("data:"):]) for line in response.text.splitlines() if line.startswith("data:")]
    final = [m for m in messages if "result" in m or "error" in m]
    assert final, f"no JSON-RPC answer in the stream: {response.text[:500]}"
    return dict(final[-1])


def signed_post(plan: LocalPlan, region: str, message: Mapping[str, Any], *, token: str | None = None) -> httpx.Response:
    """``message`` POSTed to ``region``'s local Function URL as the edge sends it: signed, the
    bearer token (if any) in the side header the URL restores as ``Authorization``."""
    port = plan.ports.function_urls[region]
    host = f"{LOOPBACK}:{port}"
    body = json.dumps(message).encode()
    headers = signing.signature_headers("POST", plan.mcp_path, "", host, body, region, plan.aws_environment(region))
    headers |= {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": HANDSHAKE_ERA}
    if token is not None:
        headers[EDGE_AUTHORIZATION_HEADER] = f"Bearer {token}"
    return httpx.post(f"http://{host}{plan.mcp_path}", content=body, headers=headers, timeout=30)


def listed_tools(plan: LocalPlan, region: str | None = None) -> list[dict[str, Any]]:
    """The server's own ``tools/list`` (every page), in ``region`` (the stack's default region unless named)."""
    region = region or plan.default_region
    token = token_for(plan)
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        response = signed_post(plan, region, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params},
                               token=token)
        assert response.status_code == 200, (region, response.status_code, response.text[:500])
        result = jsonrpc_answer(response)["result"]
        tools += result["tools"]
        cursor = result.get("nextCursor")
        if not cursor:
            return tools


def tool_named(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [t for t in tools if t["name"] == name]
    assert found, f"the stack names tool {name!r}, which the server does not list ({[t['name'] for t in tools]})"
    return found[0]


_SAMPLES: dict[str, Any] = {"string": "edge end-to-end", "integer": 3, "number": 3, "boolean": True,
                            "array": [], "object": {}}


def arguments_for(tool: Mapping[str, Any], *, cheapest: bool = False) -> dict[str, Any]:
    """Arguments a call of ``tool`` can be made with, from its ``inputSchema``: its defaults
    where given, otherwise a plain value of each required property's type; ``cheapest`` also
    sets each optional number that has a ``minimum`` to it (fewest steps, shortest waits)."""
    schema = tool.get("inputSchema") or {}
    properties: Mapping[str, Any] = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    if cheapest:
        arguments |= {name: spec["minimum"] for name, spec in properties.items()
                      if spec.get("type") in ("integer", "number") and "minimum" in spec}
    for name in schema.get("required") or []:
        spec = properties.get(name) or {}
        if "default" in spec:
            arguments[name] = spec["default"]
            continue
        kind = spec.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind not in _SAMPLES:
            raise AssertionError(f"tool {tool['name']!r}: cannot make up argument {name!r} of schema {spec}")
        arguments[name] = _SAMPLES[kind]
    return arguments


def callable_tools(tools: list[dict[str, Any]], scoped: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools a token with the default scopes may call (none of ``scoped``) and whose
    arguments can be made up, in the server's order."""
    out = []
    for tool in tools:
        if tool["name"] in scoped:
            continue
        try:
            arguments_for(tool)
        except AssertionError:
            continue
        out.append(tool)
    return out


# --- the edge verifies, the origins are locked by IAM ----------------------------------------------


def marked(marker: str) -> dict[str, str]:
    """Headers that mark a request for ``forwarded_count``: a W3C trace context whose trace id is
    ``marker`` (``uuid4().hex``), which the gate continues toward the origin. (Not a query
    string: the edge refuses any on the MCP path.)"""
    return {"traceparent": f"00-{marker}-00000000000000e2-01"}


def forwarded_count(plan: LocalPlan, marker: str, region: str = "*") -> int:
    """Requests marked with ``marker`` (``marked``) that the local Function URLs (of ``region``,
    or every region) let through to an origin (one span line each; the probes' own requests,
    which run meanwhile, carry none)."""
    logs = Path(plan.run_dir) / "logs"
    return sum(1 for path in logs.glob(f"function-url-{region}.log")
               for line in path.read_text(errors="replace").splitlines()
               if '"functionUrl": "span"' in line and f'"traceId": "{marker}"' in line)


def forged_token(plan: LocalPlan) -> str:
    """Right iss, aud, exp and kid, a real RS256 signature, by a key that is not the issuer's."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    genuine = token_for(plan)
    header = jwt.get_unverified_header(genuine)
    claims = jwt.decode(genuine, options={"verify_signature": False})
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(claims, other, algorithm="RS256", headers={"kid": header.get("kid")})
