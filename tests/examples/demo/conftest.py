"""Fixtures for the demo server's tests: the app from its folder, and a real server.

- The folder ``examples/demo`` is what the platform deploys unchanged (``demo_server/`` and,
  beside it, the packages of its ``requirements.txt``); the tests import ``demo_server``
  from it as ``examples.demo.demo_server``, its dependencies from the project's virtualenv
  (the same pins). ``test_package.py`` runs the built package itself, through its run.sh.
- ``caller``: what the edge forwards for a verified token: the token (opaque to the
  server) in ``Authorization`` and the identity in the edge's headers.
- ``origin``: the app under uvicorn on a loopback port (as the Web Adapter runs it),
  addressed with a Function URL's Host, as the edge's requests arrive.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from examples.demo.demo_server.app import create_app
from examples.demo.demo_server.settings import (
    EDGE_CLIENT_ID_HEADER,
    EDGE_SCOPES_HEADER,
    EDGE_SUBJECT_HEADER,
    Settings,
)
from tests.loopback import LoopbackServer

REGION = "us-east-1"
FUNCTION_URL_HOST = "4bq2jzkfx7oyt6lqxs3ysvoc4q0qkhdm.lambda-url.us-east-1.on.aws"
# What the program gives the demo (the stack's region; everything else at its default).
ENVIRONMENT = {"AWS_REGION": REGION}


@dataclass(frozen=True)
class Caller:
    """A caller the edge verified: its token (any string to the server) and identity."""

    subject: str = "user-1"
    client_id: str = "client-1"
    scopes: tuple[str, ...] = ("mcp",)
    token: str = field(default_factory=lambda: "edge-verified." + secrets.token_urlsafe(24))

    def headers(self) -> dict[str, str]:
        """What the edge adds for this caller (the adapter has restored ``Authorization``)."""
        return {"authorization": f"Bearer {self.token}", EDGE_SUBJECT_HEADER: self.subject,
                EDGE_CLIENT_ID_HEADER: self.client_id, EDGE_SCOPES_HEADER: " ".join(self.scopes)}


@pytest.fixture
def caller() -> Caller:
    return Caller()


class RunningOrigin(LoopbackServer):
    """The app under uvicorn on loopback, addressed with the Function URL's Host."""

    def __init__(self, app: Any, settings: Settings):
        super().__init__(app)
        self.settings = settings

    @property
    def mcp_url(self) -> str:
        return self.base_url + self.settings.mcp_path

    def headers(self, caller: Caller | None = None, **extra: str) -> dict[str, str]:
        """What the edge sends to the origin: the Function URL host and the caller's headers."""
        return {"host": FUNCTION_URL_HOST, **(caller.headers() if caller is not None else {}), **extra}

    def post(self, body: Any, *, headers: dict[str, str], path: str | None = None) -> httpx.Response:
        base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        return httpx.post(self.base_url + (path or self.settings.mcp_path), json=body,
                          headers={**base, **headers}, timeout=30)


def rpc_message(response: httpx.Response) -> Any:
    """The JSON-RPC answer of a POST, whether plain JSON or an SSE stream (whose last
    ``data:`` line is the answer; keep-alive comments carry none)."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.json()
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


def settings_for(**overrides: str) -> Settings:
    return Settings.from_env({**ENVIRONMENT, **overrides})


@pytest.fixture(scope="module")
def origin() -> Iterator[RunningOrigin]:
    settings = settings_for()
    with RunningOrigin(create_app(settings), settings) as running:
        yield running


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
MODERN_HEADERS = {"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}
