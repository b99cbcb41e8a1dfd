"""Attacks on the shipped origin: each is refused with 401 or 403, in both protocol
eras, before any tool runs; and what must stay open (metadata, preflight, readiness)
does, without a token."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.functions.mcp_server.conftest import DISCOVER, INITIALIZE, MODERN_HEADERS, REGION, Issuer, RunningOrigin

RESOURCE_METADATA = "https://mcp.acme.example/.well-known/oauth-protected-resource/mcp"
TOOL_CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "served_by", "arguments": {}}}


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def alg_none_token(issuer: Issuer) -> str:
    return f"{b64({'alg': 'none', 'typ': 'JWT', 'kid': 'rsa-1'})}.{b64(issuer.claims())}."


def hs256_with_public_key(issuer: Issuer) -> str:
    # The classic confusion attack: HMAC "signed" with the RSA public key (PEM) the
    # JWKS publishes. PyJWT refuses to build such a token itself, so sign by hand.
    import hashlib
    import hmac

    pem = issuer.rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = f"{b64({'alg': 'HS256', 'typ': 'JWT', 'kid': 'rsa-1'})}.{b64(issuer.claims())}"
    signature = base64.urlsafe_b64encode(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()).rstrip(b"=")
    return f"{signing_input}.{signature.decode()}"


def foreign_key_token(issuer: Issuer) -> str:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(issuer.claims(), stranger, algorithm="RS256", headers={"kid": "rsa-1"})


# name -> (token factory, reason the origin logs)
BAD_TOKENS: dict[str, tuple[Callable[[Issuer], str], str]] = {
    "malformed": (lambda i: "not.a.jwt", "malformed token"),
    "garbage": (lambda i: "%%%", "malformed token"),
    "alg none": (alg_none_token, "algorithm 'none' is not allowed"),
    "HS256 signed with the public key": (hs256_with_public_key, "algorithm 'HS256' is not allowed"),
    "expired": (lambda i: i.token(exp=int(time.time()) - 120), "token expired"),
    "not yet valid": (lambda i: i.token(nbf=int(time.time()) + 120), "token not yet valid"),
    "wrong issuer": (lambda i: i.token(iss="https://evil.example/"), "wrong issuer"),
    "wrong audience": (lambda i: i.token(aud="https://other.example/mcp"), "wrong audience"),
    "unknown kid": (lambda i: i.token(kid="rotated-away"), "unknown kid 'rotated-away'"),
    "signed by another key": (foreign_key_token, "bad signature"),
    "RS256 header on the EC key": (lambda i: i.token(alg="RS256", kid="ec-1"), "algorithm does not match the key"),
    "no exp": (lambda i: i.token(exp=None), "missing claim exp"),
    "no aud": (lambda i: i.token(aud=None), "missing claim aud"),
}
ERAS = {
    "2026-07-28": (DISCOVER, MODERN_HEADERS),
    "2025-11-25": (INITIALIZE, {}),
    "2025-06-18 tools/call": (TOOL_CALL, {"mcp-protocol-version": "2025-06-18"}),
}


def assert_bearer_challenge(response) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{RESOURCE_METADATA}"' in challenge
    assert response.headers["x-mcp-edge-served-region"] == REGION


@pytest.mark.parametrize("era", ERAS)
def test_no_token_gets_401_with_resource_metadata(origin: RunningOrigin, era: str):
    body, extra = ERAS[era]
    assert_bearer_challenge(origin.post(body, headers=origin.headers(**extra)))


@pytest.mark.parametrize("era", ERAS)
def test_non_bearer_authorization_gets_401(origin: RunningOrigin, issuer: Issuer, era: str):
    body, extra = ERAS[era]
    headers = origin.headers(**extra, authorization=f"Basic {issuer.token()}")
    assert_bearer_challenge(origin.post(body, headers=headers))


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("attack", BAD_TOKENS)
def test_bad_token_gets_401(origin: RunningOrigin, issuer: Issuer, attack: str, era: str):
    make, _ = BAD_TOKENS[attack]
    body, extra = ERAS[era]
    assert_bearer_challenge(origin.post(body, headers=origin.headers(make(issuer), **extra)))


@pytest.mark.parametrize("attack", BAD_TOKENS)
def test_each_bad_token_is_refused_for_its_own_reason(shipped, origin: RunningOrigin, issuer: Issuer, attack: str):
    import importlib

    auth = importlib.import_module("mcp_server.auth")
    verifier = auth.JwtVerifier(origin.settings, auth.make_jwks_client(origin.settings))
    make, reason = BAD_TOKENS[attack]
    with pytest.raises(auth.TokenRejectedError) as refused:
        verifier.decode(make(issuer))
    assert str(refused.value) == reason


def test_small_clock_skew_is_tolerated_within_leeway(origin: RunningOrigin, issuer: Issuer):
    token = issuer.token(exp=int(time.time()) - 10, nbf=int(time.time()) + 10)  # leeway is 30 s
    assert origin.post(INITIALIZE, headers=origin.headers(token)).status_code == 200


def test_es256_tokens_are_accepted(origin: RunningOrigin, issuer: Issuer):
    assert origin.post(INITIALIZE, headers=origin.headers(issuer.token(alg="ES256"))).status_code == 200


@pytest.mark.parametrize("era", ERAS)
def test_missing_origin_secret_gets_403_even_with_a_valid_token(origin: RunningOrigin, issuer: Issuer, era: str):
    body, extra = ERAS[era]
    headers = origin.headers(issuer.token(), **extra)
    del headers[origin.settings.origin_secret_header]
    response = origin.post(body, headers=headers)
    assert response.status_code == 403
    assert response.headers["x-mcp-edge-served-region"] == REGION
    assert origin.secret not in response.text


@pytest.mark.parametrize("secret", ["", "wrong", "x" * 48])
def test_wrong_origin_secret_gets_403(origin: RunningOrigin, issuer: Issuer, secret: str):
    headers = origin.headers(issuer.token(), **{origin.settings.origin_secret_header: secret})
    assert origin.post(INITIALIZE, headers=headers).status_code == 403


@pytest.mark.parametrize("host", [
    "evil.example",
    "4bq2jzkfx7oyt6lqxs3ysvoc4q0qkhdm.lambda-url.eu-west-1.on.aws",  # another region's URL
    "lambda-url.us-east-1.on.aws",  # the bare suffix
    "x.lambda-url.us-east-1.on.aws.evil.example",
    "127.0.0.1",
    "localhost:8080",
])
@pytest.mark.parametrize("era", ERAS)
def test_wrong_host_gets_403_even_with_secret_and_token(origin: RunningOrigin, issuer: Issuer, host: str, era: str):
    body, extra = ERAS[era]
    response = origin.post(body, headers=origin.headers(issuer.token(), **extra, host=host))
    assert response.status_code == 403
    assert "Host" in response.json()["error_description"]


@pytest.mark.parametrize("host", ["d111111abcdef8.cloudfront.net", "mcp.acme.example"])
def test_distribution_and_custom_domain_hosts_are_served(origin: RunningOrigin, issuer: Issuer, host: str):
    response = origin.post(INITIALIZE, headers=origin.headers(issuer.token(), host=host))
    assert response.status_code == 200


def test_protected_resource_metadata_is_served_without_a_token(origin: RunningOrigin):
    response = origin.post(None, headers=origin.headers(), path="/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 405  # GET only
    import httpx

    response = httpx.get(origin.base_url + "/.well-known/oauth-protected-resource/mcp", headers=origin.headers())
    assert response.status_code == 200
    metadata = response.json()
    assert metadata["resource"] == "https://mcp.acme.example/mcp"
    assert metadata["authorization_servers"] == ["https://auth.acme.example/"]
    assert response.headers["x-mcp-edge-served-region"] == REGION


def test_cors_preflight_is_never_blocked(origin: RunningOrigin):
    import httpx

    response = httpx.options(origin.mcp_url, headers={
        "host": "d111111abcdef8.cloudfront.net",
        "origin": "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-protocol-version, mcp-method",
    })
    assert response.status_code == 200
    allowed = response.headers["access-control-allow-headers"].lower()
    for name in ("authorization", "mcp-protocol-version", "mcp-method"):
        assert name in allowed
    assert "POST" in response.headers["access-control-allow-methods"]


def test_get_on_the_mcp_path_is_405_not_a_held_open_stream(origin: RunningOrigin, issuer: Issuer):
    import httpx

    response = httpx.get(origin.mcp_url, headers=origin.headers(issuer.token(), accept="text/event-stream"), timeout=5)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST, OPTIONS"


def test_readiness_path_answers_without_secret_or_host(origin: RunningOrigin):
    import httpx

    response = httpx.get(origin.base_url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "region": REGION}


def test_oversized_legacy_body_gets_413(origin: RunningOrigin, issuer: Issuer):
    huge = {**TOOL_CALL, "params": {"name": "echo", "arguments": {"text": "x" * (5 * 1024 * 1024)}}}
    response = origin.post(huge, headers=origin.headers(issuer.token(), **{"mcp-protocol-version": "2025-11-25"}))
    assert response.status_code == 413


def test_unparseable_body_gets_a_json_rpc_parse_error(origin: RunningOrigin, issuer: Issuer):
    import httpx

    response = httpx.post(origin.mcp_url, content=b"{not json", headers={
        **origin.headers(issuer.token()), "content-type": "application/json",
        "accept": "application/json, text/event-stream"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert response.headers["x-mcp-edge-served-region"] == REGION


def test_unknown_kids_refresh_the_key_set_at_most_once_per_interval(origin: RunningOrigin, issuer: Issuer):
    before = len(issuer.fetches)
    for n in range(5):
        origin.post(INITIALIZE, headers=origin.headers(issuer.token(kid=f"made-up-{n}")))
    # The cooldown (60 s) started at the last fetch: at most one refresh for all five.
    assert len(issuer.fetches) - before <= 1


def test_a_rotated_in_key_is_picked_up_after_the_cooldown(shipped, origin: RunningOrigin, issuer: Issuer):
    import dataclasses
    import importlib

    auth = importlib.import_module("mcp_server.auth")
    cooldown_s = 3  # generous: the refused decode below must land inside it even on a loaded machine
    settings = dataclasses.replace(origin.settings, jwks_refresh_cooldown_s=cooldown_s)
    verifier = auth.JwtVerifier(settings, auth.make_jwks_client(settings))
    # The slow part (key generation) before the clock starts.
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = jwt.encode(issuer.claims(), new_key, algorithm="RS256", headers={"kid": "rsa-2"})
    verifier.decode(issuer.token())  # caches the current key set
    issuer.add_key("rsa-2", new_key)
    with pytest.raises(auth.TokenRejectedError, match="unknown kid"):
        verifier.decode(token)  # within the cooldown: no refetch
    time.sleep(cooldown_s + 0.1)
    assert verifier.decode(token)["sub"] == "client-1"


def test_unreachable_key_set_refuses_tokens_without_crashing(shipped, origin: RunningOrigin, issuer: Issuer):
    import dataclasses
    import importlib
    import socket

    auth = importlib.import_module("mcp_server.auth")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    settings = dataclasses.replace(origin.settings, jwks_url=f"http://127.0.0.1:{closed_port}/jwks.json")
    verifier = auth.JwtVerifier(settings, auth.make_jwks_client(settings))
    with pytest.raises(auth.TokenRejectedError, match="signing keys unavailable"):
        verifier.decode(issuer.token())


def test_a_request_with_as_many_header_bytes_as_cloudfront_forwards_is_served(origin: RunningOrigin, issuer: Issuer):
    # Given a request whose headers come close to the 20,480 bytes CloudFront forwards at most
    padding = {f"x-viewer-{n}": "v" * 1000 for n in range(18)}
    # When it reaches the origin, Then the app answers it
    response = origin.post(INITIALIZE, headers=origin.headers(issuer.token(), **padding))
    assert response.status_code == 200, response.text[:200]
