"""The probe against the demo server (``examples/demo``, the default origin) on loopback,
with real tokens from a client-credentials token endpoint: what a probe of a deployed
Function URL sees, served region included. Refusing a request without a token or a
signature is the edge's and the Function URL's (tests/edge), not the server's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from examples.demo.demo_server.app import create_app
from tests.functions.probe.conftest import (
    ORIGIN_SECRET,
    Loopback,
    OAuthServer,
    legacy_only_wrapper,
    origin_settings,
    probe,
    token_source,
)


def server_tools(origin: Loopback) -> list[Any]:
    """The server's own tools/list answer (handshake era, asked directly)."""
    answer = httpx.post(origin.url(), json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                        headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"},
                        timeout=10)
    return list(answer.json()["result"]["tools"])


@pytest.fixture(scope="module")
def origin(oauth: OAuthServer) -> Iterator[Loopback]:
    with Loopback(create_app(origin_settings(oauth))) as running:
        yield running


def test_origin_app_is_healthy_with_token_and_origin_secret(origin: Loopback, oauth: OAuthServer):
    result = probe(origin.url(), tokens=token_source(oauth), secret=ORIGIN_SECRET, needs_secret=True)
    assert result["status"] == "healthy"
    assert result["era"] == "modern" and result["protocolVersion"] == "2026-07-28"
    assert result["servedRegion"] == "eu-west-1"
    assert result["toolCount"] == len(server_tools(origin)) > 0
    assert len(result["schemaHash"]) == 64


def test_origin_app_gives_the_same_hash_through_the_legacy_handshake(oauth: OAuthServer):
    tokens = token_source(oauth)
    with Loopback(create_app(origin_settings(oauth))) as modern, \
            Loopback(legacy_only_wrapper(create_app(origin_settings(oauth)))) as legacy:
        modern_result = probe(modern.url(), tokens=tokens, secret=ORIGIN_SECRET, needs_secret=True)
        legacy_result = probe(legacy.url(), tokens=tokens, secret=ORIGIN_SECRET, needs_secret=True)
    assert legacy_result["era"] == "legacy"
    assert legacy_result["schemaHash"] == modern_result["schemaHash"]
    assert legacy_result["servedRegion"] == "eu-west-1"


def test_one_token_serves_many_probes(origin: Loopback, oauth: OAuthServer):
    tokens = token_source(oauth)
    for _ in range(3):
        probe(origin.url(), tokens=tokens, secret=ORIGIN_SECRET, needs_secret=True)
    assert tokens.fetches == 1
