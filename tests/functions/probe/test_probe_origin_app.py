"""The probe against the project's own origin app (``functions.mcp_server``) on
loopback, with real tokens from a client-credentials token endpoint: what a probe of
a deployed Function URL sees, token, origin secret and served region included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from functions.mcp_server.app import create_app
from functions.probe.errors import ProbeAuthError, ProbeHttpError
from tests.functions.probe.conftest import (
    ORIGIN_SECRET,
    Loopback,
    OAuthServer,
    legacy_only_wrapper,
    origin_settings,
    probe,
    token_source,
)


@pytest.fixture(scope="module")
def origin(oauth: OAuthServer) -> Iterator[Loopback]:
    with Loopback(create_app(origin_settings(oauth))) as running:
        yield running


def test_origin_app_is_healthy_with_token_and_origin_secret(origin: Loopback, oauth: OAuthServer):
    result = probe(origin.url(), tokens=token_source(oauth), secret=ORIGIN_SECRET, needs_secret=True)
    assert result["status"] == "healthy"
    assert result["era"] == "modern" and result["protocolVersion"] == "2026-07-28"
    assert result["servedRegion"] == "eu-west-1"
    assert result["toolCount"] >= 4  # echo, countdown, served_by, whoami
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


def test_origin_app_refuses_a_probe_without_the_origin_secret(origin: Loopback, oauth: OAuthServer):
    with pytest.raises(ProbeHttpError, match="HTTP 403") as err:
        probe(origin.url(), tokens=token_source(oauth), secret="not-the-origin-secret-0123456789", needs_secret=True)
    assert err.value.status == 403


def test_origin_app_refuses_a_probe_without_a_token(origin: Loopback):
    with pytest.raises(ProbeAuthError, match="HTTP 401") as err:
        probe(origin.url(), secret=ORIGIN_SECRET, needs_secret=True)
    assert "resource_metadata" in str(err.value)


def test_one_token_serves_many_probes(origin: Loopback, oauth: OAuthServer):
    tokens = token_source(oauth)
    for _ in range(3):
        probe(origin.url(), tokens=tokens, secret=ORIGIN_SECRET, needs_secret=True)
    assert tokens.fetches == 1
