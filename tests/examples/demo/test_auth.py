"""JwtVerifier's memory of verified tokens and its claims mapping (the attack suite
in test_attacks.py covers refusals end to end)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given
from hypothesis import strategies as st
from jwt import PyJWK, PyJWS
from jwt.algorithms import RSAAlgorithm

from functions.mcp_server.auth import JWT, JwtVerifier, StrictSegmentJWS, scopes_of
from functions.mcp_server.settings import Settings

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
SETTINGS = Settings.from_env({
    "AUTH_ISSUER": "https://auth.example/", "AUTH_AUDIENCE": "https://mcp.example/mcp",
    "AUTH_JWKS_URL": "https://auth.example/jwks.json", "ORIGIN_SECRET": "s" * 32,
    "AUTH_LEEWAY_SECONDS": "30", "JWKS_CACHE_SECONDS": "300",
})


class CountingKeys:
    """Stands in for PyJWKClient: one key, and how often it was asked."""

    def __init__(self) -> None:
        jwk = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
        jwk.update(kid="k1", alg="RS256", use="sig")
        self.key = PyJWK(jwk)
        self.lookups = 0

    def get_signing_key(self, kid: str) -> PyJWK:
        self.lookups += 1
        if kid != "k1":
            raise jwt.PyJWKClientError(f"no key {kid}")
        return self.key


def token(**claims: Any) -> str:
    now = int(time.time())
    body = {"iss": "https://auth.example/", "aud": "https://mcp.example/mcp", "sub": "u1", "exp": now + 600, **claims}
    return jwt.encode(body, KEY, algorithm="RS256", headers={"kid": "k1"})


def verifier(keys: CountingKeys, clock: list[float] | None = None, remember: int = 1024) -> JwtVerifier:
    now = clock if clock is not None else [time.time()]
    return JwtVerifier(SETTINGS, keys, remember=remember, clock=lambda: now[0])  # type: ignore[arg-type]


def verify(v: JwtVerifier, t: str) -> Any:
    return anyio.run(v.verify_token, t)


def test_a_verified_token_is_not_verified_again():
    keys = CountingKeys()
    v = verifier(keys)
    t = token()
    first, second = verify(v, t), verify(v, t)
    assert first is not None and second is not None
    assert first.subject == second.subject == "u1"
    assert keys.lookups == 1


def test_a_remembered_token_is_checked_again_after_the_key_cache_lifetime():
    keys = CountingKeys()
    clock = [time.time()]
    v = verifier(keys, clock)
    t = token()
    verify(v, t)
    clock[0] += SETTINGS.jwks_cache_s + 1
    assert verify(v, t) is not None
    assert keys.lookups == 2


def test_a_remembered_token_is_not_served_from_memory_past_its_expiry():
    keys = CountingKeys()
    clock = [time.time()]
    v = verifier(keys, clock)
    t = token(exp=int(clock[0]) + 5)
    reasons: list[Exception] = []
    v.on_reject = reasons.append
    assert verify(v, t) is not None
    clock[0] += 5 + SETTINGS.leeway_s + 1
    # Past exp + leeway on the verifier's clock: not served from memory; PyJWT then
    # judges with the real clock (still valid), so the point is the memory was bypassed.
    verify(v, t)
    assert keys.lookups == 2


def test_refused_tokens_are_never_remembered():
    keys = CountingKeys()
    v = verifier(keys)
    bad = token(aud="https://other.example/")
    assert verify(v, bad) is None and verify(v, bad) is None
    assert keys.lookups == 2


def test_memory_is_bounded_least_recently_used_first():
    keys = CountingKeys()
    v = verifier(keys, remember=2)
    a, b, c = token(sub="a"), token(sub="b"), token(sub="c")
    for t in (a, b, a, c):  # b is the least recently used when c arrives
        verify(v, t)
    assert keys.lookups == 3
    verify(v, a)
    assert keys.lookups == 3
    verify(v, b)
    assert keys.lookups == 4


def test_access_token_carries_client_scopes_expiry_with_leeway_and_audience():
    v = verifier(CountingKeys())
    exp = int(time.time()) + 100
    access = verify(v, token(client_id="c-9", scope="mcp:read mcp:write", exp=exp))
    assert access.client_id == "c-9"
    assert access.scopes == ["mcp:read", "mcp:write"]
    assert access.expires_at == exp + SETTINGS.leeway_s
    assert access.resource == "https://mcp.example/mcp"
    assert access.claims == {"iss": "https://auth.example/"}


@given(scopes=st.lists(st.from_regex(r"[a-z:._-]{1,12}", fullmatch=True), max_size=5))
def test_scopes_from_either_claim_form(scopes: list[str]):
    assert scopes_of({"scope": " ".join(scopes)}) == scopes
    assert scopes_of({"scp": scopes}) == scopes
    assert scopes_of({}) == []
    assert scopes_of({"scope": 42}) == []


def test_remembering_can_be_turned_off():
    keys = CountingKeys()
    v = verifier(keys, remember=0)
    t = token()
    verify(v, t)
    verify(v, t)
    assert keys.lookups == 2


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512"])
def test_disallowed_algorithms_never_reach_the_key_set(alg: str):
    keys = CountingKeys()
    v = verifier(keys)
    if alg == "none":
        forged = jwt.encode({"sub": "x"}, "", algorithm="none", headers={"kid": "k1"})
    else:
        forged = jwt.encode({"sub": "x"}, "k" * 64, algorithm=alg, headers={"kid": "k1"})
    assert verify(v, forged) is None
    assert keys.lookups == 0


class CachedKeys(CountingKeys):
    """A client whose key-set cache holds the key (as PyJWKClient's ``jwk_set_cache`` does)."""

    def __init__(self, fresh: bool = True) -> None:
        super().__init__()
        jwk_set = jwt.PyJWKSet([json.loads(json.dumps(self.key._jwk_data))])
        self.jwk_set_cache = type("Cache", (), {"get": staticmethod(lambda: jwk_set if fresh else None)})()


def no_worker_thread(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("verified in a worker thread")


def test_a_token_whose_key_is_cached_is_verified_without_a_worker_thread(monkeypatch: pytest.MonkeyPatch):
    keys = CachedKeys()
    monkeypatch.setattr("functions.mcp_server.auth.anyio.to_thread.run_sync", no_worker_thread)
    access = verify(verifier(keys), token())
    assert access is not None and access.subject == "u1"
    assert keys.lookups == 0  # the cached set's key, not a client lookup that could fetch
    # ... and a token refused with the cached key is refused for the same reason
    assert verify(verifier(keys), token(aud="https://elsewhere.example/")) is None


@pytest.mark.parametrize("keys", [CachedKeys(fresh=False), CountingKeys()], ids=["expired cache", "no cache"])
def test_a_token_whose_key_may_need_a_fetch_is_verified_in_a_worker_thread(keys: CountingKeys,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("functions.mcp_server.auth.anyio.to_thread.run_sync", no_worker_thread)
    with pytest.raises(AssertionError, match="worker thread"):
        verify(verifier(keys), token())


def test_an_unknown_kid_with_a_cached_set_goes_to_the_client_which_may_refresh(monkeypatch: pytest.MonkeyPatch):
    keys = CachedKeys()
    unknown = jwt.encode({"iss": "https://auth.example/", "aud": "https://mcp.example/mcp", "exp": time.time() + 60},
                         KEY, algorithm="RS256", headers={"kid": "k2"})
    assert verify(verifier(keys), unknown) is None
    assert keys.lookups == 1


# The segment decoder the verifier's PyJWT uses, against PyJWT's own (the pinned
# version's check: at most two '=', only on a whole quantum, the base64url alphabet,
# canonical trailing bits). Segments near the edge cases: alphabet and near-alphabet
# characters, padding, every length modulo 4.
SEGMENT = st.one_of(
    st.binary(max_size=40).map(lambda raw: base64.urlsafe_b64encode(raw)),  # padded, canonical
    st.binary(max_size=40).map(lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=")),
    st.text(alphabet="ABYZabyz0189-_=+/.! \n\x00é", max_size=24).map(lambda t: t.encode()),
    st.binary(max_size=24),
)


def pyjwt_verdict(decode: Any, segment: bytes) -> tuple[str, Any]:
    try:
        return "decoded", decode(segment, "payload")
    except jwt.DecodeError as exc:
        return "refused", str(exc)


@given(SEGMENT)
def test_the_segment_decoder_accepts_refuses_and_decodes_exactly_as_pyjwt(segment: bytes):
    ours = pyjwt_verdict(StrictSegmentJWS._decode_base64url_segment, segment)
    assert ours == pyjwt_verdict(PyJWS._decode_base64url_segment, segment)


def test_the_verifier_decodes_with_the_strict_segment_decoder(monkeypatch: pytest.MonkeyPatch):
    # PyJWT keeps its JWS in a private attribute: if a PyJWT upgrade moved it, the
    # verifier would silently go back to PyJWT's own check (correct, but slow).
    seen: list[bytes] = []
    original = StrictSegmentJWS._decode_base64url_segment

    def counting(segment: bytes, name: str) -> bytes:
        seen.append(segment)
        return original(segment, name)

    monkeypatch.setattr(StrictSegmentJWS, "_decode_base64url_segment", staticmethod(counting))
    t = token()
    assert verify(verifier(CountingKeys()), t) is not None
    assert set(seen) == set(t.encode().split(b"."))
    assert isinstance(JWT._jws, StrictSegmentJWS)
