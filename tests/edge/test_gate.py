"""The edge gate (``edge_gate.handler`` and ``geo_router``, rendered by
``edge.gate_package`` and imported from the rendered files) on CloudFront origin-request
events: token verification and its attacks, the key set's refresh, scopes in both
protocol eras, the body, the identity headers and the SigV4 signature (checked with
botocore, independently of the edge's signer)."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import given
from hypothesis import strategies as st

from devkit.jwks import JwksServer, public_jwk
from edge.protocol import AVOID_REGIONS_HEADER as AVOID_HEADER
from tests.edge.gate_harness import (
    ALLOWED_ORIGIN,
    AUDIENCE,
    CREDENTIALS,
    ISSUER,
    METADATA_URL,
    ORIGINS,
    PIN_HEADER,
    PROBE_CLIENT_ID,
    READINESS_PATH,
    REFUSAL_HEADER,
    RESOURCE,
    TOOLS_CALL,
    Issuer,
    event,
    header,
    render,
    rpc,
    settings,
    status,
    verify_sigv4,
)

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
# A browser's CORS preflight of a POST, from the origin the harness's stack allows.
PREFLIGHT = {"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST"}


@pytest.fixture(autouse=True)
def role_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Lambda@Edge gives the function: its role's credentials in the environment."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer.generate()


@pytest.fixture(scope="module")
def gate(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The gate with the issuer's key set embedded; its JWKS URL answers nothing."""
    return render(settings(issuer.jwks), tmp_path_factory.mktemp("gate"))


def call(gate: ModuleType, token: str | None = None, body: Any = TOOLS_CALL, **kwargs: Any) -> dict[str, Any]:
    headers = dict(kwargs.pop("headers", {}))
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    raw = body if isinstance(body, bytes) or body is None else rpc(body)
    result: dict[str, Any] = gate.handler(event(headers, body=raw, **kwargs), None)
    return result


def refused(result: dict[str, Any], code: int) -> dict[str, Any]:
    assert status(result) == code, result
    document: dict[str, Any] = json.loads(result["body"])
    return document


def scoped(issuer: Issuer, scope: str = "mcp search:read", **claims: Any) -> str:
    return issuer.token(scope=scope, **claims)


# --- the router's behaviour is kept ---------------------------------------------------------


def test_a_valid_call_is_routed_like_the_router_alone_and_forwarded(gate, issuer):
    result = call(gate, scoped(issuer), headers={"CloudFront-Viewer-Country": "JP"})
    assert status(result) is None, result
    custom = result["origin"]["custom"]
    assert custom["domainName"] == ORIGINS["ap-northeast-1"].domain_name
    assert header(result, "host") == ORIGINS["ap-northeast-1"].host_header


def test_the_origin_is_edited_in_place_and_a_probes_pin_wins(gate, issuer):
    cf_event = event({"Authorization": f"Bearer {scoped(issuer, client_id=PROBE_CLIENT_ID)}",
                      "CloudFront-Viewer-Country": "JP", PIN_HEADER: "eu-west-1"}, body=rpc(TOOLS_CALL))
    request = cf_event["Records"][0]["cf"]["request"]
    custom = request["origin"]["custom"]
    result = gate.handler(cf_event, None)
    assert result is request and result["origin"]["custom"] is custom
    assert custom["domainName"] == ORIGINS["eu-west-1"].domain_name
    assert verify_sigv4(result, rpc(TOOLS_CALL)) == "eu-west-1"
    assert header(result, PIN_HEADER) == "eu-west-1"


def test_the_viewer_functions_avoid_list_survives_the_edge_header_strip_and_moves_the_viewer(gate, issuer):
    # Given the viewer function's avoid list (x-mcp-edge-*, set only by the edge) naming JP's nearest region
    result = call(gate, scoped(issuer), headers={"CloudFront-Viewer-Country": "JP", AVOID_HEADER: "ap-northeast-1"})
    # then the gate's strip of edge-owned names keeps it, and the router fails the viewer over
    assert status(result) is None, result
    assert result["origin"]["custom"]["domainName"] != ORIGINS["ap-northeast-1"].domain_name
    assert verify_sigv4(result, rpc(TOOLS_CALL)) != "ap-northeast-1"


def test_an_underscore_spelling_of_the_avoid_list_is_stripped_and_does_not_route(gate, issuer):
    spelled = AVOID_HEADER.replace("-", "_")
    result = call(gate, scoped(issuer), headers={"CloudFront-Viewer-Country": "JP", spelled: "ap-northeast-1"})
    assert result["origin"]["custom"]["domainName"] == ORIGINS["ap-northeast-1"].domain_name
    assert spelled not in result["headers"]


@pytest.mark.parametrize("client", [{"client_id": "client-1"}, {"client_id": None, "azp": "someone-else"},
                                    {"client_id": PROBE_CLIENT_ID + " "}, {"client_id": None}])
def test_a_pin_from_anyone_but_the_probes_client_is_dropped_and_the_viewer_routed_by_country(gate, issuer, client):
    token = scoped(issuer, **client)
    result = call(gate, token, headers={"CloudFront-Viewer-Country": "JP", PIN_HEADER: "eu-west-1"})
    assert status(result) is None, result
    assert result["origin"]["custom"]["domainName"] == ORIGINS["ap-northeast-1"].domain_name
    assert verify_sigv4(result, rpc(TOOLS_CALL)) == "ap-northeast-1"
    assert PIN_HEADER not in result["headers"]


def test_a_pin_on_a_preflight_or_a_refused_request_is_dropped(gate, issuer):
    preflight = gate.handler(event({"CloudFront-Viewer-Country": "JP", PIN_HEADER: "eu-west-1", **PREFLIGHT},
                                   method="OPTIONS"), None)
    assert verify_sigv4(preflight, b"") == "ap-northeast-1" and PIN_HEADER not in preflight["headers"]
    refused(call(gate, None, headers={PIN_HEADER: "eu-west-1"}), 401)


def test_a_probes_pin_is_dropped_too_when_the_stack_names_no_probe_client(issuer, tmp_path):
    unpinned = render(settings(issuer.jwks, probe_client_id=""), tmp_path)
    token = scoped(issuer, client_id=PROBE_CLIENT_ID)
    result = call(unpinned, token, headers={"CloudFront-Viewer-Country": "JP", PIN_HEADER: "eu-west-1"})
    assert verify_sigv4(result, rpc(TOOLS_CALL)) == "ap-northeast-1"


# --- the protected resource metadata and CORS preflight ------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource",
                                  "/.well-known/oauth-protected-resource/mcp"])
def test_the_edge_serves_the_protected_resource_metadata_without_a_token(gate, path):
    result = gate.handler(event(method="GET", uri=path), None)
    assert status(result) == 200
    assert json.loads(result["body"]) == {
        "resource": RESOURCE, "authorization_servers": [ISSUER],
        "scopes_supported": ["admin", "files:read", "mcp", "oncall", "search:read"],
        "bearer_methods_supported": ["header"],
    }


def test_a_cors_preflight_passes_without_a_token_signed_and_without_authorization(gate):
    result = gate.handler(event({**PREFLIGHT, "Authorization": "Bearer not-checked"}, method="OPTIONS"), None)
    assert status(result) is None
    assert verify_sigv4(result, b"") == "us-east-1"
    assert "x-mcp-edge-authorization" not in result["headers"]
    assert "x-mcp-edge-subject" not in result["headers"]


# --- no token, a bad header -------------------------------------------------------------------


def test_no_token_gets_401_with_the_resource_metadata_challenge(gate):
    result = call(gate, None)
    refused(result, 401)
    assert header(result, "www-authenticate") == f'Bearer resource_metadata="{METADATA_URL}"'


