"""The development issuer: tokens the origin's checks accept, and clear OAuth errors."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from local.oauth.issuer import (
    IssuerSettings,
    OAuthError,
    authenticate_client,
    create_app,
    generate_key_file,
    load_private_key,
    public_jwk,
    sign_token,
)

AUDIENCE = "http://127.0.0.1:8080/mcp"
ISSUER = "http://127.0.0.1:8100/"


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("issuer") / "key.pem"
    generate_key_file(path)
    return path


@pytest.fixture(scope="module")
def client(key_file: Path) -> TestClient:
    settings = IssuerSettings(
        issuer=ISSUER, audience=AUDIENCE, token_path="/oauth/token", jwks_path="/.well-known/jwks.json",
        key_file=str(key_file), clients={"probe": "s3cret", "odd id:+&": "p@ss:w+rd/"},
    )
    return TestClient(create_app(settings))


def _basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()).decode()


def _verify(client: TestClient, token: str) -> dict:
    jwks = client.get("/.well-known/jwks.json").json()
    header = jwt.get_unverified_header(token)
    (jwk,) = [k for k in jwks["keys"] if k["kid"] == header["kid"]]
    key = jwt.PyJWK(jwk).key
    return jwt.decode(token, key, algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER,
                      options={"require": ["exp", "iss", "aud"]})


def test_key_file_is_private(key_file: Path) -> None:
    assert key_file.stat().st_mode & 0o077 == 0


def test_client_credentials_token_verifies_against_the_jwks(client: TestClient) -> None:
    response = client.post("/oauth/token", data={"grant_type": "client_credentials", "resource": AUDIENCE},
                           headers={"authorization": _basic("probe", "s3cret")})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert response.headers["cache-control"] == "no-store"
    claims = _verify(client, body["access_token"])
    assert claims["client_id"] == claims["sub"] == "probe"
    assert claims["exp"] - claims["iat"] == 3600
    assert jwt.get_unverified_header(body["access_token"])["typ"] == "at+jwt"


def test_client_secret_post_and_form_encoded_basic_credentials_are_accepted(client: TestClient) -> None:
    posted = client.post("/oauth/token", data={"grant_type": "client_credentials", "client_id": "probe",
                                                "client_secret": "s3cret"})
    assert posted.status_code == 200, posted.text
    odd = client.post("/oauth/token", data={"grant_type": "client_credentials"},
                      headers={"authorization": _basic("odd id:+&", "p@ss:w+rd/")})
    assert odd.status_code == 200, odd.text
    assert _verify(client, odd.json()["access_token"])["client_id"] == "odd id:+&"


@pytest.mark.parametrize(
    ("data", "headers", "status", "error"),
    [
        ({"grant_type": "client_credentials"}, {"authorization": _basic("probe", "wrong")}, 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, {"authorization": _basic("nobody", "s3cret")}, 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, {}, 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, {"authorization": "Basic !!!"}, 401, "invalid_client"),
        ({"grant_type": "password"}, {"authorization": _basic("probe", "s3cret")}, 400, "unsupported_grant_type"),
        ({"grant_type": "client_credentials", "resource": "https://elsewhere.example/mcp"},
         {"authorization": _basic("probe", "s3cret")}, 400, "invalid_target"),
        ({"grant_type": "client_credentials", "client_id": "probe", "client_secret": "s3cret"},
         {"authorization": _basic("probe", "s3cret")}, 400, "invalid_request"),
    ],
)
def test_bad_token_requests_get_oauth_errors(client: TestClient, data: dict, headers: dict, status: int,
                                             error: str) -> None:
    response = client.post("/oauth/token", data=data, headers=headers)
    assert response.status_code == status
    assert response.json()["error"] == error
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Basic")


def test_a_json_token_request_is_refused(client: TestClient) -> None:
    response = client.post("/oauth/token", json={"grant_type": "client_credentials"},
                           headers={"authorization": _basic("probe", "s3cret")})
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


def test_expired_tokens_can_be_minted_for_tests(key_file: Path, client: TestClient) -> None:
    token = sign_token(load_private_key(key_file), issuer=ISSUER, audience=AUDIENCE, client_id="probe",
                       lifetime_s=-300, scope="mcp")
    with pytest.raises(jwt.ExpiredSignatureError):
        _verify(client, token)


def test_kid_is_the_rfc7638_thumbprint_and_stable(key_file: Path) -> None:
    key = load_private_key(key_file)
    assert public_jwk(key)["kid"] == public_jwk(key)["kid"]
    assert len(public_jwk(key)["kid"]) == 43


@settings(max_examples=200, deadline=None)
@given(client_id=st.text(min_size=1, max_size=40).filter(lambda s: "\0" not in s),
       secret=st.text(min_size=1, max_size=40).filter(lambda s: "\0" not in s))
def test_basic_credentials_round_trip_any_id_and_secret(client_id: str, secret: str) -> None:
    assert authenticate_client({client_id: secret}, {}, _basic(client_id, secret)) == client_id
    with pytest.raises(OAuthError):
        authenticate_client({client_id: secret + "x"}, {}, _basic(client_id, secret))
