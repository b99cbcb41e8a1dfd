"""The development issuer as an OAuth 2.1 authorization server: authorization code with
PKCE, dynamic registration, client ID metadata documents, refresh rotation, and the
RFC's error for every kind of bad request (never a 500)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from local.oauth.issuer import ClientDirectory, IssuerSettings, create_app, generate_key_file
from local.oauth.rules import OAuthError, s256
from tests.cimd import DocumentServer, make_test_ca

AUDIENCE = "http://127.0.0.1:8080/mcp"
ISSUER = "http://127.0.0.1:8100/"
REDIRECT = "http://127.0.0.1/callback"
VERIFIER = "v" * 43 + secrets.token_urlsafe(20)


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("issuer") / "key.pem"
    generate_key_file(path)
    return path


def make_settings(key_file: Path, **overrides: Any) -> IssuerSettings:
    return IssuerSettings(issuer=ISSUER, audience=AUDIENCE, token_path="/oauth/token",
                          jwks_path="/.well-known/jwks.json", key_file=str(key_file), clients={"probe": "s3cret"},
                          scopes=("mcp", "mcp:identity"), default_scopes=("mcp",), **overrides)


@pytest.fixture(scope="module")
def client(key_file: Path) -> TestClient:
    return TestClient(create_app(make_settings(key_file)), follow_redirects=False)


@pytest.fixture(scope="module")
def documents() -> Iterator[DocumentServer]:
    with DocumentServer() as server:
        yield server


def register(client: TestClient, **metadata: Any) -> dict[str, Any]:
    doc = {"redirect_uris": [REDIRECT], "client_name": "test client",
           "grant_types": ["authorization_code", "refresh_token"], **metadata}
    response = client.post("/oauth/register", json=doc)
    assert response.status_code == 201, response.text
    return response.json()


def authorize(client: TestClient, client_id: str, **params: str) -> dict[str, str]:
    """The parameters of the redirect the authorization endpoint answers with."""
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": "http://127.0.0.1:53682/callback",
             "state": "st4te", "code_challenge": s256(VERIFIER), "code_challenge_method": "S256",
             "resource": AUDIENCE, **params}
    response = client.get("/oauth/authorize", params={k: v for k, v in query.items() if v != "-"})
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()} | {"_location": location}


def redeem(client: TestClient, registered: dict[str, Any], code: str, **form: str) -> Any:
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": "http://127.0.0.1:53682/callback",
            "code_verifier": VERIFIER, "resource": AUDIENCE, **form}
    form = {k: v for k, v in data.items() if v != "-"}
    if "client_secret" not in registered:
        return client.post("/oauth/token", data=form | {"client_id": registered["client_id"]})
    return client.post("/oauth/token", data=form, auth=(registered["client_id"], registered["client_secret"]))


def claims_of(client: TestClient, token: str, audience: str = AUDIENCE) -> dict[str, Any]:
    (jwk,) = client.get("/.well-known/jwks.json").json()["keys"]
    return jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["RS256"], audience=audience, issuer=ISSUER)


# --- metadata ------------------------------------------------------------------------------------


def test_metadata_offers_what_mcp_clients_require(client: TestClient) -> None:
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        meta = client.get(path).json()
        assert meta["issuer"] == ISSUER
        assert meta["authorization_endpoint"] == "http://127.0.0.1:8100/oauth/authorize"
        assert meta["registration_endpoint"] == "http://127.0.0.1:8100/oauth/register"
        assert meta["token_endpoint"] == "http://127.0.0.1:8100/oauth/token"
        assert meta["jwks_uri"] == "http://127.0.0.1:8100/.well-known/jwks.json"
        assert meta["response_types_supported"] == ["code"]
        assert set(meta["grant_types_supported"]) == {"authorization_code", "refresh_token", "client_credentials"}
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert "none" in meta["token_endpoint_auth_methods_supported"]
        assert meta["client_id_metadata_document_supported"] is True
        assert meta["authorization_response_iss_parameter_supported"] is True
        assert {"mcp", "mcp:identity"} <= set(meta["scopes_supported"])


def test_browser_clients_may_register_and_redeem_from_their_own_origin(client: TestClient) -> None:
    preflight = client.options("/oauth/token", headers={"origin": "http://localhost:6274",
                                                        "access-control-request-method": "POST",
                                                        "access-control-request-headers": "authorization, content-type"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] in ("*", "http://localhost:6274")
    registered = client.post("/oauth/register", json={"redirect_uris": [REDIRECT]}, headers={"origin": "http://localhost:6274"})
    assert registered.status_code == 201 and registered.headers["access-control-allow-origin"] == "*"


def test_metadata_parses_with_the_official_sdk_models(client: TestClient) -> None:
    from mcp.shared.auth import OAuthMetadata

    meta = OAuthMetadata.model_validate(client.get("/.well-known/oauth-authorization-server").json())
    assert str(meta.issuer) == ISSUER and meta.client_id_metadata_document_supported


# --- authorization code + PKCE, dynamic registration ---------------------------------------------------


def test_a_registered_client_gets_a_code_by_redirect_then_tokens_for_the_resource(client: TestClient) -> None:
    registered = register(client, scope="mcp mcp:identity")
    assert registered["token_endpoint_auth_method"] == "client_secret_basic" and registered["client_secret"]
    answer = authorize(client, registered["client_id"], scope="mcp mcp:identity")
    assert answer["_location"].startswith("http://127.0.0.1:53682/callback?")  # any loopback port
    assert answer["state"] == "st4te" and answer["iss"] == ISSUER
    response = redeem(client, registered, answer["code"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert response.headers["cache-control"] == "no-store"
    assert body["token_type"] == "Bearer" and body["scope"] == "mcp mcp:identity" and body["refresh_token"]
    claims = claims_of(client, body["access_token"])
    assert claims["aud"] == AUDIENCE and claims["client_id"] == registered["client_id"]
    assert claims["scope"] == "mcp mcp:identity" and claims["sub"] == "local-developer"


def test_a_public_client_registers_without_a_secret_and_redeems_with_pkce_alone(client: TestClient) -> None:
    registered = register(client, token_endpoint_auth_method="none")
    assert "client_secret" not in registered
    answer = authorize(client, registered["client_id"])
    response = redeem(client, registered, answer["code"])
    assert response.status_code == 200, response.text
    assert response.json()["scope"] == "mcp"  # the default scopes when none is asked for


def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_family(client: TestClient) -> None:
    registered = register(client, token_endpoint_auth_method="none")
    first = redeem(client, registered, authorize(client, registered["client_id"])["code"]).json()

    def refresh(token: str, **form: str) -> Any:
        return client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": token,
                                                 "client_id": registered["client_id"], **form})

    second = refresh(first["refresh_token"], resource=AUDIENCE)
    assert second.status_code == 200, second.text
    assert second.json()["refresh_token"] != first["refresh_token"]
    assert second.json()["access_token"] != first["access_token"]
    reused = refresh(first["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert "already used" in reused.json()["error_description"]
    # ... and the rotated token, issued to the same grant, stops working too.
    assert refresh(second.json()["refresh_token"]).json()["error"] == "invalid_grant"


def test_a_refresh_token_works_only_for_its_client_and_its_resource(client: TestClient) -> None:
    alice, mallory = (register(client, token_endpoint_auth_method="none") for _ in range(2))
    first = redeem(client, alice, authorize(client, alice["client_id"])["code"]).json()
    stolen = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                               "client_id": mallory["client_id"]})
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    elsewhere = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                                  "client_id": alice["client_id"], "resource": "https://other.example/"})
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target"


def test_a_refresh_cannot_widen_the_scope(client: TestClient) -> None:
    registered = register(client, token_endpoint_auth_method="none")
    first = redeem(client, registered, authorize(client, registered["client_id"], scope="mcp")["code"]).json()
    wider = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"],
                                              "client_id": registered["client_id"], "scope": "mcp mcp:identity"})
    assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope"


def test_the_consent_page_names_the_client_and_redirect_host_and_the_decision_is_posted(key_file: Path) -> None:
    consenting = TestClient(create_app(make_settings(key_file, consent=True)), follow_redirects=False)
    registered = register(consenting, client_name="Consent <b>test</b>")
    page = consenting.get("/oauth/authorize", params={
        "response_type": "code", "client_id": registered["client_id"], "redirect_uri": REDIRECT, "state": "s",
        "code_challenge": s256(VERIFIER), "code_challenge_method": "S256", "scope": "mcp"})
    assert page.status_code == 200 and "Consent &lt;b&gt;test&lt;/b&gt;" in page.text and "127.0.0.1" in page.text
    request_id = page.text.split('name="request_id" value="')[1].split('"')[0]
    denied = consenting.post("/oauth/authorize", data={"request_id": request_id, "decision": "deny"})
    assert "error=access_denied" in denied.headers["location"]
    again = consenting.post("/oauth/authorize", data={"request_id": request_id, "decision": "approve"})
    assert again.status_code == 400 and again.json()["error"] == "invalid_request"  # used once


# --- client ID metadata documents ---------------------------------------------------------------------------


def test_a_client_id_metadata_document_is_fetched_checked_and_cached(client: TestClient,
                                                                     documents: DocumentServer) -> None:
    url = documents.url("/clients/good.json")
    documents.publish("/clients/good.json", {"client_id": url, "client_name": "CIMD client", "redirect_uris": [REDIRECT],
                                             "grant_types": ["authorization_code", "refresh_token"],
                                             "token_endpoint_auth_method": "none"},
                      headers={"cache-control": "max-age=60"})
    answer = authorize(client, url)
    token = client.post("/oauth/token", data={"grant_type": "authorization_code", "code": answer["code"],
                                              "client_id": url, "redirect_uri": "http://127.0.0.1:53682/callback",
                                              "code_verifier": VERIFIER})
    assert token.status_code == 200, token.text
    assert claims_of(client, token.json()["access_token"])["client_id"] == url
    assert documents.fetches.count("/clients/good.json") == 1  # cached for the token request


@pytest.mark.parametrize(("doc", "status", "headers", "what"), [
    ({"client_id": "http://elsewhere.example/x.json", "client_name": "x", "redirect_uris": [REDIRECT]}, 200, {},
     "must be the document's URL"),
    ({"client_name": "x", "redirect_uris": [REDIRECT]}, 200, {}, "must be the document's URL"),
    ("SELF", 200, {}, "no client_name"),
    (b"not json", 200, {}, "not JSON"),
    (b"{" + b" " * 6000 + b"}", 200, {}, "over"),
    ({}, 302, {"location": "http://127.0.0.1/"}, "HTTP 302"),
    ("SECRET", 200, {}, "token_endpoint_auth_method"),
])
def test_a_bad_client_metadata_document_is_invalid_client_and_never_redirected(
        client: TestClient, documents: DocumentServer, doc: Any, status: int, headers: dict[str, str],
        what: str) -> None:
    path = f"/clients/bad-{secrets.token_hex(4)}.json"
    url = documents.url(path)
    if doc == "SELF":
        doc = {"client_id": url, "redirect_uris": [REDIRECT]}
    elif doc == "SECRET":
        doc = {"client_id": url, "client_name": "x", "redirect_uris": [REDIRECT],
               "token_endpoint_auth_method": "client_secret_basic"}
    documents.publish(path, doc, status=status, headers=headers)
    response = client.get("/oauth/authorize", params={"response_type": "code", "client_id": url, "redirect_uri": REDIRECT,
                                                      "code_challenge": s256(VERIFIER), "code_challenge_method": "S256"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_client"
    assert what in response.json()["error_description"]


def test_an_https_metadata_document_is_fetched_with_certificate_checks(key_file: Path, tmp_path: Path) -> None:
    tls = make_test_ca(tmp_path / "tls")
    with DocumentServer(tls) as https:
        url = https.publish("/client.json", {"client_id": https.url("/client.json"), "client_name": "tls client",
                                             "redirect_uris": [REDIRECT]})
        params = {"response_type": "code", "client_id": url, "redirect_uri": REDIRECT,
                  "code_challenge": s256(VERIFIER), "code_challenge_method": "S256"}
        untrusting = TestClient(create_app(make_settings(key_file)), follow_redirects=False)
        refused = untrusting.get("/oauth/authorize", params=params)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_client"
        assert "could not be fetched" in refused.json()["error_description"]
        trusting = TestClient(create_app(make_settings(key_file, trusted_ca_file=str(tls.ca_file))),
                              follow_redirects=False)
        assert trusting.get("/oauth/authorize", params=params).status_code == 302


def test_a_metadata_document_that_does_not_answer_in_time_is_refused(key_file: Path) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts, never answers
    try:
        slow = TestClient(create_app(make_settings(key_file, metadata_timeout_s=0.5)), follow_redirects=False)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/client.json"
        response = slow.get("/oauth/authorize", params={"response_type": "code", "client_id": url})
        assert response.status_code == 400 and response.json()["error"] == "invalid_client"
        assert "within 0.5 s" in response.json()["error_description"]
    finally:
        listener.close()


# --- negative cases: each error of the RFCs -----------------------------------------------------------------


def test_pkce_plain_and_a_missing_challenge_are_refused_by_redirect(client: TestClient) -> None:
    registered = register(client)
    plain = authorize(client, registered["client_id"], code_challenge=VERIFIER, code_challenge_method="plain")
    assert plain["error"] == "invalid_request" and "only S256" in plain["error_description"]
    assert plain["state"] == "st4te" and plain["iss"] == ISSUER
    absent_method = authorize(client, registered["client_id"], code_challenge_method="-")
    assert absent_method["error"] == "invalid_request"
    missing = authorize(client, registered["client_id"], code_challenge="-", code_challenge_method="-")
    assert missing["error"] == "invalid_request" and "code_challenge is required" in missing["error_description"]


def test_a_wrong_code_verifier_is_invalid_grant(client: TestClient) -> None:
    registered = register(client)
    code = authorize(client, registered["client_id"])["code"]
    response = redeem(client, registered, code, code_verifier="w" * 50)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert redeem(client, registered, code, code_verifier="-").json()["error"] == "invalid_grant"


def test_a_redirect_uri_mismatch_is_shown_not_redirected(client: TestClient) -> None:
    registered = register(client)
    for wrong in ("http://127.0.0.1:9999/other", "https://attacker.example/callback", "http://127.0.0.1/callback#x",
                  "http://localhost/callback"):
        response = client.get("/oauth/authorize", params={
            "response_type": "code", "client_id": registered["client_id"], "redirect_uri": wrong,
            "code_challenge": s256(VERIFIER), "code_challenge_method": "S256"})
        assert response.status_code == 400, wrong
        assert response.json()["error"] == "invalid_request" and "location" not in response.headers


def test_the_token_request_must_repeat_the_redirect_uri_exactly(client: TestClient) -> None:
    registered = register(client)
    code = authorize(client, registered["client_id"])["code"]
    response = redeem(client, registered, code, redirect_uri="http://127.0.0.1:1/callback")
    assert response.json()["error"] == "invalid_grant"


def test_a_code_works_once_and_its_second_use_revokes_the_first_tokens(client: TestClient) -> None:
    registered = register(client)
    code = authorize(client, registered["client_id"])["code"]
    first = redeem(client, registered, code)
    assert first.status_code == 200
    second = redeem(client, registered, code)
    assert second.status_code == 400 and second.json()["error"] == "invalid_grant"
    refreshed = client.post("/oauth/token", data={"grant_type": "refresh_token",
                                                  "refresh_token": first.json()["refresh_token"]},
                            auth=(registered["client_id"], registered["client_secret"]))
    assert refreshed.json()["error"] == "invalid_grant"


def test_an_expired_code_is_invalid_grant(key_file: Path) -> None:
    quick = TestClient(create_app(make_settings(key_file, code_lifetime_s=-1)), follow_redirects=False)
    registered = register(quick)
    code = authorize(quick, registered["client_id"])["code"]
    response = redeem(quick, registered, code)
    assert response.json()["error"] == "invalid_grant" and "expired" in response.json()["error_description"]


def test_a_code_of_another_client_is_invalid_grant(client: TestClient) -> None:
    alice, mallory = register(client), register(client)
    code = authorize(client, alice["client_id"])["code"]
    assert redeem(client, mallory, code).json()["error"] == "invalid_grant"


def test_a_token_for_another_resource_is_refused(client: TestClient) -> None:
    registered = register(client)
    answer = authorize(client, registered["client_id"], resource="https://other.example/mcp")
    assert answer["error"] == "invalid_target" and answer["iss"] == ISSUER
    code = authorize(client, registered["client_id"])["code"]
    response = redeem(client, registered, code, resource="https://other.example/mcp")
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"
    cc = client.post("/oauth/token", data={"grant_type": "client_credentials", "resource": "https://other.example/"},
                     auth=("probe", "s3cret"))
    assert cc.json()["error"] == "invalid_target"


def test_an_unknown_scope_is_invalid_scope(client: TestClient) -> None:
    registered = register(client)
    answer = authorize(client, registered["client_id"], scope="mcp admin:everything")
    assert answer["error"] == "invalid_scope" and "admin:everything" in answer["error_description"]
    assert authorize(client, registered["client_id"], scope='bad"quote')["error"] == "invalid_scope"


def test_a_client_registered_for_some_scopes_may_step_up_to_others_the_issuer_serves(client: TestClient) -> None:
    registered = register(client, scope="mcp")
    answer = authorize(client, registered["client_id"], scope="mcp mcp:identity")
    assert redeem(client, registered, answer["code"]).json()["scope"] == "mcp mcp:identity"


def test_an_unknown_response_type_is_redirected_as_unsupported(client: TestClient) -> None:
    registered = register(client)
    assert authorize(client, registered["client_id"], response_type="token")["error"] == "unsupported_response_type"


def test_an_unknown_client_is_shown_invalid_client(client: TestClient) -> None:
    response = client.get("/oauth/authorize", params={"response_type": "code", "client_id": "nobody",
                                                      "redirect_uri": REDIRECT})
    assert response.status_code == 400 and response.json()["error"] == "invalid_client"
    token = client.post("/oauth/token", data={"grant_type": "authorization_code", "code": "x", "client_id": "nobody"})
    assert token.status_code == 401 and token.json()["error"] == "invalid_client"


def test_a_public_client_may_not_use_client_credentials(client: TestClient) -> None:
    registered = register(client, token_endpoint_auth_method="none")
    response = client.post("/oauth/token", data={"grant_type": "client_credentials",
                                                 "client_id": registered["client_id"]})
    assert response.status_code == 400 and response.json()["error"] == "unauthorized_client"


def test_a_repeated_parameter_is_invalid_request(client: TestClient) -> None:
    registered = register(client)
    response = client.post("/oauth/token", content=f"grant_type=authorization_code&code=a&code=b&client_id="
                           f"{registered['client_id']}", headers={"content-type": "application/x-www-form-urlencoded"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


@pytest.mark.parametrize(("doc", "error"), [
    ({"redirect_uris": ["https://app.example/cb#frag"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["http://app.example/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": []}, "invalid_redirect_uri"),
    ({"redirect_uris": [REDIRECT], "grant_types": ["password"]}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "scope": "root"}, "invalid_client_metadata"),
    ({"redirect_uris": "http://127.0.0.1/cb"}, "invalid_redirect_uri"),
    ([1, 2], "invalid_client_metadata"),
])
def test_bad_registrations_get_rfc7591_errors(client: TestClient, doc: Any, error: str) -> None:
    response = client.post("/oauth/register", json=doc)
    assert response.status_code == 400 and response.json()["error"] == error, response.text


def test_a_registration_that_is_not_json_is_refused(client: TestClient) -> None:
    response = client.post("/oauth/register", content=b"{nope", headers={"content-type": "application/json"})
    assert response.json()["error"] == "invalid_client_metadata"
    assert client.post("/oauth/register", data={"a": "b"}).json()["error"] == "invalid_client_metadata"


def test_a_missing_grant_type_is_invalid_request(client: TestClient) -> None:
    response = client.post("/oauth/token", data={"client_id": "x"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60)
_params = st.dictionaries(st.sampled_from(["response_type", "client_id", "redirect_uri", "state", "code_challenge",
                                           "code_challenge_method", "scope", "resource", "grant_type", "code",
                                           "code_verifier", "refresh_token", "client_secret", "audience"]),
                          _text, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=_params, basic=st.one_of(st.none(), _text))
def test_no_request_makes_the_issuer_answer_500(client: TestClient, params: dict[str, str], basic: str | None) -> None:
    headers = {b"authorization": b"Basic " + basic.encode()} if basic is not None else {}
    for response in (client.get("/oauth/authorize", params=params),
                     client.post("/oauth/token", data=params, headers=headers),
                     client.post("/oauth/register", json=params)):
        assert response.status_code < 500, (response.request.url, response.text)
        if response.status_code >= 400:
            assert response.json()["error"] and response.json()["error_description"]


# --- who gets a code without a person: loopback redirect URIs only (RFC 8252) ----------------------------------


def authorize_answer(client: TestClient, client_id: str, redirect_uri: str, **params: str) -> Any:
    return client.get("/oauth/authorize", params={
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "st4te",
        "code_challenge": s256(VERIFIER), "code_challenge_method": "S256", **params})


def test_a_web_page_registering_a_site_redirect_gets_the_consent_page_not_a_code(client: TestClient) -> None:
    evil = "https://evil.example/cb"
    registered = client.post("/oauth/register", json={"redirect_uris": [evil], "token_endpoint_auth_method": "none"},
                             headers={"origin": "https://evil.example"})
    assert registered.status_code == 201  # registration stays open, as RFC 7591 allows
    page = authorize_answer(client, registered.json()["client_id"], evil)
    assert page.status_code == 200 and "location" not in page.headers, page.headers
    assert "code=" not in page.text and "<strong>evil.example</strong>" in page.text
    assert page.headers["x-frame-options"] == "DENY"
    # Only the developer's decision sends a code there.
    request_id = page.text.split('name="request_id" value="')[1].split('"')[0]
    approved = client.post("/oauth/authorize", data={"request_id": request_id, "decision": "approve"})
    assert approved.headers["location"].startswith(evil + "?code=")


@pytest.mark.parametrize("redirect", ["com.example.app:/callback", "https://app.example/cb"])
def test_every_redirect_uri_off_loopback_needs_consent(client: TestClient, redirect: str) -> None:
    registered = register(client, redirect_uris=[redirect])
    assert authorize_answer(client, registered["client_id"], redirect).status_code == 200


@pytest.mark.parametrize(("registered_uri", "presented"), [
    ("http://127.0.0.1/callback", "http://127.0.0.1:53682/callback"),
    ("http://[::1]/callback", "http://[::1]:8123/callback"),
    ("http://localhost/cb", "http://localhost:49152/cb"),
    ("https://127.0.0.1:9443/cb", "https://127.0.0.1:9443/cb"),
])
def test_a_loopback_redirect_uri_is_approved_at_once_on_any_port(client: TestClient, registered_uri: str,
                                                                 presented: str) -> None:
    registered = register(client, redirect_uris=[registered_uri])
    answer = authorize_answer(client, registered["client_id"], presented)
    assert answer.status_code == 302 and answer.headers["location"].startswith(presented + "?code=")


def test_the_authorization_endpoint_is_not_readable_cross_origin(client: TestClient) -> None:
    registered = register(client, redirect_uris=["https://evil.example/cb"])
    page = client.get("/oauth/authorize", params={
        "response_type": "code", "client_id": registered["client_id"], "redirect_uri": "https://evil.example/cb",
        "code_challenge": s256(VERIFIER), "code_challenge_method": "S256"}, headers={"origin": "https://evil.example"})
    assert page.status_code == 200 and "access-control-allow-origin" not in page.headers  # its request id stays put
    preflight = client.options("/oauth/authorize", headers={"origin": "https://evil.example",
                                                            "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


# --- RFC 6749 details of the authorization and token endpoints -------------------------------------------------------


def test_a_missing_response_type_is_invalid_request(client: TestClient) -> None:
    registered = register(client)
    answer = authorize(client, registered["client_id"], response_type="-")
    assert answer["error"] == "invalid_request" and "response_type" in answer["error_description"]
    assert answer["state"] == "st4te"


def test_the_token_request_needs_no_redirect_uri_when_the_authorization_request_had_none(client: TestClient) -> None:
    registered = register(client)  # one redirect URI: the authorization request may leave it out
    answer = authorize(client, registered["client_id"], redirect_uri="-")
    assert answer["_location"].startswith(REDIRECT + "?")
    response = redeem(client, registered, answer["code"], redirect_uri="-")
    assert response.status_code == 200, response.text
    # Sent anyway, it must be the one the code went to.
    answer = authorize(client, registered["client_id"], redirect_uri="-")
    assert redeem(client, registered, answer["code"], redirect_uri="http://127.0.0.1:1/callback").json()["error"] \
        == "invalid_grant"


def test_the_token_request_must_repeat_a_redirect_uri_the_authorization_request_had(client: TestClient) -> None:
    registered = register(client)
    code = authorize(client, registered["client_id"])["code"]
    response = redeem(client, registered, code, redirect_uri="-")
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    assert "redirect_uri is required" in response.json()["error_description"]


_FIELDS = "&".join(f"f{i}=x" for i in range(1001))
_RESOURCES = "&".join(["resource=" + AUDIENCE.replace(":", "%3A").replace("/", "%2F")] * 1001)


@pytest.mark.parametrize("body", [_FIELDS, "grant_type=client_credentials" + "&resource=x" * 1001])
def test_a_token_request_over_a_thousand_fields_is_a_json_invalid_request(client: TestClient, body: str) -> None:
    response = client.post("/oauth/token", content=body, auth=("probe", "s3cret"),
                           headers={"content-type": "application/x-www-form-urlencoded"})
    assert response.status_code == 400 and response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "invalid_request" and "1000" in response.json()["error_description"]


def test_an_authorization_request_over_a_thousand_fields_is_redirected_as_invalid_request(client: TestClient) -> None:
    registered = register(client)
    query = (f"response_type=code&client_id={registered['client_id']}&state=st4te&code_challenge={s256(VERIFIER)}"
             f"&code_challenge_method=S256&{_RESOURCES}")
    response = client.get("/oauth/authorize?" + query)
    assert response.status_code == 302, response.text
    answer = {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}
    assert answer["error"] == "invalid_request" and answer["state"] == "st4te" and "code" not in answer
    # Without a client to redirect to, the error is shown.
    shown = client.get("/oauth/authorize?" + _FIELDS)
    assert shown.status_code == 400 and shown.json()["error"] == "invalid_client"


def test_a_consent_decision_over_a_thousand_fields_is_a_json_invalid_request(client: TestClient) -> None:
    response = client.post("/oauth/authorize", content=_FIELDS,
                           headers={"content-type": "application/x-www-form-urlencoded"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


# --- registration metadata: Unicode text, RFC 3986 redirect URIs ----------------------------------------------------


@pytest.mark.parametrize("body", [
    b'{"redirect_uris": ["http://127.0.0.1/callback"], "client_name": "x\\ud800"}',
    b'{"redirect_uris": ["http://127.0.0.1/callback"], "software_id": "\\udfff"}',
    b'{"redirect_uris": ["http://127.0.0.1/cb\\ud800"]}',
    b'{"redirect_uris": ["http://127.0.0.1/callback"], "\\ud800": 1}',
])
def test_a_lone_surrogate_in_registration_metadata_is_invalid_client_metadata(client: TestClient,
                                                                               body: bytes) -> None:
    response = client.post("/oauth/register", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata", response.text


def test_a_registration_refused_for_a_lone_surrogate_stores_no_client(key_file: Path) -> None:
    directory = ClientDirectory(make_settings(key_file))
    with pytest.raises(OAuthError) as info:
        directory.register(json.loads('{"redirect_uris": ["http://127.0.0.1/callback"], "client_name": "\\ud800"}'))
    assert info.value.error == "invalid_client_metadata" and "client_name" in info.value.description
    assert not directory.registered


@pytest.mark.parametrize("uri", ["http://127.0.0.1/call\r\nback", "http://127.0.0.1/call back", "http://127.0.0.1/\tcb",
                                 "http://127.0.0.1/cb\x00", " https://app.example/cb", "https://app.example/cb\n",
                                 "https://app.example/c%zzb", "https://app.example/<cb>", "https://[zz]/cb"])
def test_a_redirect_uri_that_is_not_an_rfc3986_absolute_uri_is_refused(client: TestClient, uri: str) -> None:
    response = client.post("/oauth/register", json={"redirect_uris": [uri]})
    assert response.status_code == 400 and response.json()["error"] == "invalid_redirect_uri", (uri, response.text)


# --- client ID metadata documents: which URLs and addresses are fetched -----------------------------------------------


class RecordingTransport(httpx.AsyncBaseTransport):
    """Answers every request with ``document`` (the request's URL as client_id when None), recording it."""

    def __init__(self, document: dict[str, Any] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.document = document

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=self.document, headers={"cache-control": "max-age=60"})


def recording_directory(key_file: Path, transport: RecordingTransport, **overrides: Any) -> ClientDirectory:
    directory = ClientDirectory(make_settings(key_file, **overrides))
    directory._http = httpx.AsyncClient(transport=transport)
    return directory


def find(directory: ClientDirectory, client_id: str) -> Any:
    return anyio.run(directory.find, client_id)


@pytest.mark.parametrize("client_id", [
    "http://user:secret@127.0.0.1:9/client.json",
    "https://user@app.example/client.json",
    "https://app.example/clients/../client.json",
    "https://app.example/./client.json",
    "https://app.example/clients/%2E%2E/client.json",
    "https://app.example/client.json#x",
    "https://app.example/client json",
])
def test_a_client_id_url_with_userinfo_dot_segments_or_bad_syntax_is_never_fetched(key_file: Path,
                                                                                   client_id: str) -> None:
    transport = RecordingTransport()
    with pytest.raises(OAuthError) as info:
        find(recording_directory(key_file, transport), client_id)
    assert info.value.error == "invalid_client" and "cannot name a client ID metadata document" in \
        info.value.description
    assert transport.requests == []


@pytest.mark.parametrize("host", ["0.0.0.0", "169.254.169.254", "10.0.0.1", "192.168.1.1", "100.64.0.1",
                                  "224.0.0.251", "[::]", "[fe80::1]", "[fc00::1]", "[::ffff:10.0.0.1]",
                                  "255.255.255.255"])
def test_special_use_addresses_are_refused_before_any_fetch(key_file: Path, host: str) -> None:
    transport = RecordingTransport()
    with pytest.raises(OAuthError) as info:
        find(recording_directory(key_file, transport), f"https://{host}/client.json")
    assert info.value.error == "invalid_client" and "special-use address" in info.value.description
    assert transport.requests == []


def test_a_host_name_resolving_to_a_special_use_address_is_refused_before_any_fetch(key_file: Path) -> None:
    transport = RecordingTransport()
    directory = recording_directory(key_file, transport)

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "10.1.2.3"]  # one public, one private: refused

    directory.resolve = resolve
    with pytest.raises(OAuthError) as info:
        find(directory, "https://docs.example/client.json")
    assert "10.1.2.3" in info.value.description and transport.requests == []


