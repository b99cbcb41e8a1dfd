"""The official Python SDK's OAuth client provider against the dev issuer and an origin,
both on loopback (no edge): from the 401 to a tool call, by dynamic registration and by
client ID metadata document, with refresh and scope step-up. The same flows run through
the whole local topology in tests/e2e/test_oauth_clients.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import jwt
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client

from local.oauth.client import (
    REDIRECT_URI,
    HeadlessAuthorization,
    MemoryStorage,
    client_metadata_document,
    oauth_provider,
)
from local.oauth.issuer import IssuerSettings, create_app, generate_key_file
from local.supervisor import free_ports
from tests.cimd import DocumentServer, LocalCA, make_test_ca
from tests.local.oauth.resource_server import ECHO, SCOPED, SCOPED_NEEDS, protected_resource
from tests.loopback import LoopbackServer


@dataclass
class Pair:
    issuer: IssuerSettings
    mcp_url: str


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    return make_test_ca(tmp_path_factory.mktemp("tls"))


@contextmanager
def running_pair(folder: Path, **issuer_options: Any) -> Iterator[Pair]:
    """The dev issuer and a protected MCP resource that trusts it, on loopback."""
    issuer_port, origin_port = free_ports(2)
    key = folder / "key.pem"
    generate_key_file(key)
    mcp_url = f"http://127.0.0.1:{origin_port}/mcp"
    settings = IssuerSettings(issuer=f"http://127.0.0.1:{issuer_port}/", audience=mcp_url, token_path="/oauth/token",
                              jwks_path="/.well-known/jwks.json", key_file=str(key), clients={},
                              scopes=("mcp", SCOPED_NEEDS), default_scopes=("mcp",), **issuer_options)
    resource = protected_resource(settings.issuer, settings.jwks_url, mcp_url, f"http://127.0.0.1:{origin_port}")
    with LoopbackServer(create_app(settings), port=issuer_port), LoopbackServer(resource, port=origin_port):
        yield Pair(settings, mcp_url)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, tls: LocalCA) -> Iterator[Pair]:
    with running_pair(tmp_path_factory.mktemp("oauth"), token_lifetime_s=5, trusted_ca_file=str(tls.ca_file)) as p:
        yield p


def run_client(pair: Pair, provider: Any, use: Any) -> Any:
    async def go() -> Any:
        http = httpx2.AsyncClient(auth=provider, timeout=30)
        async with mcp.Client(streamable_http_client(pair.mcp_url, http_client=http), mode="auto") as client:
            return await use(client)

    return anyio.run(go)


def test_dynamic_registration_then_code_with_pkce_then_a_tool_call_then_a_refresh(pair: Pair) -> None:
    storage, authorization = MemoryStorage(), HeadlessAuthorization()
    provider = oauth_provider(pair.mcp_url, storage=storage, authorization=authorization)

    async def use(client: Any) -> Any:
        listed = await client.list_tools()
        first = await client.call_tool(ECHO, {"text": "one"})
        await anyio.sleep(6)  # the 5 s access token expires: the next call refreshes it first
        second = await client.call_tool(ECHO, {"text": "two"})
        return listed, first, second

    listed, first, second = run_client(pair, provider, use)
    assert {ECHO, SCOPED} <= {t.name for t in listed.tools}
    assert first.content[0].text == "one" and second.content[0].text == "two"
    assert storage.client_info is not None and storage.client_info.client_id.startswith("dcr-")
    assert len(authorization.visited) == 1  # one authorization, then a refresh, no second login
    assert len(storage.history) == 2 and storage.history[0].refresh_token != storage.history[1].refresh_token
    claims = jwt.decode(storage.history[1].access_token, options={"verify_signature": False})
    assert claims["aud"] == pair.mcp_url and claims["scope"] == "mcp"


def test_an_https_client_metadata_document_as_client_id(pair: Pair, tls: LocalCA) -> None:
    with DocumentServer(tls) as documents:
        url = documents.publish("/oauth/client.json", client_metadata_document(documents.url("/oauth/client.json")))
        storage = MemoryStorage()
        provider = oauth_provider(pair.mcp_url, storage=storage, client_metadata_url=url)

        async def use(client: Any) -> Any:
            return await client.call_tool(ECHO, {"text": "cimd"})

        result = run_client(pair, provider, use)
        assert result.content[0].text == "cimd"
        assert storage.client_info is not None and storage.client_info.client_id == url  # no registration
        assert documents.fetches == ["/oauth/client.json"]


def test_a_scoped_tool_steps_up_once_then_is_served(pair: Pair) -> None:
    storage, authorization = MemoryStorage(), HeadlessAuthorization()
    provider = oauth_provider(pair.mcp_url, storage=storage, authorization=authorization)

    async def use(client: Any) -> Any:
        return await client.call_tool(SCOPED, {})

    result = run_client(pair, provider, use)
    assert not result.is_error, result.content
    assert SCOPED_NEEDS in result.structured_content["scopes"]
    assert result.structured_content["subject"] == "local-developer"
    assert len(authorization.visited) == 2  # the first grant, then the step-up
    assert "mcp%3Aidentity" in authorization.visited[1]


def test_a_headless_client_says_why_it_cannot_pass_a_consent_page(tmp_path: Path) -> None:
    from local.oauth.client import AuthorizationRefusedError

    generate_key_file(tmp_path / "key.pem")
    port = free_ports(1)[0]
    settings = IssuerSettings(issuer=f"http://127.0.0.1:{port}/", audience="http://127.0.0.1:1/mcp",
                              token_path="/oauth/token", jwks_path="/jwks", key_file=str(tmp_path / "key.pem"),
                              clients={}, consent=True)
    with LoopbackServer(create_app(settings), port=port):
        registered = httpx.post(settings.base_url + settings.register_path, json={"redirect_uris": ["http://127.0.0.1/callback"]},
                                timeout=10).json()
        url = (f"{settings.base_url}{settings.authorize_path}?response_type=code&client_id={registered['client_id']}"
               f"&code_challenge={'a' * 43}&code_challenge_method=S256")
        with pytest.raises(AuthorizationRefusedError, match="consent page"):
            anyio.run(HeadlessAuthorization().redirect, url)


def test_a_person_approves_on_the_consent_page_and_the_browser_lands_on_the_clients_loopback_port(
        tmp_path: Path) -> None:
    from local.oauth.client import BrowserAuthorization

    def person(url: str) -> None:
        """What a browser and a person do: open the page, approve, follow the redirect."""
        with httpx.Client(follow_redirects=False, timeout=10) as browser:
            page = browser.get(url)
            assert page.status_code == 200 and "Approve" in page.text and "127.0.0.1" in page.text
            request_id = page.text.split('name="request_id" value="')[1].split('"')[0]
            decided = browser.post(url.split("?")[0], data={"request_id": request_id, "decision": "approve"})
            landed = browser.get(decided.headers["location"])
            assert landed.status_code == 200 and "Authorized" in landed.text

    printed: list[str] = []

    def out(text: str) -> None:
        printed.append(text)
        threading.Thread(target=person, args=(text.split()[-1],), daemon=True).start()

    with running_pair(tmp_path, consent=True) as consenting:
        authorization = BrowserAuthorization(out=out, timeout_s=30)
        try:
            provider = oauth_provider(consenting.mcp_url, authorization=authorization)

            async def use(client: Any) -> Any:
                return await client.call_tool(ECHO, {"text": "approved"})

            result = run_client(consenting, provider, use)
        finally:
            authorization.close()
    assert result.content[0].text == "approved"
    assert printed and printed[0].startswith("Open this URL in a browser")
    assert authorization.redirect_uri.startswith("http://127.0.0.1:") and authorization.redirect_uri != REDIRECT_URI
