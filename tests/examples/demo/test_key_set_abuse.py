"""JWT and key-set abuse at the shipped origin, as families rather than single inputs.

- A key set that answers anything but a usable JWKS (HTML, other non-JSON, a JSON
  array, no keys, an error status, a redirect, too much, nothing in time) refuses
  valid tokens with 503 and ``Retry-After``, logs what the issuer answered, and is
  not fetched again while the origin backs off.
- Weak or mismatched keys (short RSA, an EC key on another curve) never verify.
- Time claims that are not JSON numbers, and any JSON a token can carry, are refused
  with a reason (``TokenRejectedError``), never another exception (a 500).
- More than one ``Authorization`` header is refused whichever comes first.
"""

from __future__ import annotations

import base64
import importlib
import json
import math
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

import anyio
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jwt import PyJWK

from devkit.jwks import public_jwk
from tests.functions.mcp_server.conftest import INITIALIZE, Issuer, RunningOrigin, settings_for
from tests.loopback import ThreadedSocketServer

# --- a key set that misbehaves on purpose -------------------------------------------------

Answer = tuple[int, dict[str, str], bytes]
BAD_KEY_SETS: dict[str, Answer | str] = {
    "HTML with 200": (200, {"content-type": "text/html"}, b"<html><body>Sign in</body></html>"),
    "plain text with 200": (200, {"content-type": "text/plain"}, b"ok"),
    "empty 200": (200, {}, b""),
    "JSON array": (200, {"content-type": "application/json"}, b"[1, 2, 3]"),
    "keys is not a list": (200, {"content-type": "application/json"}, b'{"keys": "none"}'),
    "no usable keys": (200, {"content-type": "application/json"}, b'{"keys": [{"kty": "oct", "k": "AAAA"}]}'),
    "not UTF-8": (200, {"content-type": "application/json"}, b"\xff\xfe\x00{"),
    "HTTP 500": (500, {"content-type": "text/plain"}, b"internal error"),
    "HTTP 404": (404, {}, b""),
    "redirect": (302, {"location": "https://evil.example/jwks.json"}, b""),
    "oversized": (200, {"content-type": "application/json"}, b'{"keys": [' + b" " * (600 * 1024) + b"]}"),
    "too slow": "slow",
}


class HostileKeySet(ThreadedSocketServer):
    """A JWKS URL on loopback that answers ``behaviour`` to every GET, counting them."""

    def __init__(self, behaviour: Answer | str, slow_s: float = 3.0):
        self.behaviour = behaviour
        self.fetches = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                if isinstance(owner.behaviour, str):  # "slow"
                    time.sleep(slow_s)
                    return
                status, headers, body = owner.behaviour
                self.send_response(status)
                for name, value in {**headers, "content-length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(ThreadingHTTPServer, Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks.json"


@pytest.fixture
def bad_key_set(request: pytest.FixtureRequest) -> Iterator[HostileKeySet]:
    server = HostileKeySet(BAD_KEY_SETS[request.param], slow_s=1.5)
    yield server
    server.close()


@pytest.mark.parametrize("bad_key_set", BAD_KEY_SETS, indirect=True)
def test_an_unusable_key_set_gets_503_with_retry_after_a_log_line_and_one_fetch(
        shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer, bad_key_set: HostileKeySet,
        caplog: pytest.LogCaptureFixture):
    # Given an origin whose issuer's key set answers garbage
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=bad_key_set.url, JWKS_TIMEOUT_SECONDS="1")
    with RunningOrigin(shipped.create_app(settings), settings) as origin:
        started = time.monotonic()
        # When a dozen requests with a valid token arrive
        responses = [origin.post(INITIALIZE, headers=origin.headers(issuer.token())) for _ in range(12)]
        elapsed_s = time.monotonic() - started
    # Then each is a 503 the client may retry, never a 500 or a 401
    assert {r.status_code for r in responses} == {503}, responses[0].text
    assert all(int(r.headers["retry-after"]) >= 1 for r in responses)
    assert responses[0].json()["error"] == "temporarily_unavailable"
    assert responses[0].headers["x-mcp-edge-served-region"]
    # ... the issuer is not hammered: the start-up prefetch, then one fetch per backoff
    # period (1, 2, 4 ... s), not one per request
    assert bad_key_set.fetches <= 2 + math.floor(math.log2(1 + elapsed_s))
    # ... and the log says what the issuer did
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("auth") and r.levelname == "ERROR"]
    assert lines and bad_key_set.url in lines[0] and "refused with 503" in lines[0]