def test_a_metadata_document_is_fetched_from_the_address_its_host_resolved_to(key_file: Path) -> None:
    url = "https://docs.example:8443/clients/app.json?v=1"
    transport = RecordingTransport({"client_id": url, "client_name": "pinned", "redirect_uris": [REDIRECT]})
    directory = recording_directory(key_file, transport)
    answers = iter([["93.184.215.14"], ["10.0.0.1"]])  # a rebinding resolver: the second answer is never asked
    asked: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return next(answers)

    directory.resolve = resolve
    assert find(directory, url).client_id == url
    (request,) = transport.requests
    assert asked == [("docs.example", 8443)]
    assert str(request.url) == "https://93.184.215.14:8443/clients/app.json?v=1"
    assert request.headers["host"] == "docs.example:8443"
    assert request.extensions["sni_hostname"] == "docs.example"  # the certificate is checked for the name


def test_an_http_document_host_must_resolve_to_loopback(key_file: Path) -> None:
    transport = RecordingTransport()
    directory = recording_directory(key_file, transport)

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.215.14"]

    directory.resolve = resolve
    with pytest.raises(OAuthError) as info:
        find(directory, "http://localhost:9000/client.json")
    assert "loopback only" in info.value.description and transport.requests == []


def with_lone_surrogate_name(url: str) -> bytes:
    """A client ID metadata document for ``url`` whose client_name is the JSON escape of a lone surrogate."""
    doc = json.dumps({"client_id": url, "client_name": "NAME", "redirect_uris": [REDIRECT]})
    return doc.replace('"NAME"', '"\\ud800"').encode()


