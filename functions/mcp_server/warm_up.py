"""Before the origin reports ready: the request path, run once in process.

The first request a fresh process serves pays for everything done once per process:
the SDK's first pass through its transports, pydantic's first validations and
serializations, OpenSSL's first signature check with the issuer's key, Starlette's
and the gate's first calls. That is init work: the lifespan runs ``warm_up`` before
uvicorn listens, so before the Web Adapter's readiness check passes and Lambda sends
the first invoke (on Lambda it is part of the init phase, like the imports).

- ``JwtVerifier.exercise_signature_check``: a token signed with nothing, checked
  against the fetched key set's signing key, refused with "bad signature";
- ``WARM_UP_CALLS``: what clients send first, in both protocol eras and on both
  transports (``server/discover``, ``initialize``, ``tools/list``, and a
  ``tools/call`` of a tool no server can have, so that no tool runs), sent
  through the whole app, the origin gate included, with the origin secret, an
  allowed Host and a random bearer token that the verifier accepts only while they
  run (``JwtVerifier.accepting``). Their request log lines are built, not written
  (``logs.QUIET``).

A warm-up that fails (no key set yet, an answer other than the one expected) is
logged and start-up goes on: warming is never a reason not to serve.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from .auth import WARM_UP_LIFETIME_S, WARM_UP_SUBJECT, JwtVerifier
from .hosts import HostPattern
from .logs import QUIET
from .origin_gate import ASGIApp, Message
from .settings import Settings

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
# Spaces are not allowed in MCP tool names: no server registers this one, so the call
# exercises the streaming transport and the SDK answers "unknown tool" without running code.
NO_SUCH_TOOL = "origin warm-up (no such tool)"


@dataclass(frozen=True)
class WarmUpCall:
    """One request of the warm-up: a JSON-RPC message and its era's headers."""

    message: dict[str, Any]
    headers: Mapping[str, str]

    @property
    def label(self) -> str:
        return f"{self.headers.get('mcp-protocol-version', HANDSHAKE)} {self.message['method']}"


def _modern(method: str, params: dict[str, Any], **headers: str) -> WarmUpCall:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    return WarmUpCall({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}},
                      {"mcp-protocol-version": MODERN, "mcp-method": method, **headers})


def _handshake(method: str, params: dict[str, Any]) -> WarmUpCall:
    return WarmUpCall({"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      {"mcp-protocol-version": HANDSHAKE} if method != "initialize" else {})


WARM_UP_CALLS: tuple[WarmUpCall, ...] = (
    _modern("server/discover", {}),
    _modern("tools/list", {}),
    _modern("tools/call", {"name": NO_SUCH_TOOL, "arguments": {}}, **{"mcp-name": NO_SUCH_TOOL}),
    _handshake("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {},
                              "clientInfo": {"name": WARM_UP_SUBJECT, "version": "1"}}),
    _handshake("tools/list", {}),
    _handshake("tools/call", {"name": NO_SUCH_TOOL, "arguments": {}}),
)


def example_host(allowed_hosts: tuple[str, ...]) -> str | None:
    """A Host value the policy allows (the first pattern's simplest match), or None."""
    for raw in allowed_hosts:
        pattern = HostPattern.parse(raw)
        host = f"warm-up.{pattern.host}" if pattern.wildcard else pattern.host
        value = host if pattern.port in (None, "*") else f"{host}:{pattern.port}"
        if pattern.matches(value):
            return value
    return None


def warm_up_claims(settings: Settings, now: float) -> dict[str, Any]:
    """What the warm-up token stands for: a caller with every scope the origin requires."""
    return {"iss": settings.issuer, "aud": settings.audience, "sub": WARM_UP_SUBJECT, "client_id": WARM_UP_SUBJECT,
            "exp": int(now) + WARM_UP_LIFETIME_S, "scope": " ".join(settings.required_scopes)}


async def call(app: ASGIApp, host: str, headers: Mapping[str, str], body: bytes, mcp_path: str) -> tuple[int, bytes]:
    """One POST through ``app`` in process: the status and the body it answered."""
    sent: list[Message] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    done = anyio.Event()

    async def receive() -> Message:
        if pending:
            return pending.pop()
        await done.wait()  # as a server does: the client goes away once it has the answer
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    raw_headers = [(b"host", host.encode()), (b"content-type", b"application/json"),
                   (b"accept", b"application/json, text/event-stream"), (b"content-length", str(len(body)).encode()),
                   *((k.encode(), v.encode()) for k, v in headers.items())]
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": mcp_path, "raw_path": mcp_path.encode(),
             "query_string": b"", "root_path": "", "headers": raw_headers, "client": ("127.0.0.1", 0),
             "server": ("127.0.0.1", 8080), "state": {}}
    await app(scope, receive, send)
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), 0)
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def answered(status: int, body: bytes) -> bool:
    """A 200 carrying a JSON-RPC answer (plain JSON, or its last SSE event)."""
    if status != 200:
        return False
    text = body.decode("utf-8", "replace").strip()
    if not text.startswith("{"):
        events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = events[-1] if events else ""
    try:
        message = json.loads(text)
    except ValueError:
        return False
    return isinstance(message, dict) and ("result" in message or "error" in message)


async def warm_up(app: ASGIApp, settings: Settings, verifier: JwtVerifier, logger: Any) -> list[str]:
    """Run the warm-up; answers what did not go as expected (also logged as warnings)."""
    problems: list[str] = []
    reason = verifier.exercise_signature_check()
    if reason != "bad signature":
        problems.append(f"signature check: {reason}")
    host = example_host(settings.allowed_hosts)
    if host is None:
        problems.append("requests: no Host value matches ALLOWED_HOSTS")
    else:
        token = secrets.token_urlsafe(32)
        base = {settings.origin_secret_header: settings.origin_secrets[0], "authorization": f"Bearer {token}"}
        quiet = QUIET.set(True)
        try:
            with verifier.accepting(token, warm_up_claims(settings, time.time())):
                for item in WARM_UP_CALLS:
                    body = json.dumps(item.message).encode()
                    status, answer = await call(app, host, {**base, **item.headers}, body, settings.mcp_path)
                    if not answered(status, answer):
                        problems.append(f"{item.label}: answered {status} {answer[:120]!r}")
        finally:
            QUIET.reset(quiet)
    for problem in problems:
        logger.warning("warm-up incomplete", extra={"problem": problem})
    return problems