@pytest.mark.parametrize("values", [
    ["Bearer a.b.c", "Bearer a.b.c"],  # two Authorization headers
    ["Basic dXNlcjpwYXNz"],
    ["Bearer a.b.c extra"],
    ["Bearer"],
    ["Bearer a.b.c, Bearer a.b.c"],
])
def test_anything_but_one_bearer_token_in_one_header_is_an_invalid_token(gate, issuer, values):
    values = [v.replace("a.b.c", scoped(issuer)) for v in values]
    result = call(gate, None, headers={"Authorization": values})
    refused(result, 401)
    assert header(result, "www-authenticate") == f'Bearer error="invalid_token", resource_metadata="{METADATA_URL}"'


def test_the_bearer_scheme_is_case_insensitive(gate, issuer):
    assert status(call(gate, None, headers={"Authorization": f"bearer {scoped(issuer)}"})) is None


# --- the JWT attacks ----------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header_: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    return f"{b64url(json.dumps(header_).encode())}.{b64url(json.dumps(claims).encode())}.{b64url(signature)}"


def assert_invalid(gate: ModuleType, token: str, reason: str | None = None) -> None:
    result = call(gate, token)
    document = refused(result, 401)
    assert (header(result, "www-authenticate") or "").startswith('Bearer error="invalid_token"')
    if reason is not None:
        assert reason in document["error_description"], document


def test_alg_none_is_refused(gate, issuer):
    assert_invalid(gate, unsigned({"alg": "none", "kid": "rsa-1"}, issuer.claims(scope="mcp search:read")),
                   "not allowed")


