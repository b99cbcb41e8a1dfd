"""The gate's memory of verified tokens (``edge_gate.tokens.VerifiedTokenCache``, executed
from the rendered package, and through the shipped handler): a hit gives the same claims,
never outside the token's exp/nbf/iat window with the leeway, never for a token that did
not pass, never after the key set it passed against was replaced; failures leave nothing."""

from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from devkit.jwks import JwksServer, public_jwk
from tests.edge.gate_harness import CREDENTIALS, TOOLS_CALL, Issuer, event, header, render, rpc, settings, status

LEEWAY_S = 30


@pytest.fixture(autouse=True)
def role_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


@functools.cache
def rendered() -> tuple[ModuleType, Issuer]:
    issuer = Issuer.generate()
    return render(settings(issuer.jwks), Path(tempfile.mkdtemp(prefix="edge-gate-cache-"))), issuer


@pytest.fixture
def gate() -> ModuleType:
    module = rendered()[0]
    module.VERIFIER.clear()
    return module


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return rendered()[1]


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def cache(gate: ModuleType, clock: Clock | None = None, max_entries: int = 512) -> tuple[Any, list[str]]:
    """A cache over the shipped verifier, and the list of tokens the verifier itself checked."""
    inner = gate.VERIFIER.verifier
    checked: list[str] = []

    class Counting(gate.tokens.TokenVerifier):  # type: ignore[name-defined,misc]
        def verify(self, token: str) -> dict[str, Any]:
            checked.append(token)
            return super().verify(token)

    counting = Counting(inner.key_set, issuer=inner.issuer, audiences=inner.audiences,
                        algorithms=inner.algorithms, leeway_s=LEEWAY_S)
    return gate.tokens.VerifiedTokenCache(counting, max_entries=max_entries, clock=clock or time.time), checked


def call(gate: ModuleType, token: str) -> dict[str, Any]:
    result: dict[str, Any] = gate.handler(event({"Authorization": f"Bearer {token}"}, body=rpc(TOOLS_CALL)), None)
    return result


def test_a_hit_gives_the_same_claims_without_a_second_signature_check(gate, issuer):
    verifier, checked = cache(gate)
    token = issuer.token(scope="mcp search:read")
    first = verifier.verify(token)
    first["scope"] = "mcp admin"  # a caller's change to its copy does not reach the cache
    second = verifier.verify(token)
    assert second == verifier.verifier.verify(token) and second["scope"] == "mcp search:read"
    assert checked == [token, token]  # the second verify() was served from the cache; the third is the reference


def test_a_token_is_never_served_past_its_exp_with_the_leeway(gate, issuer):
    clock = Clock()
    verifier, checked = cache(gate, clock)
    exp = int(clock.now) + 100
    token = issuer.token(exp=exp, scope="mcp")
    verifier.verify(token)
    clock.now = exp + LEEWAY_S - 0.001
    verifier.verify(token)
    assert len(checked) == 1  # still inside the window: a hit
    clock.now = exp + LEEWAY_S  # PyJWT's first refused instant: exp <= now - leeway
    verifier.verify(token)  # the verifier (on the real clock) still takes it; the point is it was asked
    assert len(checked) == 2


@pytest.mark.parametrize("claim", ["nbf", "iat"])
def test_a_token_is_never_served_before_its_nbf_or_iat_with_the_leeway(gate, issuer, claim):
    clock = Clock()
    verifier, checked = cache(gate, clock)
    start = int(clock.now)
    token = issuer.token(**{claim: start}, scope="mcp")
    verifier.verify(token)
    clock.now = start - LEEWAY_S  # the earliest instant PyJWT takes it
    verifier.verify(token)
    assert len(checked) == 1
    clock.now = start - LEEWAY_S - 0.001  # a clock stepped back past the window: not served
    verifier.verify(token)
    assert len(checked) == 2


def test_a_refused_token_is_refused_every_time_and_leaves_nothing(gate, issuer):
    verifier, checked = cache(gate)
    forged = issuer.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048), scope="mcp")
    for _ in range(3):
        with pytest.raises(gate.tokens.TokenRejectedError, match="bad signature"):
            verifier.verify(forged)
    assert len(checked) == 3 and len(verifier) == 0


