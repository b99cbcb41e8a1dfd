"""Where the protected resource metadata lives, for any MCP path and resource URL (RFC 9728 section 3.1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from functions.mcp_server.resource_server import metadata_paths, protected_resource_metadata, resource_metadata_url
from functions.mcp_server.settings import Settings

paths = st.from_regex(r"(/[a-z0-9]{1,8}){1,3}", fullmatch=True)
hosts = st.from_regex(r"[a-z]{1,10}\.example", fullmatch=True)


def settings(mcp_path: str, resource: str) -> Settings:
    return Settings.from_env({"AUTH_ISSUER": "https://auth.example/", "AUTH_AUDIENCE": resource,
                              "AUTH_JWKS_URL": "https://auth.example/jwks", "ORIGIN_SECRET": "s" * 20,
                              "MCP_PATH": mcp_path, "RESOURCE_SERVER_URL": resource})


@given(host=hosts, path=paths)
def test_the_metadata_url_of_a_resource_inserts_the_well_known_segment_before_its_path(host: str, path: str) -> None:
    assert resource_metadata_url(f"https://{host}{path}") == f"https://{host}/.well-known/oauth-protected-resource{path}"
    assert resource_metadata_url(f"https://{host}/") == f"https://{host}/.well-known/oauth-protected-resource"


@given(host=hosts, path=paths)
def test_every_stack_serves_its_metadata_where_its_challenge_points_and_at_the_root(host: str, path: str) -> None:
    resource = f"https://{host}{path}"
    s = settings(path, resource)
    served = metadata_paths(s)
    assert "/.well-known/oauth-protected-resource" in served
    assert resource_metadata_url(resource).removeprefix(f"https://{host}") in served
    document = protected_resource_metadata(s)
    assert document["resource"] == resource and document["authorization_servers"] == ["https://auth.example/"]
    assert "scopes_supported" not in document