def test_hs256_signed_with_the_public_key_is_refused(gate, issuer):
    pem = issuer.rsa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    claims = issuer.claims(scope="mcp search:read")
    token = unsigned({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, claims)
    header_b64, claims_b64, _ = token.split(".")
    import hmac
    signature = hmac.new(pem, f"{header_b64}.{claims_b64}".encode(), hashlib.sha256).digest()
    assert_invalid(gate, f"{header_b64}.{claims_b64}.{b64url(signature)}", "not allowed")


def test_an_allowed_alg_naming_a_key_of_another_type_is_refused(gate, issuer):
    # ES256 with the RSA key's kid: the key is bound to RS256.
    assert_invalid(gate, issuer.token(alg="ES256", kid="rsa-1", scope="mcp search:read"), "key is for RS256")


def test_a_token_signed_with_another_key_is_refused(gate, issuer):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert_invalid(gate, issuer.token(key=other, scope="mcp search:read"), "bad signature")


def test_an_algorithm_outside_the_allow_list_is_refused_before_any_key_lookup(gate, issuer):
    # RS512 is asymmetric but not in this stack's list; the kid is unknown, and no fetch happens.
    assert_invalid(gate, issuer.token(alg="RS512", kid="nobody", scope="mcp"), "not allowed")


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_weak_rsa_and_wrong_curve_keys_are_refused(issuer, tmp_path):
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    p384 = ec.generate_private_key(ec.SECP384R1())
    p384_jwk = public_jwk(p384, "ec-384", "ES384")
    del p384_jwk["alg"]  # a key that states no algorithm: its curve decides
    keys = {"keys": [*issuer.jwks["keys"], public_jwk(weak, "weak", "RS256"), p384_jwk]}
    gate = render(settings(keys), tmp_path)
    assert_invalid(gate, issuer.token(key=weak, kid="weak", scope="mcp search:read"), "1024-bit RSA")
    assert_invalid(gate, es256_on_p384(issuer, p384, "ec-384"), "curve")


def es256_on_p384(issuer: Issuer, key: ec.EllipticCurvePrivateKey, kid: str) -> str:
    """A token whose header says ES256 signed (SHA-256) with a P-384 key: PyJWT will not make one."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    head = b64url(json.dumps({"alg": "ES256", "kid": kid, "typ": "JWT"}).encode())
    signing_input = f"{head}.{b64url(json.dumps(issuer.claims(scope='mcp search:read')).encode())}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing_input}.{b64url(r.to_bytes(48, 'big') + s.to_bytes(48, 'big'))}"


def test_an_ec_token_on_the_right_curve_and_an_eddsa_key_set_entry(issuer, tmp_path):
    ed = ed25519.Ed25519PrivateKey.generate()
    ed_jwk = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(ed.public_key()))
    ed_jwk.update(kid="ed-1", alg="EdDSA", use="sig")
    gate = render(settings({"keys": [*issuer.jwks["keys"], ed_jwk]}, algorithms=("ES256", "EdDSA")), tmp_path)
    assert status(call(gate, issuer.token(alg="ES256", scope="mcp search:read"))) is None
    eddsa = jwt.encode(issuer.claims(scope="mcp search:read"), ed, algorithm="EdDSA", headers={"kid": "ed-1"})
    assert status(call(gate, eddsa)) is None


def test_expiry_and_not_before_apply_with_the_leeway(gate, issuer):
    now = int(time.time())
    assert_invalid(gate, scoped(issuer, exp=now - 60), "expired")
    assert status(call(gate, scoped(issuer, exp=now - 10))) is None  # inside the 30 s leeway
    assert_invalid(gate, scoped(issuer, nbf=now + 120), "not yet valid")
    assert status(call(gate, scoped(issuer, nbf=now + 10))) is None


@pytest.mark.parametrize(("claims", "reason"), [
    ({"exp": "9999999999"}, "exp is not a number"),
    ({"exp": True}, "exp is not a number"),
    ({"nbf": "0"}, "nbf is not a number"),
    ({"iat": [1]}, "iat is not a number"),
    ({"exp": None}, "missing claim exp"),
    ({"iss": "https://evil.example.com"}, "wrong issuer"),
    ({"iss": None}, "missing claim iss"),
    ({"aud": "https://other.example.com/mcp"}, "wrong audience"),
    ({"aud": ["https://other.example.com/mcp"]}, "wrong audience"),
    ({"aud": [AUDIENCE, 5]}, "wrong audience"),
    ({"aud": None}, "missing claim aud"),
])
def test_claims_of_the_wrong_type_or_value_are_refused(gate, issuer, claims, reason):
    assert_invalid(gate, scoped(issuer, **claims), reason)


def rs256(issuer: Issuer, claims: dict[str, Any] | bytes, head: dict[str, Any] | None = None) -> str:
    """An RS256 token signed by the issuer's key over exactly these claims (or these payload
    bytes), under this header (PyJWT will not encode some of the values attacks need, such
    as an array ``iss``, Infinity or the literal ``1e400``)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    payload = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    head_segment = b64url(json.dumps(head or {"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}).encode())
    signing_input = f"{head_segment}.{b64url(payload)}"
    signature = issuer.rsa_key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def test_an_infinite_exp_is_refused(gate, issuer):
    assert_invalid(gate, rs256(issuer, {**issuer.claims(scope="mcp search:read"), "exp": 1e999}),
                   "exp is not a number")


def with_claim(issuer: Issuer, claim: str, literal: str) -> bytes:
    """Valid claims with ``claim`` written as this JSON text (``10**400`` as 401 digits, ``1e400``)."""
    claims = {**issuer.claims(scope="mcp search:read"), claim: "PLACEHOLDER"}
    return json.dumps(claims).replace('"PLACEHOLDER"', literal).encode()


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
@pytest.mark.parametrize("literal", [
    str(10**400), "-" + str(10**400), "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1e308", "2e19",
    "-1", "253402300800", "true", "false", "null", '"1700000000"', "[1700000000]", '{"$date":1}',
])
def test_a_time_claim_that_is_huge_non_finite_or_out_of_range_is_an_invalid_token_not_a_crash(
        gate, issuer, claim, literal):
    # 10**400 raised OverflowError in math.isfinite (a 503 through the local edge).
    token = rs256(issuer, with_claim(issuer, claim, literal))
    result = call(gate, token)
    document = refused(result, 401)
    assert 'error="invalid_token"' in (header(result, "www-authenticate") or "")
    if literal != "null" or claim == "exp":
        assert claim in document["error_description"], document


def test_a_time_claim_at_the_edges_of_its_range_is_read_as_a_date(gate, issuer):
    # the last second of year 9999 is a (far) expiry; 0 is a valid issued-at
    assert status(call(gate, rs256(issuer, with_claim(issuer, "exp", "253402300799")))) is None
    assert status(call(gate, rs256(issuer, with_claim(issuer, "iat", "0")))) is None
    assert status(call(gate, rs256(issuer, with_claim(issuer, "iat", str(int(time.time())) + ".5")))) is None


@pytest.mark.parametrize(("claim", "literal"), [
    ("aud", str(10**400)), ("iss", str(10**400)), ("sub", str(10**400)), ("sub", "1e400"), ("jti", "NaN"),
    ("aud", "[[[[[[[[[[1]]]]]]]]]]"), ("iss", '{"a":{"b":[1e400]}}'), ("sub", '{"x":1}'),
])
def test_huge_or_nested_values_in_other_claims_are_an_invalid_token_not_a_crash(gate, issuer, claim, literal):
    result = call(gate, rs256(issuer, with_claim(issuer, claim, literal)))
    refused(result, 401)


@pytest.mark.parametrize("value", [
    "Bearer " + "a" * 20_000, "Bearer " + "a." * 10_000, "Bearer " + ".".join(["A" * 6000] * 3),
    "Bearer " + b64url(b'{"alg":"RS256","kid":"rsa-1"}') + "." + b64url(b"[" * 50_000) + ".AAAA",
    "Bearer " + b64url(b'{"alg":"RS256","kid":"rsa-1"}') + "." + b64url(b'{"exp":' + b"9" * 5000 + b"}") + ".AAAA",
    "Bearer " + b64url(b"[" * 50_000) + ".e30.AAAA", "Bearer " + b64url(b'{"alg":"RS256","kid":"rsa-1"}') + "..",
])
def test_huge_or_deep_token_values_are_an_invalid_token_not_a_crash(gate, value):
    result = gate.handler(event({"Authorization": value}, body=rpc(TOOLS_CALL)), None)
    refused(result, 401)


@pytest.mark.parametrize("head", [
    {"alg": 10**400, "kid": "rsa-1"}, {"alg": ["RS256"], "kid": "rsa-1"}, {"alg": {"a": [1e400]}, "kid": "rsa-1"},
    {"alg": "RS256", "kid": 10**400}, {"alg": "RS256", "kid": ["rsa-1"]}, {"alg": "RS256", "kid": "rsa-1\u0000"},
    {"alg": "RS256", "kid": "x" * 6000}, {"alg": "RS256", "kid": "rsa-1", "crit": ["exp"]},
    {"alg": "RS256", "kid": "rsa-1", "b64": False, "crit": ["b64"]},
])
def test_odd_token_headers_are_an_invalid_token_not_a_crash(gate, issuer, head):
    result = call(gate, rs256(issuer, issuer.claims(scope="mcp search:read"), head))
    assert status(result) in (401, 503), result  # 503 only for an unknown kid while the key set is unreachable


def test_an_issuer_array_is_refused(gate, issuer):
    assert_invalid(gate, rs256(issuer, {**issuer.claims(scope="mcp search:read"), "iss": [ISSUER]}), "issuer")


def test_an_audience_array_holding_ours_is_accepted(gate, issuer):
    assert status(call(gate, scoped(issuer, aud=["https://other.example.com", AUDIENCE]))) is None


def test_a_malformed_token_is_an_invalid_token(gate):
    assert_invalid(gate, "not.a.jwt", "malformed")


# --- the key set ----------------------------------------------------------------------------------


def test_an_unknown_kid_fetches_the_key_set_once_and_a_rotated_key_works(issuer, tmp_path):
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with JwksServer([*issuer.jwks["keys"], public_jwk(rotated, "rsa-2", "RS256")]) as jwks:
        gate = render(settings(issuer.jwks, jwks.url), tmp_path)
        assert status(call(gate, scoped(issuer))) is None
        assert jwks.fetches == []  # the embedded set was enough
        assert status(call(gate, issuer.token(key=rotated, kid="rsa-2", scope="mcp search:read"))) is None
        assert len(jwks.fetches) == 1


def test_a_flood_of_made_up_kids_fetches_at_most_once_per_cooldown(issuer, tmp_path):
    with JwksServer(issuer.jwks["keys"]) as jwks:
        gate = render(settings(issuer.jwks, jwks.url), tmp_path)
        for i in range(50):
            assert_invalid(gate, issuer.token(kid=f"made-up-{i}", scope="mcp"), "unknown kid")
        assert len(jwks.fetches) == 1
        assert status(call(gate, scoped(issuer))) is None  # real tokens are unaffected


def test_a_key_set_that_cannot_be_fetched_gives_503_with_retry_after_then_backs_off(issuer, tmp_path):
    with JwksServer([]) as jwks:
        jwks.document = {"keys": "not a list"}  # the issuer answers, but no key set
        gate = render(settings(issuer.jwks, jwks.url), tmp_path)
        result = call(gate, issuer.token(kid="rotated", scope="mcp"))
        refused(result, 503)
        assert int(header(result, "retry-after") or 0) >= 1
        for _ in range(20):  # during the backoff: no fetch, still 503
            refused(call(gate, issuer.token(kid="rotated", scope="mcp")), 503)
        assert len(jwks.fetches) == 1
        assert status(call(gate, scoped(issuer))) is None  # keys in hand still verify


def test_an_unreachable_key_set_with_nothing_embedded_gives_503_not_500(issuer, tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gate = render(settings({"keys": []}, f"http://127.0.0.1:{port}/jwks.json"), tmp_path)
    result = call(gate, scoped(issuer))
    refused(result, 503)
    assert header(result, "retry-after") == "1"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A URL whose server accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/jwks.json"
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    server.close()


def test_a_key_set_fetch_is_bounded_in_wall_clock_time(issuer, tmp_path, silent_server):
    gate = render(settings(issuer.jwks, silent_server, jwks_fetch_timeout_s=0.3), tmp_path)
    started = time.monotonic()
    refused(call(gate, issuer.token(kid="rotated", scope="mcp")), 503)
    assert time.monotonic() - started < 1.5


# --- scopes and step-up, in both eras -----------------------------------------------------------------


def test_a_scoped_tool_without_its_scope_gets_403_naming_every_scope_needed(gate, issuer):
    result = call(gate, issuer.token(scope="mcp"))
    document = refused(result, 403)
    assert header(result, "www-authenticate") == (
        f'Bearer error="insufficient_scope", scope="mcp search:read", resource_metadata="{METADATA_URL}"')
    assert document["scope"] == "mcp search:read"


def test_step_up_a_token_with_the_scope_is_forwarded(gate, issuer):
    assert status(call(gate, issuer.token(scope="mcp"))) == 403
    assert status(call(gate, issuer.token(scope="mcp search:read"))) is None


def test_the_base_scope_is_needed_by_every_request(gate, issuer):
    result = call(gate, issuer.token(scope="search:read"), body=LIST_TOOLS)
    refused(result, 403)
    assert 'scope="mcp"' in (header(result, "www-authenticate") or "")
    assert status(call(gate, issuer.token(scope="mcp"), body=LIST_TOOLS)) is None


def test_scopes_may_come_as_an_scp_list(gate, issuer):
    assert status(call(gate, issuer.token(scope=None, scp=["mcp", "search:read"]))) is None


def test_an_unscoped_tool_needs_only_the_base_scopes(gate, issuer):
    body = {**TOOLS_CALL, "params": {"name": "echo", "arguments": {}}}
    assert status(call(gate, issuer.token(scope="mcp"), body=body)) is None


@pytest.mark.parametrize(("body", "needed"), [
    ({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "file:///secret.txt"}},
     "files:read mcp"),
    ({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "incident"}}, "mcp oncall"),
])
def test_resources_and_prompts_are_scoped_when_configured(gate, issuer, body, needed):
    result = call(gate, issuer.token(scope="mcp"), body=body)
    assert refused(result, 403)["scope"] == needed
    assert status(call(gate, issuer.token(scope=needed), body=body)) is None


NEW_ERA = {"MCP-Protocol-Version": "2026-07-28"}


def test_2026_requests_with_matching_headers_pass_and_values_are_trimmed(gate, issuer):
    headers = {**NEW_ERA, "Mcp-Method": " tools/call\t", "Mcp-Name": "  search "}
    assert status(call(gate, scoped(issuer), headers=headers)) is None


def test_every_header_value_the_gate_reads_is_trimmed_of_spaces_and_tabs(gate, issuer):
    headers = {"Authorization": f"\t Bearer {scoped(issuer)} \t", "MCP-Protocol-Version": "\t2026-07-28\t",
               "Mcp-Method": "tools/call\t", "Mcp-Name": "\tsearch", "Content-Type": "\tapplication/json\t",
               "Content-Encoding": " identity\t"}
    assert status(call(gate, None, headers=headers)) is None
    # Only SP and HTAB are optional whitespace (RFC 9110 5.5): anything else is part of the value.
    for name, value in {"Mcp-Method": "tools/call\x0b", "Content-Type": "application/json\x0c"}.items():
        result = call(gate, scoped(issuer), headers={**headers, "Authorization": f"Bearer {scoped(issuer)}",
                                                     name: value})
        assert status(result) in (400, 415), (name, result)


def test_a_header_naming_a_free_tool_cannot_cover_a_scoped_call_in_the_body(gate, issuer):
    headers = {**NEW_ERA, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    document = refused(call(gate, issuer.token(scope="mcp"), headers=headers), 400)
    assert document["error"]["code"] == -32020 and document["id"] == 7


@pytest.mark.parametrize("headers", [
    {"Mcp-Method": "tools/list", "Mcp-Name": "search"},
    {"Mcp-Method": "tools/call", "Mcp-Name": "delete_all"},
    {"Mcp-Method": "tools/call"},  # 2026-07-28 tools/call without Mcp-Name
    {"Mcp-Name": "search"},  # without Mcp-Method
    {"Mcp-Method": ["tools/call", "tools/call"], "Mcp-Name": "search"},
])
def test_mismatched_or_missing_mcp_headers_in_the_2026_era_get_400(gate, issuer, headers):
    document = refused(call(gate, scoped(issuer), headers={**NEW_ERA, **headers}), 400)
    assert document["jsonrpc"] == "2.0" and document["error"]["code"] == -32020


def test_handshake_era_requests_without_headers_are_decided_by_the_body(gate, issuer):
    assert status(call(gate, scoped(issuer), headers={"MCP-Protocol-Version": "2025-11-25"})) is None
    refused(call(gate, issuer.token(scope="mcp"), headers={"MCP-Protocol-Version": "2025-11-25"}), 403)


def test_headers_sent_in_the_handshake_era_are_still_checked(gate, issuer):
    refused(call(gate, scoped(issuer), headers={"Mcp-Name": "echo"}), 400)


def test_a_base64_encoded_mcp_name_is_decoded_before_the_comparison(gate, issuer):
    name = "café"
    body = {**TOOLS_CALL, "params": {"name": name, "arguments": {}}}
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    headers = {**NEW_ERA, "Mcp-Method": "tools/call", "Mcp-Name": encoded}
    assert status(call(gate, issuer.token(scope="mcp"), body=body, headers=headers)) is None


def test_a_batch_needs_the_scopes_of_every_call_in_it(gate, issuer):
    free = {**TOOLS_CALL, "id": 1, "params": {"name": "echo", "arguments": {}}}
    admin = {**TOOLS_CALL, "id": 2, "params": {"name": "delete_all", "arguments": {}}}
    result = call(gate, issuer.token(scope="mcp search:read"), body=[free, admin])
    assert refused(result, 403)["scope"] == "admin mcp search:read"
    assert status(call(gate, issuer.token(scope="admin mcp search:read"), body=[free, admin])) is None


@pytest.mark.parametrize("version", [None, "2025-03-26", " 2025-03-26\t"])
def test_a_batch_of_2025_03_26_or_no_version_passes_with_the_scopes_of_every_call(gate, issuer, version):
    headers = {} if version is None else {"MCP-Protocol-Version": version}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    search = {**TOOLS_CALL, "id": 2}
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    body = [listing, search, notification]
    result = call(gate, scoped(issuer), body=body, headers=headers)
    assert status(result) is None, result
    assert verify_sigv4(result, rpc(body)) == "us-east-1"
    document = refused(call(gate, issuer.token(scope="mcp"), body=body, headers=headers), 403)
    assert document["error"] == "insufficient_scope" and document["scope"] == "mcp search:read"


def test_a_batch_holding_one_call_the_token_lacks_scope_for_gets_insufficient_scope(gate, issuer):
    body = [{**TOOLS_CALL, "id": 1, "params": {"name": "echo", "arguments": {}}},
            {**TOOLS_CALL, "id": 2, "params": {"name": "delete_all", "arguments": {}}}]
    result = call(gate, scoped(issuer), body=body, headers={"MCP-Protocol-Version": "2025-03-26"})
    assert refused(result, 403)["error"] == "insufficient_scope"
    assert 'error="insufficient_scope"' in (header(result, "www-authenticate") or "")


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_a_batch_of_a_later_revision_is_refused_with_a_jsonrpc_error(gate, issuer, version):
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    document = refused(call(gate, scoped(issuer), body=[listing], headers={"MCP-Protocol-Version": version}), 400)
    assert document["jsonrpc"] == "2.0" and document["id"] is None
    assert document["error"]["code"] == -32600 and version in document["error"]["message"]
    # One message of the same revision passes.
    assert status(call(gate, scoped(issuer), body=listing, headers={"MCP-Protocol-Version": "2025-06-18"})) is None


def test_a_batch_cannot_carry_headers_that_match_only_one_of_its_calls(gate, issuer):
    free = {**TOOLS_CALL, "id": 1, "params": {"name": "echo", "arguments": {}}}
    headers = {**NEW_ERA, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    refused(call(gate, issuer.token(scope="admin mcp search:read"), body=[free, TOOLS_CALL], headers=headers), 400)


@pytest.mark.parametrize(("raw", "code"), [
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"search"}}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"search"}}', -32600),
    (b"\xef\xbb\xbf" + json.dumps(TOOLS_CALL).encode(), -32700),
    (b"{not json", -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","x":NaN}}', -32700),
    (json.dumps(TOOLS_CALL).encode("utf-16"), -32700),
    (b"[]", -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}', -32602),
])
def test_bodies_another_parser_could_read_differently_are_refused(gate, issuer, raw, code):
    document = refused(call(gate, scoped(issuer, scope="admin mcp search:read"), body=raw), 400)
    assert document["error"]["code"] in (code, -32700)


# --- the body: UTF-8 JSON only ---------------------------------------------------------------------------

DELETE_ALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "delete_all", "arguments": {}}}


