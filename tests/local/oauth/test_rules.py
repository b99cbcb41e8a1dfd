"""The issuer's OAuth rules as plain functions: PKCE, redirect matching, resources, scopes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from local.oauth.rules import (
    OAuthError,
    canonical_resource,
    check_challenge,
    check_metadata_document_url,
    check_redirect_uri_syntax,
    check_resources,
    check_scope,
    check_verifier,
    client_from_metadata,
    is_absolute_uri,
    is_fetchable_address,
    is_loopback_redirect,
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
    ("https://user:pw@app.example/client.json", False),
    ("https://app.example/x/../client.json", False),
    ("http://app.example/client.json", False),
    ("dcr-abc", False),
])
def test_which_client_ids_name_a_metadata_document(client_id: str, expected: bool) -> None:
    assert is_metadata_document_url(client_id) is expected


@given(host=st.sampled_from(["127.0.0.1", "127.8.9.10", "[::1]", "localhost", "LOCALHOST"]),
       port=st.one_of(st.none(), ports), path=paths, scheme=st.sampled_from(["http", "https"]))
def test_loopback_redirect_uris_are_those_on_127_8_and_1_and_localhost(host: str, port: int | None, path: str,
                                                                        scheme: str) -> None:
    netloc = host if port is None else f"{host}:{port}"
    assert is_loopback_redirect(f"{scheme}://{netloc}{path}")
    assert not is_loopback_redirect(f"{scheme}://{host.strip('[]')}.evil.example{path}")
    assert not is_loopback_redirect(f"{scheme}://user@{netloc}{path}")


@pytest.mark.parametrize("uri", ["https://127.0.0.1.evil.example/cb", "https://evil.example/cb", "com.example.app:/cb",
                                 "http://0.0.0.0/cb", "http://[::ffff:7f00:1]x/cb", "javascript://127.0.0.1/%0a"])
def test_other_redirect_uris_are_not_loopback(uri: str) -> None:
    assert not is_loopback_redirect(uri)


_URI_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?[]@!$&'()*+,;="


@given(path=st.text(alphabet=_URI_CHARS.replace("[", "").replace("]", "").replace("?", ""), max_size=30),
       bad=st.sampled_from([" ", "\t", "\r", "\n", "\x00", "\x7f", "<", ">", '"', "{", "}", "|", "\\", "^", "`", "é",
                            "\ud800"]),
       at=st.integers(min_value=0, max_value=40))
def test_a_uri_with_a_character_outside_rfc3986_is_not_an_absolute_uri(path: str, bad: str, at: int) -> None:
    uri = "https://app.example/" + path.replace(":", "")
    assert is_absolute_uri(uri)
    at = min(at, len(uri))
    spoiled = uri[:at] + bad + uri[at:]
    assert not is_absolute_uri(spoiled)
    with pytest.raises(OAuthError) as info:
        check_redirect_uri_syntax(spoiled)
    assert info.value.error == "invalid_redirect_uri"


@given(value=st.recursive(st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8),
       key=st.sampled_from(["client_name", "software_id", "x"]))
def test_any_lone_surrogate_in_client_metadata_is_invalid_client_metadata(value: object, key: str) -> None:
    doc = {"redirect_uris": ["http://127.0.0.1/callback"], key: [value, "\udc00"]}
    with pytest.raises(OAuthError) as info:
        client_from_metadata(doc, client_id="c", source="registered", supported_scopes=("mcp",))
    assert info.value.error == "invalid_client_metadata" and key in info.value.description


@pytest.mark.parametrize("client_id", ["https://u:p@app.example/c.json", "https://u@app.example/c.json",
                                       "https://app.example/a/../c.json", "https://app.example/./c.json",
                                       "https://app.example/a/%2e/c.json", "https://app.example/a/.%2E",
                                       "https://app.example/c.json#f", "https://app.example/c\r\n.json",
                                       "http://app.example/c.json", "https://app.example/"])
def test_client_id_urls_with_userinfo_dot_segments_or_bad_syntax_name_no_document(client_id: str) -> None:
    with pytest.raises(OAuthError) as info:
        check_metadata_document_url(client_id)
    assert info.value.error == "invalid_client"


@pytest.mark.parametrize(("address", "fetchable"), [
    ("127.0.0.1", True), ("::1", True), ("93.184.215.14", True), ("2606:4700::6810:84e5", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.1", False), ("172.16.0.1", False), ("192.168.0.1", False),
    ("100.64.0.1", False), ("169.254.169.254", False), ("fe80::1", False), ("fc00::1", False), ("224.0.0.1", False),
    ("239.255.255.250", False), ("ff02::1", False), ("255.255.255.255", False), ("240.0.0.1", False),
    ("192.0.2.1", False), ("2001:db8::1", False), ("::ffff:169.254.169.254", False), ("::ffff:127.0.0.1", True),
    ("64:ff9b::a9fe:a9fe", False), ("2002:a9fe:a9fe::", False), ("not an address", False),
])
def test_only_global_unicast_and_loopback_addresses_are_fetched(address: str, fetchable: bool) -> None:
    assert is_fetchable_address(address) is fetchable