def test_a_key_set_that_recovers_is_used_again_after_the_backoff(shipped: ModuleType, lambda_env: dict[str, str],
                                                                   issuer: Issuer):
    auth = importlib.import_module("mcp_server.auth")
    flaky = HostileKeySet((500, {}, b"down"))
    try:
        settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=flaky.url)
        clock = [0.0]
        client = auth.BackoffJWKClient(settings.jwks_url, max_backoff_s=60, clock=lambda: clock[0],
                                       cache_jwk_set=True, lifespan=300, cooldown_duration=60, timeout=2)
        verifier = auth.JwtVerifier(settings, client)
        delays = []
        for _ in range(5):  # each failure doubles the wait: 1, 2, 4, 8, 16 s
            with pytest.raises(auth.KeySetUnavailableError) as refused:
                verifier.decode(issuer.token())
            delays.append(refused.value.retry_after_s)
            with pytest.raises(auth.KeySetUnavailableError, match="backing off"):
                verifier.decode(issuer.token())  # no fetch while waiting
            clock[0] += refused.value.retry_after_s
        assert delays == [1, 2, 4, 8, 16]
        assert flaky.fetches == 5
        flaky.behaviour = (200, {"content-type": "application/json"}, json.dumps(issuer.jwks.document).encode())
        assert verifier.decode(issuer.token())["sub"] == "client-1"
        assert client.failures == 0
    finally:
        flaky.close()


# --- keys too weak, or on the wrong curve ----------------------------------------------