def assert_unsupported_media_type(result: dict[str, Any]) -> dict[str, Any]:
    """415, marked as the edge's own answer, with a JSON-RPC error naming what is accepted."""
    document = refused(result, 415)
    assert header(result, "x-mcp-edge-refusal") == "unsupported-media-type"
    assert document["jsonrpc"] == "2.0" and document["error"]["code"] == -32600
    assert "application/json in UTF-8" in document["error"]["message"], document
    return document


def test_a_utf7_body_spelling_a_scoped_tool_is_refused_before_its_name_is_read(gate, issuer):
    # The attack: "+AGQ-elete_all" is delete_all to a UTF-7 decoder (the origin's), "+AGQ-..." to the gate.
    raw = rpc(DELETE_ALL).replace(b'"delete_all"', b'"+AGQ-elete_all"')
    assert raw.decode("utf-7") == rpc(DELETE_ALL).decode()
    for scope in ("mcp search:read", "admin mcp search:read"):  # whatever the token holds
        result = call(gate, issuer.token(scope=scope), body=raw,
                      headers={"Content-Type": "application/json; charset=utf-7"})
        document = assert_unsupported_media_type(result)
        assert "utf-7" in document["error"]["message"]


@pytest.mark.parametrize("content_type", [
    "application/json; charset=utf-7", "application/json;charset=UTF-7", 'application/json; charset="utf-7"',
    "application/json; charset=utf-16", "application/json; charset=UTF-16LE", "application/json; charset=utf-32",
    "application/json; charset=iso-8859-1", "application/json; charset=latin1", "application/json; charset=utf8",
    'application/json; charset="utf-8 "', "application/json; charset=utf-8; charset=utf-7",
    "application/json; charset=utf-8; charset=utf-8", 'application/json; charset="utf\\-7"',
    "application/json; charset = utf-8", "application/json; foo=bar", "application/json, text/plain",
    "text/plain", "text/json", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    "application/jsonx", "application/vnd.api+json", "application/json-seq", "application/*", "*/*", "", "json",
])
def test_a_body_not_declared_as_utf8_json_gets_415_naming_what_is_accepted(gate, issuer, content_type):
    result = call(gate, scoped(issuer), headers={"Content-Type": content_type})
    assert_unsupported_media_type(result)


