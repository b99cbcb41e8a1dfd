"""The shipped origin as an OAuth resource server: protected resource metadata (RFC 9728)
at both well-known paths, readable cross-origin, and the insufficient_scope step-up
challenge for a tool that declares scopes, in both protocol eras."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.auth import ProtectedResourceMetadata

from tests.functions.mcp_server.conftest import Issuer, RunningOrigin, rpc_message, settings_for
from tests.functions.mcp_server.test_server import MODES, with_client

METADATA_PATHS = ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")


@pytest.fixture(scope="module")
def scoped_origin(shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer) -> Iterator[RunningOrigin]:
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url, AUTH_SCOPES_SUPPORTED="mcp")
    with RunningOrigin(shipped.create_app(settings), settings) as running:
        yield running


def call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


def modern(name: str) -> dict[str, str]:
    return {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name}


def with_meta(body: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request body: the client's _meta envelope in params."""
    params = {**body["params"], "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                          "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                                          "io.modelcontextprotocol/clientCapabilities": {}}}
    return {**body, "params": params}


def test_metadata_is_served_at_both_well_known_paths_without_a_token(scoped_origin: RunningOrigin,
                                                                      lambda_env: dict[str, str]) -> None:
    documents = []
    for path in METADATA_PATHS:
        response = httpx.get(scoped_origin.base_url + path, headers=scoped_origin.headers(), timeout=10)
        assert response.status_code == 200, (path, response.text)
        documents.append(response.json())
    assert documents[0] == documents[1]
    document = documents[0]
    assert document["resource"] == lambda_env["RESOURCE_SERVER_URL"] == "https://mcp.acme.example/mcp"
    assert document["authorization_servers"] == [lambda_env["AUTH_ISSUER"]]
    assert document["scopes_supported"] == ["mcp"]
    assert document["bearer_methods_supported"] == ["header"]
    ProtectedResourceMetadata.model_validate(document)  # what the official SDK client parses


def test_no_scopes_are_advertised_unless_configured(origin: RunningOrigin) -> None:
    response = httpx.get(origin.base_url + METADATA_PATHS[0], headers=origin.headers(), timeout=10)
    assert response.status_code == 200 and "scopes_supported" not in response.json()


def test_metadata_is_readable_from_any_browser_origin(scoped_origin: RunningOrigin) -> None:
    url = scoped_origin.base_url + METADATA_PATHS[0]
    preflight = httpx.options(url, headers=scoped_origin.headers(**{
        "origin": "https://inspector.example", "access-control-request-method": "GET",
        "access-control-request-headers": "mcp-protocol-version"}), timeout=10)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "mcp-protocol-version" in preflight.headers["access-control-allow-headers"]
    response = httpx.get(url, headers=scoped_origin.headers(origin="https://inspector.example"), timeout=10)
    assert response.headers["access-control-allow-origin"] in ("*", "https://inspector.example")


def test_metadata_refuses_other_methods(scoped_origin: RunningOrigin) -> None:
    response = httpx.post(scoped_origin.base_url + METADATA_PATHS[1], headers=scoped_origin.headers(), timeout=10)
    assert response.status_code == 405


def _challenge(response: httpx.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', value))


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_a_scoped_tool_without_its_scope_gets_the_step_up_challenge(scoped_origin: RunningOrigin, issuer: Issuer,
                                                                    era: str) -> None:
    token = issuer.token(scope="mcp")
    if era == "2026-07-28":
        response = scoped_origin.post(with_meta(call("whoami")), headers=scoped_origin.headers(token, **modern("whoami")))
    else:
        response = scoped_origin.post(call("whoami"), headers=scoped_origin.headers(
            token, **{"mcp-protocol-version": era}))
    assert response.status_code == 403, response.text
    challenge = _challenge(response)
    assert challenge["error"] == "insufficient_scope"
    assert challenge["scope"] == "mcp:identity"
    assert challenge["resource_metadata"] == "https://mcp.acme.example/.well-known/oauth-protected-resource/mcp"
    assert "whoami" in challenge["error_description"]
    assert response.json()["error"] == "insufficient_scope"


@pytest.mark.parametrize("mode", MODES)
def test_a_scoped_tool_is_served_with_its_scope_in_both_eras(scoped_origin: RunningOrigin, issuer: Issuer,
                                                             mode: str) -> None:
    async def whoami(client: Client) -> Any:
        return await client.call_tool("whoami", {})

    result = anyio.run(with_client, scoped_origin, issuer.token(scope="mcp mcp:identity", sub="user-7"), mode, whoami)
    assert not result.is_error, result.content
    assert result.structured_content == {"client_id": "client-1", "subject": "user-7", "scopes": ["mcp", "mcp:identity"]}


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_still_lists_the_scoped_tool(scoped_origin: RunningOrigin, issuer: Issuer, mode: str) -> None:
    async def names(client: Client) -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    assert "whoami" in anyio.run(with_client, scoped_origin, issuer.token(scope="mcp"), mode, names)


def test_an_invalid_token_on_a_scoped_tool_is_401_not_403(scoped_origin: RunningOrigin, issuer: Issuer) -> None:
    response = scoped_origin.post(call("whoami"), headers=scoped_origin.headers(issuer.token(exp=1)))
    assert response.status_code == 401


def test_naming_another_tool_in_the_header_does_not_get_past_the_check(scoped_origin: RunningOrigin,
                                                                        issuer: Issuer) -> None:
    response = scoped_origin.post(with_meta(call("whoami")), headers=scoped_origin.headers(
        issuer.token(scope="mcp"), **modern("echo")))
    # The SDK refuses a body that disagrees with its headers: whoami never runs.
    assert response.status_code == 400, response.text
    assert "client_id" not in response.text and "Mcp-Name header says 'echo'" in response.text


def test_unscoped_tools_need_no_extra_scope(scoped_origin: RunningOrigin, issuer: Issuer) -> None:
    response = scoped_origin.post(call("echo", {"text": "hi"}), headers=scoped_origin.headers(issuer.token(scope="")))
    assert response.status_code == 200, response.text
    assert rpc_message(response)["result"]["structuredContent"] == {"result": "hi"}


def test_advertised_scopes_are_read_from_the_environment_and_checked(shipped: ModuleType,
                                                                     lambda_env: dict[str, str]) -> None:
    settings_module = importlib.import_module("mcp_server.settings")
    assert settings_for(shipped, lambda_env, AUTH_SCOPES_SUPPORTED="mcp, files:read,mcp").scopes_supported == (
        "mcp", "files:read")
    assert settings_for(shipped, {k: v for k, v in lambda_env.items() if k != "AUTH_SCOPES_SUPPORTED"}
                        ).scopes_supported == ()
    with pytest.raises(settings_module.SettingsError, match="AUTH_SCOPES_SUPPORTED contains 'a\"b'"):
        settings_for(shipped, lambda_env, AUTH_SCOPES_SUPPORTED='mcp,a"b')