def test_a_metadata_document_with_a_lone_surrogate_is_refused_and_not_kept(key_file: Path) -> None:
    url = "https://docs.example/client.json"

    class Raw(RecordingTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return httpx.Response(200, content=with_lone_surrogate_name(url), headers={"cache-control": "max-age=60"})

    transport = Raw()
    directory = recording_directory(key_file, transport)

    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.215.14"]

    directory.resolve = resolve
    with pytest.raises(OAuthError) as info:
        find(directory, url)
    assert info.value.error == "invalid_client" and "lone UTF-16 surrogate" in info.value.description
    assert directory.documents == {}


def test_a_consent_page_for_a_document_with_a_lone_surrogate_is_never_a_500(key_file: Path,
                                                                          documents: DocumentServer) -> None:
    path = f"/clients/surrogate-{secrets.token_hex(4)}.json"
    url = documents.url(path)
    documents.publish(path, with_lone_surrogate_name(url))
    consenting = TestClient(create_app(make_settings(key_file, consent=True)), follow_redirects=False)
    response = authorize_answer(consenting, url, REDIRECT)
    assert response.status_code == 400 and response.json()["error"] == "invalid_client"


def test_a_cross_origin_token_request_learns_nothing_from_a_metadata_document_fetch(client: TestClient,
                                                                                    documents: DocumentServer) -> None:
    url = documents.url(f"/missing-{secrets.token_hex(4)}.json")  # answers 404
    form = {"grant_type": "authorization_code", "code": "x", "client_id": url}
    same_origin = client.post("/oauth/token", data=form)
    assert same_origin.status_code == 401 and "HTTP 404" in same_origin.json()["error_description"]
    cross = client.post("/oauth/token", data=form, headers={"origin": "https://evil.example"})
    assert cross.status_code == 401 and cross.json()["error"] == "invalid_client"
    assert "404" not in cross.json()["error_description"] and url not in cross.json()["error_description"]