def test_a_body_without_a_content_type_or_with_two_is_refused(gate, issuer):
    assert_unsupported_media_type(call(gate, scoped(issuer), headers={"Content-Type": []}))
    two = ["application/json", "application/json; charset=utf-7"]
    assert_unsupported_media_type(call(gate, scoped(issuer), headers={"Content-Type": two}))
    assert_unsupported_media_type(call(gate, scoped(issuer), headers={"Content-Type": ["application/json"] * 2}))


@pytest.mark.parametrize("coding", ["gzip", "GZIP", "x-gzip", "deflate", "br", "zstd", "compress", "identity, gzip",
                                    "gzip, identity", "aes128gcm", "unknown"])
def test_a_content_encoding_the_edge_does_not_decode_gets_415_with_accept_encoding(gate, issuer, coding):
    import gzip

    result = call(gate, scoped(issuer), body=gzip.compress(rpc(TOOLS_CALL)), headers={"Content-Encoding": coding})
    document = assert_unsupported_media_type(result)
    assert "Content-Encoding" in document["error"]["message"]
    assert header(result, "accept-encoding") == "identity"


@pytest.mark.parametrize("content_type", [
    "application/json", "Application/JSON", "APPLICATION/JSON; CHARSET=UTF-8", "application/json;charset=utf-8",
    'application/json; charset="utf-8"', 'application/json; charset="UTF-\\8"', "application/json \t;\tcharset=Utf-8",
    " application/json ", "application/json;", "application/json; ; charset=utf-8",
])
def test_every_spelling_of_utf8_json_is_forwarded(gate, issuer, content_type):
    body = rpc(TOOLS_CALL)
    result = call(gate, scoped(issuer), body=body, headers={"Content-Type": content_type})
    assert status(result) is None, result
    verify_sigv4(result, body)


def test_identity_coding_and_a_body_less_request_pass_the_media_type_check(gate, issuer):
    assert status(call(gate, scoped(issuer), headers={"Content-Encoding": "identity"})) is None
    # No body, nothing to decode: a type that would be refused with a body does not matter.
    result = call(gate, scoped(issuer), body=None, headers={"Content-Type": "text/plain"})
    assert status(result) is None, result


# --- the body -----------------------------------------------------------------------------------------


def test_a_truncated_body_gets_413_with_a_jsonrpc_error_and_is_not_forwarded(gate, issuer):
    result = call(gate, scoped(issuer), body=rpc(TOOLS_CALL), truncated=True)
    document = refused(result, 413)
    assert document["jsonrpc"] == "2.0" and "error" in document


def test_a_body_over_one_megabyte_gets_413(gate, issuer):
    big = {**TOOLS_CALL, "params": {"name": "search", "arguments": {"q": "x" * (1024 * 1024)}}}
    refused(call(gate, scoped(issuer), body=big), 413)


# --- what the origin gets ---------------------------------------------------------------------------


def test_the_token_moves_to_the_side_header_and_the_identity_headers_are_the_edges(gate, issuer):
    token = scoped(issuer, sub="user-42", client_id="app-7")
    forged = {"x-mcp-edge-subject": "admin", "x-mcp-edge-client-id": "trusted", "x-mcp-edge-scopes": "admin",
              "x-mcp-edge-authorization": "Bearer forged", "X-Amz-Security-Token": "viewer",
              "X-Amz-Date": "20200101T000000Z"}
    result = call(gate, token, headers=forged)
    assert status(result) is None
    assert header(result, "x-mcp-edge-authorization") == f"Bearer {token}"
    assert header(result, "x-mcp-edge-subject") == "user-42"
    assert header(result, "x-mcp-edge-client-id") == "app-7"
    assert header(result, "x-mcp-edge-scopes") == "mcp search:read"
    assert header(result, "x-amz-security-token") == CREDENTIALS["AWS_SESSION_TOKEN"]
    assert all(len(result["headers"][name]) == 1 for name in result["headers"])
    assert (header(result, "authorization") or "").startswith("AWS4-HMAC-SHA256 ")


@pytest.mark.parametrize("name", [
    "x_mcp_edge_subject", "x_mcp_edge_authorization", "x_mcp_edge_client_id", "x_mcp_edge_scopes",
    "x-mcp-edge_subject", "X_MCP_EDGE_SUBJECT", "x_Mcp-Edge_Scopes", "x_mcp_edge_region", "x-mcp-edge-refusal",
    "x_mcp_edge_refusal", "x-mcp-edge-anything-new", "x_mcp_edge_served_region", "x_amz_security_token",
    "x_amz_date", "X_Amz_Content_Sha256", "x-amz-anything", "x_amz_",
])
def test_viewer_headers_a_server_could_read_as_the_edges_are_removed_before_signing(gate, issuer, name):
    # CGI-style servers (WSGI, PHP, Rack) read x_mcp_edge_subject as HTTP_X_MCP_EDGE_SUBJECT: the edge's.
    result = call(gate, scoped(issuer, sub="user-42"), headers={name: "admin"})
    assert status(result) is None, result
    canonical = name.lower().replace("_", "-")
    assert all(n.replace("_", "-") != canonical or header(result, n) != "admin" for n in result["headers"])
    assert not [n for n in result["headers"] if "_" in n], result["headers"]
    assert header(result, "x-mcp-edge-subject") == "user-42"
    verify_sigv4(result, rpc(TOOLS_CALL))


def test_headers_that_only_look_alike_are_kept(gate, issuer):
    kept = {"x-mcp-edgesubject": "a", "x_mcp_edg_subject": "b", "mcp-edge-subject": "c", "x-amzn-trace-id": "d",
            "x-mcp-session": "e"}
    result = call(gate, scoped(issuer), headers=kept)
    assert status(result) is None
    assert {name: header(result, name) for name in kept} == kept


def test_identity_values_that_are_not_printable_ascii_are_percent_encoded(gate, issuer):
    result = call(gate, scoped(issuer, sub="évil\r\nx-mcp-edge-scopes: admin", client_id=None, azp=" app "))
    assert header(result, "x-mcp-edge-subject") == "%C3%A9vil%0D%0Ax-mcp-edge-scopes: admin"
    assert header(result, "x-mcp-edge-client-id") == "%20app%20"


