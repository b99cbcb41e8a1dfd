"""The key set's download from process start: the first key-set client takes its outcome."""

from __future__ import annotations

import pytest

from functions.mcp_server import key_prefetch
from functions.mcp_server.auth import BackoffJWKClient, KeySetUnavailableError
from tests.functions.mcp_server.conftest import Issuer

ENV_KEYS = ("AUTH_JWKS_URL", "JWKS_TIMEOUT_SECONDS", "MCP_SERVER_NAME")


def client_for(url: str, early: key_prefetch.EarlyDownload | None) -> BackoffJWKClient:
    return BackoffJWKClient(url, max_backoff_s=60, early=early, cache_jwk_set=True, lifespan=300,
                            cooldown_duration=60, timeout=2, headers={"User-Agent": key_prefetch.user_agent("acme")})


@pytest.fixture(autouse=True)
def nothing_started():
    key_prefetch._started = None
    yield
    key_prefetch._started = None


def test_the_first_client_uses_the_download_started_with_the_process(issuer: Issuer):
    before = len(issuer.fetches)
    # Given a process whose environment names the key set
    started = key_prefetch.start_from_environment({"AUTH_JWKS_URL": issuer.jwks_url, "MCP_SERVER_NAME": "acme"})
    assert started is not None
    headers = {"User-Agent": "acme-mcp-origin"}
    # When the app's key-set client is made, Then it takes that download, once
    early = key_prefetch.take(issuer.jwks_url, headers)
    assert early is started and key_prefetch.take(issuer.jwks_url, headers) is None
    client = client_for(issuer.jwks_url, early)
    assert {k.key_id for k in client.get_jwk_set().keys} >= {"rsa-1"}
    # ... and the key set was fetched once, by the early download
    assert len(issuer.fetches) == before + 1 and client.fetch_attempts == 1


def test_a_download_of_another_url_or_for_another_server_is_not_taken(issuer: Issuer):
    key_prefetch.start_from_environment({"AUTH_JWKS_URL": issuer.jwks_url})
    assert key_prefetch.take(issuer.jwks_url + "?other", {"User-Agent": "mcp-edge-mcp-origin"}) is None
    assert key_prefetch.take(issuer.jwks_url, {"User-Agent": "acme-mcp-origin"}) is None
    assert key_prefetch.take(issuer.jwks_url, {"User-Agent": "mcp-edge-mcp-origin"}) is not None


@pytest.mark.parametrize("environ", [{}, {"AUTH_JWKS_URL": "not a url"}, {"AUTH_JWKS_URL": "file:///etc/passwd"}])
def test_no_download_without_an_http_key_set_url(environ: dict[str, str]):
    assert key_prefetch.start_from_environment(environ) is None


def test_a_failed_early_download_is_a_failed_fetch_with_its_backoff():
    # Given a process whose key set URL refuses connections (port 9 on loopback: discard, not served)
    url = "http://127.0.0.1:9/jwks.json"
    key_prefetch.start_from_environment({"AUTH_JWKS_URL": url, "JWKS_TIMEOUT_SECONDS": "1"})
    clock = [0.0]
    client = BackoffJWKClient(url, max_backoff_s=60, clock=lambda: clock[0],
                              early=key_prefetch.take(url, {"User-Agent": "mcp-edge-mcp-origin"}),
                              cache_jwk_set=True, lifespan=300, cooldown_duration=60, timeout=1)
    # When the client's first fetch takes its outcome, Then it is refused as a fetch would be, and backs off
    with pytest.raises(KeySetUnavailableError) as refused:
        client.fetch_data()
    assert refused.value.retry_after_s == 1 and client.failures == 1 and client.fetch_attempts == 1
    with pytest.raises(KeySetUnavailableError, match="backing off"):
        client.fetch_data()