def test_only_the_exact_token_string_hits(gate, issuer):
    # Given a token that passed and is cached
    token = issuer.token(scope="mcp search:read")
    assert status(call(gate, token)) is None
    head, payload, signature = token.split(".")
    # When the same claims come with a changed signature, or the signature re-encoded with padding
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    for variant in (f"{head}.{payload}.{flipped}", token + "=", f"{head}.{payload}.{signature}x"):
        result = call(gate, variant)
        # Then each is verified on its own and refused
        assert status(result) == 401, variant
        assert header(result, "www-authenticate") and 'error="invalid_token"' in (header(result, "www-authenticate") or "")
    assert status(call(gate, token)) is None


def test_a_failure_cannot_deny_a_good_token(gate, issuer):
    # Given the same claims signed by another key are sent first (a refusal), then the real token
    claims_forged = issuer.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048),
                                 scope="mcp search:read")
    assert status(call(gate, claims_forged)) == 401
    # Then the real token passes, and the refused one still does not
    token = issuer.token(scope="mcp search:read")
    assert status(call(gate, token)) is None
    assert status(call(gate, claims_forged)) == 401


def test_the_cache_holds_at_most_its_bound_and_drops_the_oldest(gate, issuer):
    verifier, checked = cache(gate, max_entries=3)
    tokens = [issuer.token(scope="mcp", jti=str(i)) for i in range(5)]
    for token in tokens:
        verifier.verify(token)
    assert len(verifier) == 3
    verifier.verify(tokens[-1])
    assert len(checked) == 5  # the newest is held
    verifier.verify(tokens[0])
    assert len(checked) == 6  # the oldest was pushed out


def test_a_hit_through_the_shipped_gate_forwards_the_same_identity(gate, issuer):
    token = issuer.token(scope="mcp search:read", sub="user-7", client_id="client-7")
    first, second = call(gate, token), call(gate, token)
    assert status(first) is None and status(second) is None
    assert len(gate.VERIFIER) == 1
    for name in ("x-mcp-edge-subject", "x-mcp-edge-client-id", "x-mcp-edge-scopes"):
        assert header(first, name) == header(second, name)
    assert header(second, "x-mcp-edge-client-id") == "client-7"


def test_a_replaced_key_set_makes_cached_tokens_verify_again(issuer, tmp_path):
    # Given a gate whose embedded key rsa-1 the issuer has withdrawn in favour of rsa-2
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with JwksServer([public_jwk(rotated, "rsa-2", "RS256")]) as jwks:
        gate = render(settings(issuer.jwks, jwks.url), tmp_path)
        old = issuer.token(scope="mcp search:read")
        assert status(call(gate, old)) is None and len(gate.VERIFIER) == 1  # passed and cached
        # When a token of the new key makes the gate download the set
        assert status(call(gate, issuer.token(key=rotated, kid="rsa-2", scope="mcp search:read"))) is None
        assert len(jwks.fetches) == 1
        # Then the cached token of the withdrawn key is verified afresh, and refused
        result = call(gate, old)
        assert status(result) == 401 and "unknown kid" in result["body"]


@hypothesis_settings(max_examples=40, deadline=None)
@given(exp=st.integers(-LEEWAY_S + 5, 3600), nbf=st.one_of(st.none(), st.integers(-3600, LEEWAY_S - 5)),
       iat=st.one_of(st.none(), st.integers(-3600, LEEWAY_S - 5)), later=st.floats(-4000, 4000))
def test_a_cached_token_is_served_exactly_when_pyjwt_would_accept_it_then(exp, nbf, iat, later):
    # Given a token valid now (times relative to now), verified and cached
    gate, issuer = rendered()
    clock = Clock()
    verifier, checked = cache(gate, clock)
    now = int(clock.now)
    times = {"exp": now + exp, "nbf": None if nbf is None else now + nbf, "iat": None if iat is None else now + iat}
    token = issuer.token(scope="mcp", **times)
    claims = verifier.verify(token)
    # When it comes again at another instant
    clock.now = now + later
    api = jwt.api_jwt.PyJWT()
    try:  # PyJWT's own verdict on these claims at that instant, with the same leeway
        api._validate_exp(claims, clock.now, LEEWAY_S)
        for claim, check in (("nbf", api._validate_nbf), ("iat", api._validate_iat)):
            if claim in claims:
                check(claims, clock.now, LEEWAY_S)
        accepted = True
    except jwt.PyJWTError:
        accepted = False
    verifier.verify(token)
    # Then the cache served it (no second check) exactly when PyJWT would have accepted it
    assert (len(checked) == 1) == accepted