def test_a_refused_request_carries_no_identity(gate, issuer):
    result = call(gate, issuer.token(scope="mcp"), headers={"x-mcp-edge-subject": "admin"})
    assert status(result) == 403
    assert "x-mcp-edge-subject" not in result["headers"]


# --- the SigV4 signature --------------------------------------------------------------------------------


@pytest.mark.parametrize(("country", "region"), [("JP", "ap-northeast-1"), ("DE", "eu-west-1"), ("US", "us-east-1")])
def test_the_signature_verifies_with_botocore_for_the_chosen_region(gate, issuer, country, region):
    body = rpc(TOOLS_CALL)
    result = call(gate, scoped(issuer), body=body, headers={"CloudFront-Viewer-Country": country})
    assert verify_sigv4(result, body) == region


def test_the_payload_hash_is_of_the_decoded_body_bytes(gate, issuer):
    body = json.dumps({**TOOLS_CALL, "params": {"name": "search", "arguments": {"q": "naïve ☃"}}},
                      ensure_ascii=False).encode()
    result = call(gate, scoped(issuer), body=body)
    assert header(result, "x-amz-content-sha256") == hashlib.sha256(body).hexdigest()
    verify_sigv4(result, body)


def test_a_get_stream_without_body_is_signed_where_the_server_streams_on_get(issuer, tmp_path):
    streaming = render(settings(issuer.jwks, get_stream=True), tmp_path)
    result = call(streaming, scoped(issuer), body=None, method="GET")
    assert status(result) is None
    assert header(result, "x-amz-content-sha256") == hashlib.sha256(b"").hexdigest()
    verify_sigv4(result, b"")


def test_a_changed_body_does_not_verify(gate, issuer):
    body = rpc(TOOLS_CALL)
    result = call(gate, scoped(issuer), body=body)
    with pytest.raises(AssertionError):
        verify_sigv4(result, body + b" ")


def test_without_credentials_the_edge_answers_502_not_500(gate, issuer, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    refused(call(gate, scoped(issuer)), 502)


# --- rendering ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("overrides", "field"), [
    ({"algorithms": ("HS256",)}, "algorithms"),
    ({"algorithms": ("none",)}, "algorithms"),
    ({"audiences": ()}, "audiences"),
    ({"jwks_url": "http://issuer.example.com/jwks"}, "jwks_url"),
    ({"resource": "ftp://x"}, "resource"),
    ({"leeway_s": 900}, "leeway_s"),
    ({"tool_scopes": {"t": ("bad scope",)}}, "tools/call"),
    ({"base_scopes": ('q"uote',)}, "base_scopes"),
    ({"subject_header": "x-amz-subject"}, "header name"),
    ({"scopes_header": "x-mcp-edge-authorization"}, "must differ"),
    ({"jwks": {"keys": [{"kty": "RSA"}]}}, "jwks: key 0"),
    ({"jwks_fetch_timeout_s": 10}, "jwks_fetch_timeout_s"),
])
def test_bad_settings_fail_the_render_naming_the_field(issuer, overrides, field):
    from edge.gate_package import gate_config

    with pytest.raises(ValueError, match=field):
        fields = dict(overrides)
        gate_config(settings(fields.pop("jwks", issuer.jwks), **fields))


def test_the_rendered_package_holds_the_router_the_gate_and_its_constants(issuer):
    from edge.gate_package import GATE_HANDLER, edge_gate_package
    from tests.edge.gate_harness import DEFAULT_REGION

    package = edge_gate_package(ORIGINS, DEFAULT_REGION, gate=settings(issuer.jwks))
    assert sorted(package.files) == ["edge_gate/__init__.py", "edge_gate/constants.py", "edge_gate/handler.py",
                                     "edge_gate/mcp_request.py", "edge_gate/paths.py", "edge_gate/rate_counting.py",
                                     "edge_gate/signing.py", "edge_gate/telemetry.py",
                                     "edge_gate/tokens.py",
                                     "geo_router.py"]
    assert package.handler == GATE_HANDLER == "edge_gate.handler.handler"
    constants = package.files["edge_gate/constants.py"]
    assert "rendered by edge/gate_package.py" in constants and "os.environ" not in constants
    requirements = package.requirements.read_text()
    for name in ("PyJWT==", "cryptography==", "cffi==", "awscrt=="):
        assert name in requirements
    assert Path(package.requirements).is_file()


# --- what the program ships ---------------------------------------------------------------


def test_the_programs_gate_lets_only_the_stacks_probe_client_pin_a_region(prod, issuer, tmp_path):
    import zipfile

    from devkit.shipped import router_zip
    from local.plan import gate_settings_of, shipped_gate_config
    from stack_config.loading import load_from_stack_file

    with zipfile.ZipFile(router_zip(prod)) as zf:
        shipped = shipped_gate_config(zf.read("edge_gate/constants.py").decode())
    probe_client = load_from_stack_file("prod").auth.probe_client_id
    assert shipped["probe_client_id"] == probe_client
    # The shipped settings with this test's issuer: the probe client's token pins, another's does not.
    gate_ = render(gate_settings_of(shipped, issuer=ISSUER, audiences=(AUDIENCE,), jwks=issuer.jwks,
                                    mcp_path="/mcp", base_scopes=(), tool_scopes={}), tmp_path)
    headers = {"CloudFront-Viewer-Country": "JP", PIN_HEADER: "eu-west-1"}
    pinned = call(gate_, issuer.token(client_id=probe_client), headers=headers)
    assert verify_sigv4(pinned, rpc(TOOLS_CALL)) == "eu-west-1"
    unpinned = call(gate_, issuer.token(client_id="client-1"), headers=headers)
    assert verify_sigv4(unpinned, rpc(TOOLS_CALL)) == "ap-northeast-1"


def test_the_program_maps_mcp_path_onto_the_servers_path_for_the_gate_probes_and_local_edge(tmp_path):
    from local.plan import Options, build_plan
    from tests.components.test_edge import gate_config_of
    from tests.harness import run_program

    server = {**yaml.safe_load((Path(__file__).parents[2] / "Pulumi.prod.yaml").read_text())["config"]["mcp-edge:server"], "path": "/api/mcp"}
    run = run_program("prod", config_overrides={"server": server})  # mcpPath stays /mcp
    gate_ = gate_config_of(run)
    assert gate_["routes"]["/mcp"]["origin_path"] == "/api/mcp" and "/api/mcp" not in gate_["routes"]
    assert gate_["resource_metadata"]["resource"].endswith("/mcp")
    topology = run.outputs["topology"]
    assert (topology["mcpPath"], topology["serverPath"]) == ("/mcp", "/api/mcp")
    plan = build_plan(Options(edge_port=9000, base_port=9001, run_dir=tmp_path / "run"), run=run)
    assert plan.mcp_url.endswith(":9000/mcp")
    for fn in (f for f in plan.functions if f.handler == "probe.handler.handler"):
        endpoints = {(s.payload["target"], s.payload["targetRegion"]): s.payload["endpoint"] for s in fn.schedules}
        for region in plan.regions:
            # The edge on its public path; each Function URL directly, on the server's own path.
            assert endpoints[("edge", region)] == plan.mcp_url
            assert endpoints[("origin", region)] == f"http://127.0.0.1:{plan.ports.function_urls[region]}/api/mcp"
    # The adapter polls the server's own path for readiness.
    assert {o.readiness_path for o in plan.origins} == {"/api/mcp"}


# --- only MCP: paths, methods, preflights, query strings, and the edge's refusal mark ---------------


def refusal(result: dict[str, Any], code: int, reason: str) -> dict[str, Any]:
    """A refusal the edge made itself: its status, a JSON body and the refusal mark."""
    document = refused(result, code)
    assert header(result, REFUSAL_HEADER) == reason, result["headers"]
    return document


