"""The issuer's OAuth rules as plain functions: PKCE, redirect matching, resources, scopes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from local.oauth.rules import (
    OAuthError,
    canonical_resource,
    check_challenge,
    check_resources,
    check_scope,
    check_verifier,
    is_metadata_document_url,
    parse_scope,
    redirect_uri_matches,
    s256,
)

verifiers = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", min_size=43,
                    max_size=128)
ports = st.integers(min_value=1, max_value=65535)
paths = st.from_regex(r"/[a-z0-9/_-]{0,20}", fullmatch=True)


@given(verifier=verifiers, other=verifiers)
def test_only_the_verifier_of_a_challenge_redeems_it(verifier: str, other: str) -> None:
    challenge = check_challenge(s256(verifier), "S256")
    check_verifier(challenge, verifier)
    if other != verifier:
        with pytest.raises(OAuthError) as info:
            check_verifier(challenge, other)
        assert info.value.error == "invalid_grant"


@pytest.mark.parametrize("method", [None, "plain", "s256", "S512"])
def test_every_challenge_method_but_s256_is_refused(method: str | None) -> None:
    with pytest.raises(OAuthError) as info:
        check_challenge(s256("a" * 43), method)
    assert info.value.error == "invalid_request" and "S256" in info.value.description


@given(host=st.sampled_from(["127.0.0.1", "localhost", "[::1]"]), registered_port=st.one_of(st.none(), ports),
       port=ports, path=paths)
def test_a_loopback_redirect_matches_on_any_port(host: str, registered_port: int | None, port: int, path: str) -> None:
    registered = f"http://{host}{'' if registered_port is None else f':{registered_port}'}{path}"
    assert redirect_uri_matches(registered, f"http://{host}:{port}{path}")
    assert not redirect_uri_matches(registered, f"http://{host}:{port}{path}x")
    assert not redirect_uri_matches(registered, f"https://{host}:{port}{path}")


@given(port=ports, other=ports, path=paths)
def test_any_other_redirect_must_match_exactly(port: int, other: int, path: str) -> None:
    registered = f"https://app.example:{port}{path}"
    assert redirect_uri_matches(registered, registered)
    assert redirect_uri_matches(registered, f"https://app.example:{other}{path}") == (port == other)
    assert not redirect_uri_matches(registered, registered.upper())


@given(host=st.from_regex(r"[a-z]{1,10}\.example", fullmatch=True), path=paths)
def test_resources_compare_in_canonical_form(host: str, path: str) -> None:
    audience = f"https://{host}{path}"
    assert check_resources([f"HTTPS://{host.upper()}{path}/"], audience) == audience
    assert canonical_resource(canonical_resource(audience)) == canonical_resource(audience)
    with pytest.raises(OAuthError) as info:
        check_resources([f"https://other-{host}{path}"], audience)
    assert info.value.error == "invalid_target"


def test_a_resource_with_a_fragment_or_no_scheme_is_invalid_target() -> None:
    for bad in ("https://mcp.example/mcp#x", "mcp.example/mcp", "https://:99999/"):
        with pytest.raises(OAuthError) as info:
            canonical_resource(bad)
        assert info.value.error == "invalid_target"


@given(scopes=st.lists(st.from_regex(r"[a-z:]{1,10}", fullmatch=True), min_size=1, max_size=5, unique=True))
def test_scopes_parse_back_in_order(scopes: list[str]) -> None:
    assert parse_scope(" ".join(scopes)) == tuple(scopes)
    assert check_scope(tuple(scopes), scopes, ()) == tuple(scopes)


def test_scope_rules() -> None:
    assert parse_scope(None) is None
    assert check_scope(None, ["a", "b"], ["a"]) == ("a",)
    assert check_scope(("a", "offline_access"), ["a"], ()) == ("a",)
    for bad in ("", "   ", 'a "b"', "a\\b"):
        with pytest.raises(OAuthError):
            parse_scope(bad)
    with pytest.raises(OAuthError, match="exceed"):
        check_scope(("a", "b"), ["a", "b"], (), allowed=("a",))


@pytest.mark.parametrize(("client_id", "expected"), [
    ("https://app.example/client.json", True),
    ("http://127.0.0.1:9000/client.json", True),
    ("http://localhost/c", True),
    ("https://app.example/", False),
    ("https://app.example", False),
    ("http://app.example/client.json", False),
    ("dcr-abc", False),
])
def test_which_client_ids_name_a_metadata_document(client_id: str, expected: bool) -> None:
    assert is_metadata_document_url(client_id) is expected