class OneKey:
    """Stands in for the key set: one JWK."""

    def __init__(self, jwk: dict[str, Any]):
        self.key = PyJWK(jwk)

    def get_signing_key(self, kid: str) -> PyJWK:
        return self.key


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_by_hand(header: dict[str, Any], payload_json: str, sign: Callable[[bytes], bytes]) -> str:
    """A JWS whose payload is exactly ``payload_json`` (PyJWT refuses weak keys when signing)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(payload_json.encode())}"
    return f"{signing_input}.{b64(sign(signing_input.encode()))}"


def rsa_signer(key: rsa.RSAPrivateKey) -> Callable[[bytes], bytes]:
    return lambda data: key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def ec_signer(key: ec.EllipticCurvePrivateKey, size: int) -> Callable[[bytes], bytes]:
    def sign(data: bytes) -> bytes:
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    return sign


@pytest.fixture(scope="module")
def verifier_for(shipped: ModuleType, lambda_env: dict[str, str]) -> Callable[[Any], Any]:
    auth = importlib.import_module("mcp_server.auth")
    settings = settings_for(shipped, lambda_env, AUTH_ALGORITHMS="RS256,ES256,ES384")
    return lambda keys: auth.JwtVerifier(settings, keys)


def claims_json(issuer: Issuer, **overrides: Any) -> str:
    return json.dumps(issuer.claims(**overrides))


def short_rsa_jwk(bits: int) -> dict[str, Any]:
    """The public JWK of a ``bits``-bit modulus (cryptography will not generate keys under 1024 bits)."""
    import secrets

    modulus = (1 << (bits - 1)) | secrets.randbits(bits - 1) | 1
    public = rsa.RSAPublicNumbers(65537, modulus).public_key()
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))
    jwk.update(kid="weak", alg="RS256", use="sig")
    return jwk


@pytest.mark.parametrize("bits", [512, 1024, 2047])
def test_short_rsa_keys_never_verify(verifier_for, issuer: Issuer, bits: int):
    auth = importlib.import_module("mcp_server.auth")
    if bits == 1024:  # a real 1024-bit key and a valid signature: refused for the size alone
        weak = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        jwk, sign = public_jwk(weak, "weak", "RS256"), rsa_signer(weak)
    else:
        jwk, sign = short_rsa_jwk(bits), lambda data: b"\x01" * (bits // 8)
    token = signed_by_hand({"alg": "RS256", "kid": "weak", "typ": "JWT"}, claims_json(issuer), sign)
    with pytest.raises(auth.TokenRejectedError, match=f"{bits}-bit RSA"):
        verifier_for(OneKey(jwk)).decode(token)


@pytest.mark.parametrize(("alg", "curve", "size"), [("ES256", ec.SECP384R1(), 48), ("ES384", ec.SECP256R1(), 32),
                                                     ("ES256", ec.SECP256K1(), 32)])
def test_ec_keys_on_another_curve_than_the_algorithm_never_verify(verifier_for, issuer: Issuer, alg: str,
                                                                   curve: ec.EllipticCurve, size: int):
    auth = importlib.import_module("mcp_server.auth")
    key = ec.generate_private_key(curve)
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="ec", alg=alg, use="sig")
    token = signed_by_hand({"alg": alg, "kid": "ec"}, claims_json(issuer), ec_signer(key, size))
    with pytest.raises(auth.TokenRejectedError):
        verifier_for(OneKey(jwk)).decode(token)


# --- claims: JSON numbers only, and nothing a token carries crashes the check ------------

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_JWK = public_jwk(RSA_KEY, "rsa-1", "RS256")
NOT_NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10**12).map(str),  # "9999999999"
    st.booleans(), st.none(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400"]).map(lambda raw: ("raw", raw)),
)


def payload_with(issuer: Issuer, claim: str, value: Any) -> str:
    base = {k: v for k, v in issuer.claims().items() if k != claim}
    if isinstance(value, tuple):  # ("raw", text): a number JSON cannot represent, as a server might send it
        return json.dumps(base)[:-1] + f', "{claim}": {value[1]}}}'
    return json.dumps({**base, claim: value})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(claim=st.sampled_from(["exp", "nbf", "iat"]), value=NOT_NUMBERS)
def test_time_claims_that_are_not_json_numbers_are_refused(verifier_for, issuer: Issuer, claim: str, value: Any):
    auth = importlib.import_module("mcp_server.auth")
    token = signed_by_hand({"alg": "RS256", "kid": "rsa-1"}, payload_with(issuer, claim, value), rsa_signer(RSA_KEY))
    with pytest.raises(auth.TokenRejectedError):
        verifier_for(OneKey(RSA_JWK)).decode(token)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.dictionaries(st.sampled_from(["alg", "kid", "typ", "crit", "b64", "jku"]), JSON_VALUES, max_size=4),
       payload=st.one_of(JSON_VALUES, st.dictionaries(st.sampled_from(["exp", "nbf", "iat", "iss", "aud", "sub"]),
                                                       JSON_VALUES, max_size=6)))
def test_whatever_json_a_token_carries_it_is_accepted_or_refused_with_a_reason(verifier_for, header: dict[str, Any],
                                                                                 payload: Any):
    auth = importlib.import_module("mcp_server.auth")
    token = signed_by_hand({"alg": "RS256", "kid": "rsa-1", **header}, json.dumps(payload), rsa_signer(RSA_KEY))
    verifier = verifier_for(OneKey(RSA_JWK))
    try:
        claims = verifier.decode(token)
    except auth.TokenRejectedError:
        return
    # Accepted only with the claims the verifier promises the SDK
    assert isinstance(claims["exp"], int | float) and not isinstance(claims["exp"], bool)
    assert anyio.run(verifier.verify_token, token) is not None


# --- duplicate Authorization headers ----------------------------------------------------


@pytest.mark.parametrize("order", ["valid first", "garbage first", "both valid"])
def test_more_than_one_authorization_header_is_refused(origin: RunningOrigin, issuer: Issuer, order: str):
    valid, garbage = f"Bearer {issuer.token()}", "Bearer not.a.token"
    pair = {"valid first": (valid, garbage), "garbage first": (garbage, valid), "both valid": (valid, valid)}[order]
    headers = [(k, v) for k, v in origin.headers().items()] + [("authorization", a) for a in pair]
    headers += [("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    response = httpx.post(origin.mcp_url, content=json.dumps(INITIALIZE).encode(), headers=headers, timeout=30)
    assert response.status_code == 401
    assert "resource_metadata=" in response.headers["www-authenticate"]


# --- any key set document: usable, or refused with a reason; never a crash -------------

B64 = st.binary(max_size=300).map(b64)
JWKS_KEYS = st.fixed_dictionaries(
    {"kty": st.sampled_from(["RSA", "EC", "OKP", "oct", "nope", 7])},
    optional={"kid": st.sampled_from(["rsa-1", "", 5]), "alg": st.sampled_from(["RS256", "ES256", "ES384", "EdDSA", "HS256", "none", 1]),
              "use": st.sampled_from(["sig", "enc", None]), "n": B64, "e": st.sampled_from(["AQAB", "AQ", "", "!!"]),
              "crv": st.sampled_from(["P-256", "P-384", "P-521", "secp256k1", "Ed25519", "X"]), "x": B64, "y": B64,
              "k": B64},
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(JWKS_KEYS, max_size=3))
def test_any_key_set_document_is_usable_or_refused_with_a_reason(verifier_for, issuer: Issuer, keys: list[Any]):
    auth = importlib.import_module("mcp_server.auth")
    try:
        key_set = auth.parse_key_set(json.dumps({"keys": keys}).encode())
    except auth.UnusableKeySetError:
        return

    class Keys:
        def get_signing_key(self, kid: str) -> PyJWK:
            for key in key_set.keys:
                if key.key_id == kid:
                    return key
            raise jwt.PyJWKClientError(f"no key {kid}")

    token = signed_by_hand({"alg": "RS256", "kid": "rsa-1"}, claims_json(issuer), rsa_signer(RSA_KEY))
    with pytest.raises(auth.TokenRejectedError):  # none of these keys signed it
        verifier_for(Keys()).decode(token)