def not_forwarded(result: dict[str, Any]) -> None:
    assert status(result) is not None and "origin" not in result, result


# Spellings of other paths, and of the MCP path that a server might normalise to it: none is it.
OTHER_PATHS = ["/", "/other", "//mcp", "/./mcp", "/x/../mcp", "/MCP", "/Mcp", "/mcp/", "/mcp/x", "/%6Dcp",
               "/%2Fmcp", "/mcp%2F", "/mcp;a=b", "/mcp/.", "/mcp//", "/.well-known/oauth-protected-resource/x",
               "/.well-known/../mcp", "/mcp\x00", "/mc%70"]


@pytest.mark.parametrize("uri", OTHER_PATHS)
@pytest.mark.parametrize("method", ["POST", "GET"])
def test_only_the_mcp_path_byte_for_byte_is_forwarded_any_other_gets_404(gate, issuer, uri, method):
    result = call(gate, scoped(issuer), uri=uri, method=method)
    document = refusal(result, 404, "not-found")
    assert document["jsonrpc"] == "2.0" and "/mcp" in document["error"]["message"]
    not_forwarded(result)


@given(st.text(alphabet="/.%mcpMCP2Fx~-_;", max_size=12).map(lambda tail: "/" + tail),
       st.sampled_from(["POST", "GET", "OPTIONS", "DELETE"]))
def test_no_spelling_is_routed_but_the_paths_themselves_byte_for_byte(gate, uri, method):
    headers = {"origin": [{"value": ALLOWED_ORIGIN}], "access-control-request-method": [{"value": "POST"}]}
    try:
        kind = gate.paths.route(method, uri, "", headers, gate.ROUTES)
    except gate.paths.RefusedError as exc:
        kind = exc.status
    if uri == "/mcp":
        assert kind == {"POST": "mcp", "OPTIONS": "preflight"}.get(method, 405)
    elif uri == READINESS_PATH:
        assert kind == ("readiness" if method == "GET" else 405)
    else:
        assert kind == 404


def test_another_path_gets_404_before_any_token_is_looked_at(gate):
    # No token, a malformed one: the path decides first (no verification for what is never forwarded).
    for token in (None, "not.a.jwt"):
        refusal(call(gate, token, uri="/other"), 404, "not-found")


def test_the_readiness_path_is_forwarded_for_the_probes_client_alone(gate, issuer):
    probe = call(gate, scoped(issuer, client_id=PROBE_CLIENT_ID), body=None, method="GET", uri=READINESS_PATH)
    assert status(probe) is None, probe
    verify_sigv4(probe, b"")
    refusal(call(gate, scoped(issuer), body=None, method="GET", uri=READINESS_PATH), 404, "not-found")
    refusal(call(gate, None, body=None, method="GET", uri=READINESS_PATH), 401, "no-token")
    # The probes' client, with another method or a query string: refused too.
    refusal(call(gate, scoped(issuer, client_id=PROBE_CLIENT_ID), uri=READINESS_PATH), 405, "method-not-allowed")
    refusal(call(gate, scoped(issuer, client_id=PROBE_CLIENT_ID), body=None, method="GET", uri=READINESS_PATH,
                 querystring="full=1"), 400, "bad-request")


def test_without_a_readiness_path_of_its_own_the_probes_client_gets_404_there_too(issuer, tmp_path):
    plain = render(settings(issuer.jwks, readiness_path=""), tmp_path)
    token = scoped(issuer, client_id=PROBE_CLIENT_ID)
    refusal(call(plain, token, body=None, method="GET", uri=READINESS_PATH), 404, "not-found")
    assert status(call(plain, token)) is None


def test_a_readiness_path_equal_to_the_mcp_path_adds_nothing(issuer):
    from edge.gate_package import gate_config

    assert gate_config(settings(issuer.jwks, readiness_path="/mcp"))["routes"] == {
        "/mcp": {"kind": "mcp", "get_stream": False, "origin_path": "/mcp"}}


# --- the public path maps onto the server's own path ------------------------------------------------

WELL_KNOWN = "/.well-known/oauth-protected-resource"
SERVER_PATH = "/api/mcp"  # the server's own MCP path (e.g. an Express app's), mcpPath left at /mcp


@pytest.fixture(scope="module")
def mapped(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The gate of a stack whose server serves MCP on /api/mcp while viewers call /mcp."""
    return render(settings(issuer.jwks, origin_path=SERVER_PATH), tmp_path_factory.mktemp("mapped"))


def test_the_public_path_is_rewritten_to_the_servers_path_before_signing(mapped, issuer):
    result = call(mapped, scoped(issuer), headers={"CloudFront-Viewer-Country": "JP"})
    assert status(result) is None, result
    assert result["uri"] == SERVER_PATH
    # botocore signs the URI the origin receives: the signature covers /api/mcp, not /mcp.
    assert verify_sigv4(result, rpc(TOOLS_CALL)) == "ap-northeast-1"
    with pytest.raises(AssertionError, match="signature differs"):
        verify_sigv4({**result, "uri": "/mcp"}, rpc(TOOLS_CALL))


def test_a_preflight_of_the_public_path_reaches_the_servers_path_signed(mapped):
    result = mapped.handler(event({"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST"},
                                  method="OPTIONS"), None)
    assert status(result) is None and result["uri"] == SERVER_PATH, result
    verify_sigv4(result, b"")


@pytest.mark.parametrize("uri", [SERVER_PATH, "/api/mcp/", "/api//mcp", "/api/./mcp", "/API/mcp"])
def test_the_servers_own_path_is_not_a_public_path(mapped, issuer, uri):
    # Only the public path is routed: the origin's path (in any spelling) is no way around the map.
    result = call(mapped, scoped(issuer), uri=uri)
    refusal(result, 404, "not-found")
    not_forwarded(result)


def test_the_metadata_names_the_public_path_not_the_servers(mapped):
    document = json.loads(mapped.handler(event(method="GET", uri=WELL_KNOWN + "/mcp"), None)["body"])
    assert document["resource"] == RESOURCE
    refusal(mapped.handler(event(method="GET", uri=WELL_KNOWN + SERVER_PATH), None), 404, "not-found")
    challenge = header(call(mapped, None), "www-authenticate") or ""
    assert METADATA_URL in challenge and SERVER_PATH not in challenge


def test_the_readiness_path_is_forwarded_as_it_is(mapped, issuer):
    probe = call(mapped, scoped(issuer, client_id=PROBE_CLIENT_ID), body=None, method="GET", uri=READINESS_PATH)
    assert status(probe) is None and probe["uri"] == READINESS_PATH, probe
    verify_sigv4(probe, b"")


@given(st.text(alphabet="/.%apimcAPIMC2Fx-", max_size=12).map(lambda tail: "/" + tail))
def test_whatever_the_viewer_sends_an_origin_sees_only_a_configured_origin_path(mapped, issuer, uri):
    token = scoped(issuer, client_id=PROBE_CLIENT_ID)
    for method in ("POST", "GET"):
        result = call(mapped, token, uri=uri, method=method, body=TOOLS_CALL if method == "POST" else None)
        if status(result) is None:
            assert (uri, result["uri"]) in {("/mcp", SERVER_PATH), (READINESS_PATH, READINESS_PATH)}, (uri, method)


def test_a_readiness_path_equal_to_the_servers_own_path_does_not_make_it_public(issuer, tmp_path):
    from edge.gate_package import gate_config

    config = gate_config(settings(issuer.jwks, origin_path=SERVER_PATH, readiness_path=SERVER_PATH))
    assert list(config["routes"]) == ["/mcp"]
    gate_ = render(settings(issuer.jwks, origin_path=SERVER_PATH, readiness_path=SERVER_PATH), tmp_path)
    probe = scoped(issuer, client_id=PROBE_CLIENT_ID)
    refusal(call(gate_, probe, body=None, method="GET", uri=SERVER_PATH), 404, "not-found")


def test_the_local_edge_reads_the_map_back_from_the_shipped_config(issuer):
    from edge.gate_package import gate_config
    from local.plan import gate_settings_of

    config = gate_config(settings(issuer.jwks, origin_path=SERVER_PATH, get_stream=True))
    assert gate_config(gate_settings_of(config)) == config
    assert gate_settings_of(config).origin_path == SERVER_PATH


@pytest.mark.parametrize("headers", [
    {},  # no CORS at all
    {"Origin": ALLOWED_ORIGIN},  # no Access-Control-Request-Method
    {"Access-Control-Request-Method": "POST"},  # no Origin
    {"Origin": [ALLOWED_ORIGIN, ALLOWED_ORIGIN], "Access-Control-Request-Method": "POST"},
    {"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": " "},
])
def test_an_options_that_is_not_a_cors_preflight_gets_405_and_is_not_forwarded(gate, headers):
    result = gate.handler(event(headers, method="OPTIONS"), None)
    refusal(result, 405, "method-not-allowed")
    assert header(result, "allow") == "POST"


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "https://app.example.evil", "http://app.example"])
def test_a_preflight_from_an_origin_not_allowed_gets_403(gate, origin):
    result = gate.handler(event({"Origin": origin, "Access-Control-Request-Method": "POST"}, method="OPTIONS"), None)
    refusal(result, 403, "origin-not-allowed")


def test_a_preflight_from_the_allowed_origin_with_whitespace_around_it_passes(gate):
    result = gate.handler(event({"Origin": f" {ALLOWED_ORIGIN}\t", "Access-Control-Request-Method": "POST"},
                                method="OPTIONS"), None)
    assert status(result) is None, result


def test_without_allowed_origins_no_preflight_passes(issuer, tmp_path):
    closed = render(settings(issuer.jwks, allowed_origins=()), tmp_path)
    refusal(closed.handler(event(PREFLIGHT, method="OPTIONS"), None), 403, "origin-not-allowed")


@pytest.mark.parametrize("uri", ["/", "/other", "/status", "/mcp/"])
def test_a_real_preflight_of_another_path_gets_404(gate, uri):
    refusal(gate.handler(event(PREFLIGHT, method="OPTIONS", uri=uri), None), 404, "not-found")


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "HEAD", "TRACE", "CONNECT", "PROPFIND"])
def test_on_the_mcp_path_every_method_but_post_gets_405_allow_post_with_or_without_a_token(gate, issuer, method):
    for token in (scoped(issuer), None):
        result = call(gate, token, body=None, method=method)
        document = refusal(result, 405, "method-not-allowed")
        assert header(result, "allow") == "POST"
        assert document["error"]["code"] == -32600


def test_a_server_that_streams_on_get_opts_in_and_delete_still_gets_405(issuer, tmp_path):
    streaming = render(settings(issuer.jwks, get_stream=True), tmp_path)
    assert status(call(streaming, scoped(issuer), body=None, method="GET")) is None
    refusal(call(streaming, None, body=None, method="GET"), 401, "no-token")  # GET needs a token like POST
    result = call(streaming, scoped(issuer), body=None, method="DELETE")
    refusal(result, 405, "method-not-allowed")
    assert header(result, "allow") == "GET, POST"


# The hostile-input run's shapes: two make awscrt raise, six others a signer and a verifier read apart.
QUERY_STRINGS = ["a=%zz", "a=%", "a=b+c", "%41=1", "a=1;b=2", "a=b&", "&a=b", "a=b&&c=d", "a", "=", "%", "a=%C3%28"]


@pytest.mark.parametrize("querystring", QUERY_STRINGS)
def test_any_query_string_on_the_mcp_path_gets_400_before_signing(gate, issuer, querystring, monkeypatch):
    signed: list[Any] = []
    monkeypatch.setattr(gate.signing, "sign", lambda *args, **kwargs: signed.append(args))
    result = call(gate, scoped(issuer), querystring=querystring)
    document = refusal(result, 400, "bad-request")
    assert document["error"]["code"] == -32600 and "query string" in document["error"]["message"]
    assert signed == []


def test_the_shapes_refused_are_ones_the_signer_itself_cannot_take(gate):
    # Why the 400 comes first: awscrt raises on a malformed escape (the 5xx of the hostile run).
    with pytest.raises(Exception):  # noqa: B017 - awscrt's own error type
        gate.signing.signature_headers("POST", "/mcp", "a=%zz", ORIGINS["us-east-1"].host_header, b"{}",
                                       "us-east-1", CREDENTIALS)


def test_a_query_string_on_a_preflight_or_without_a_token_gets_400_too(gate):
    refusal(gate.handler(event(PREFLIGHT, method="OPTIONS", querystring="a=%"), None), 400, "bad-request")
    refusal(call(gate, None, querystring="a=%zz"), 400, "bad-request")


def test_anything_the_signer_raises_is_a_502_of_the_edge_not_a_crash(gate, issuer, monkeypatch):
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("AWS_ERROR_INVALID_ARGUMENT")

    monkeypatch.setattr(gate.signing, "aws_sign_request", broken)
    refusal(call(gate, scoped(issuer)), 502, "cannot-sign")


def test_the_metadata_is_served_for_get_and_head_unmarked_and_its_preflight_answered(gate):
    for method in ("GET", "HEAD"):
        result = gate.handler(event(method=method, uri="/.well-known/oauth-protected-resource/mcp"), None)
        assert status(result) == 200 and REFUSAL_HEADER not in result["headers"]
    preflight = gate.handler(event({"Origin": "https://anyone.example", "Access-Control-Request-Method": "GET"},
                                   method="OPTIONS", uri="/.well-known/oauth-protected-resource"), None)
    assert status(preflight) == 204 and REFUSAL_HEADER not in preflight["headers"]
    assert header(preflight, "access-control-allow-origin") == "*"
    result = gate.handler(event(method="POST", uri="/.well-known/oauth-protected-resource"), None)
    refusal(result, 405, "method-not-allowed")
    assert header(result, "allow") == "GET, HEAD"


@pytest.mark.parametrize(("make", "code", "reason"), [
    (lambda gate, issuer: call(gate, None), 401, "no-token"),
    (lambda gate, issuer: call(gate, "not.a.jwt"), 401, "invalid-token"),
    (lambda gate, issuer: call(gate, issuer.token(scope="mcp")), 403, "insufficient-scope"),
    (lambda gate, issuer: call(gate, scoped(issuer), body=b"{not json"), 400, "bad-request"),
    (lambda gate, issuer: call(gate, scoped(issuer), truncated=True), 413, "too-large"),
], ids=["no-token", "invalid-token", "scope", "body", "truncated"])
def test_every_refusal_of_the_gate_carries_the_refusal_mark(gate, issuer, make, code, reason):
    refusal(make(gate, issuer), code, reason)


def test_the_refusal_mark_is_the_contracts_header_in_the_gate_config(issuer):
    from edge.gate_package import gate_config
    from functions.contract import REFUSAL_HEADER as CONTRACT_REFUSAL_HEADER

    assert gate_config(settings(issuer.jwks))["refusal_header"] == CONTRACT_REFUSAL_HEADER == REFUSAL_HEADER


@pytest.mark.parametrize(("overrides", "field"), [
    ({"readiness_path": "/.well-known/x"}, "readiness_path"),
    ({"readiness_path": "healthz"}, "readiness_path"),
])
def test_a_bad_readiness_path_fails_the_render_naming_it(issuer, overrides, field):
    from edge.gate_package import gate_config

    with pytest.raises(ValueError, match=field):
        gate_config(settings(issuer.jwks, **overrides))
