"""OAuth resource server: verify the bearer JWT at the origin.

PyJWT with the issuer's JWKS. One ``PyJWKClient`` per process (module-level in
``app``), caching the key set for ``jwks_cache_s``; a token whose ``kid`` is not in
the cached set forces at most one refresh per ``jwks_refresh_cooldown_s`` (PyJWT's
cooldown), so a flood of made-up ``kid`` values cannot hammer the issuer. Fetching
is blocking I/O, so verification runs in a worker thread, never on the event loop.

Checks, in order: a well-formed JWT; ``alg`` in the allow-list (asymmetric only,
before any key lookup); a ``kid`` the JWKS has, bound to that algorithm; the
signature; ``exp`` (required), ``nbf`` (when present), ``iss`` and ``aud`` (required),
with a small leeway. The token itself is never logged.

A token that verified is remembered (bounded LRU) until it expires, or for at most
the key-set cache lifetime (so a key the issuer withdraws stops working as soon as
it would without this cache): a client reusing its token skips the signature check
and the worker thread.

Tokens are decoded by PyJWT with one change (``StrictSegmentJWS``): its strict
base64url check of each segment, a Python loop over every character (about two
thirds of a token's verification, which every instance's first request pays), is
done with one compiled pattern instead, accepting and refusing exactly what PyJWT's
own check does (a property test holds the two to the same answers).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.request import OpenerDirector

import anyio.to_thread
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt import PyJWK, PyJWKClient, PyJWKSet, PyJWS, PyJWT
from mcp.server.auth.provider import AccessToken

from . import key_prefetch
from .key_prefetch import MAX_KEY_SET_BYTES
from .key_prefetch import FetchFailedError as _FetchFailedError
from .settings import Settings

log = logging.getLogger("mcp_server.auth")
VERIFIED_TOKENS_REMEMBERED = 1024
MIN_RSA_KEY_BITS = 2048
FIRST_BACKOFF_S = 1.0
TIME_CLAIMS = ("exp", "nbf", "iat")
DECODE_OPTIONS: Any = {"require": ["exp", "iss", "aud"], "verify_nbf": True, "enforce_minimum_key_length": True}
# The origin's own warm-up tokens (warm_up): their subject, and how long one stays
# acceptable at most.
WARM_UP_SUBJECT = "origin-warm-up"
WARM_UP_LIFETIME_S = 60
_CURVES = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}


_BASE64URL = re.compile(rb"[A-Za-z0-9_-]*")


class StrictSegmentJWS(PyJWS):
    """PyJWT's JWS with its segment check (``_decode_base64url_segment``: at most two
    ``=``, only on a whole quantum, the base64url alphabet, canonical trailing bits)
    done in C: the same verdicts and bytes, a fraction of the time on a real token."""

    @staticmethod
    def _decode_base64url_segment(segment: bytes, name: str) -> bytes:
        stripped = segment.rstrip(b"=")
        padding = len(segment) - len(stripped)
        if (padding > 2 or (padding and len(segment) % 4) or len(stripped) % 4 == 1
                or _BASE64URL.fullmatch(stripped) is None):
            raise jwt.DecodeError(f"Invalid {name} padding")
        # Cannot fail: the alphabet and the length were checked above.
        decoded = base64.urlsafe_b64decode(stripped + b"=" * (-len(stripped) % 4))
        if base64.urlsafe_b64encode(decoded).rstrip(b"=") != stripped:
            raise jwt.DecodeError(f"Invalid {name} padding")  # non-zero bits past the last byte
        return decoded


def strict_segment_jwt() -> PyJWT:
    """PyJWT's JWT API on ``StrictSegmentJWS`` (PyJWT keeps its JWS in ``_jws``; the
    requirements pin PyJWT, and a test checks the attribute is still the one used)."""
    api = PyJWT()
    api._jws = StrictSegmentJWS()
    return api


JWT = strict_segment_jwt()


class TokenRejectedError(Exception):
    """Why a token is refused: a short reason for logs and tests, never the token."""


class KeySetUnavailableError(TokenRejectedError):
    """The issuer's key set could not be fetched or used: not the token's fault."""

    def __init__(self, reason: str, retry_after_s: float):
        super().__init__(reason)
        self.retry_after_s = retry_after_s


# What the issuer's key set URL answered is not a usable key set (internal: the client
# turns it into KeySetUnavailableError with a backoff); the download raises it too.
UnusableKeySetError = _FetchFailedError


class BackoffJWKClient(PyJWKClient):
    """PyJWT's client (key-set cache, unknown-``kid`` cooldown) with a fetch that
    bounds the body, turns every failure into ``KeySetUnavailableError`` and backs
    off after one: while backing off, no request reaches the issuer."""

    def __init__(self, uri: str, *, max_backoff_s: float, clock: Callable[[], float] = time.monotonic,
                 early: key_prefetch.EarlyDownload | None = None, **kwargs: Any):
        super().__init__(uri, **kwargs)
        self._early = early  # the first fetch's outcome, when the process started it
        self.max_backoff_s = max(max_backoff_s, FIRST_BACKOFF_S)
        self.clock = clock
        self.failures = 0  # consecutive failed fetches
        self.fetch_attempts = 0
        self._retry_at = 0.0
        self._lock = threading.Lock()
        # Built on the first fetch and kept: building one costs tens of ms (its HTTPS
        # handler loads the system's CA certificates), which every key-set refresh
        # would otherwise pay again inside a token verification.
        self._opener: OpenerDirector | None = None

    def fetch_data(self) -> Any:
        with self._lock:
            wait = self._retry_at - self.clock()
            if wait > 0:
                raise KeySetUnavailableError(
                    f"signing keys unavailable (backing off after {self.failures} failed fetch(es))", wait)
            self.fetch_attempts += 1
            try:
                key_set = self._fetch()
            except UnusableKeySetError as exc:
                self.failures += 1
                backoff = min(FIRST_BACKOFF_S * 2 ** (self.failures - 1), self.max_backoff_s)
                self._retry_at = self.clock() + backoff
                log.error("JWKS %s unusable (%s); tokens are refused with 503 for %.0f s, then it is fetched again",
                          self.uri, exc, backoff)
                raise KeySetUnavailableError(f"signing keys unavailable: {exc}", backoff) from None
            self.failures, self._retry_at = 0, 0.0
        if self.jwk_set_cache is not None:
            self.jwk_set_cache.put(key_set)
        self._last_successful_fetch = time.monotonic()
        return key_set

    def _fetch(self) -> PyJWKSet:  # under self._lock (fetch_data)
        early, self._early = self._early, None
        if early is not None:
            self._opener = early.opener
            body = early.result()
        else:
            if self._opener is None:
                self._opener = key_prefetch.build_opener()
            body = key_prefetch.download(self._opener, self.uri, self.headers, self.timeout)
        return parse_key_set(body)


def parse_key_set(body: bytes) -> PyJWKSet:
    """A JWKS document as PyJWT's key set; ``UnusableKeySetError`` says why it is unusable."""
    if len(body) > MAX_KEY_SET_BYTES:
        raise UnusableKeySetError(f"answer larger than {MAX_KEY_SET_BYTES} bytes")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise UnusableKeySetError(f"answer is not JSON: {body[:80]!r}") from None
    if not isinstance(document, dict):
        raise UnusableKeySetError(f"answer is not a JSON object: {body[:80]!r}")
    try:
        key_set = PyJWKSet.from_dict(document)
    except Exception as exc:  # PyJWT raises many types on odd keys (NotImplementedError for alg none)
        raise UnusableKeySetError(f"no usable keys: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not signing_keys(key_set):
        raise UnusableKeySetError("no signing key with a kid")
    return key_set


def signing_keys(key_set: PyJWKSet) -> list[PyJWK]:
    """The set's keys a token may name: with a ``kid``, and for signatures (or no stated use)."""
    return [k for k in key_set.keys if k.key_id and k.public_key_use in ("sig", None)]


def make_jwks_client(settings: Settings) -> PyJWKClient:
    headers = {"User-Agent": key_prefetch.user_agent(settings.server_name)}
    return BackoffJWKClient(
        settings.jwks_url,
        max_backoff_s=settings.jwks_refresh_cooldown_s,
        early=key_prefetch.take(settings.jwks_url, headers),
        cache_jwk_set=True,
        lifespan=settings.jwks_cache_s,
        cooldown_duration=settings.jwks_refresh_cooldown_s,
        timeout=settings.jwks_timeout_s,
        headers=headers,
    )


def weak_key_reason(key: PyJWK, alg: str) -> str | None:
    """Why ``key`` must not verify ``alg`` tokens, or None."""
    material = key.key
    if isinstance(material, rsa.RSAPublicKey) and material.key_size < MIN_RSA_KEY_BITS:
        return f"signing key is {material.key_size}-bit RSA (at least {MIN_RSA_KEY_BITS})"
    curve = _CURVES.get(alg)
    if curve is not None and not (isinstance(material, ec.EllipticCurvePublicKey) and isinstance(material.curve, curve)):
        return f"signing key is not on {alg}'s curve"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """OAuth scopes from ``scope`` (RFC 8693/9068: space-separated) or ``scp`` (a list)."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [s for s in scp if isinstance(s, str)]
    if isinstance(scp, str):
        return scp.split()
    return []


def unverified_parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A token's header and claims, not verified (one parse: PyJWT's segment checks cost
    tens of microseconds a pass), or TokenRejectedError("malformed token")."""
    try:
        parts = JWT.decode_complete(token, options={"verify_signature": False})
    except (jwt.PyJWTError, ValueError, RecursionError):
        raise TokenRejectedError("malformed token") from None
    return parts["header"], parts["payload"]


class JwtVerifier:
    """The SDK's ``TokenVerifier``: an ``AccessToken`` for a valid token, else None."""

    def __init__(self, settings: Settings, jwks: PyJWKClient,
                 on_reject: Callable[[TokenRejectedError], None] | None = None,
                 *, remember: int = VERIFIED_TOKENS_REMEMBERED, clock: Callable[[], float] = time.time):
        self.settings = settings
        self.jwks = jwks
        self.on_reject = on_reject
        self.remember = remember
        self.clock = clock
        # token -> (claims, last second it may be accepted without re-verifying)
        self._verified: OrderedDict[str, tuple[dict[str, Any], float]] = OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        claims = self._remembered(token)
        if claims is None:
            try:
                parsed = unverified_parts(token)
                key = self._cached_signing_key(parsed[0])
                if key is not None:
                    # No I/O left, only the signature check (a fraction of a ms): on the
                    # event loop, which spares a worker-thread round trip (the first request
                    # of a fresh instance would otherwise wait for a cold thread).
                    claims = self.decode(token, key, parsed)
                else:  # the key set may have to be fetched: blocking I/O
                    claims = await anyio.to_thread.run_sync(self.decode, token, None, parsed)
            except TokenRejectedError as exc:
                if self.on_reject is not None:
                    self.on_reject(exc)
                return None
            self._remember(token, claims)
        exp = int(claims["exp"])
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or claims.get("sub") or "unknown"),
            scopes=scopes_of(claims),
            # The SDK compares expires_at with the clock without leeway; PyJWT already
            # applied ours, so expires_at is the last second we accept.
            expires_at=exp + self.settings.leeway_s,
            resource=self.settings.audience,
            subject=str(claims["sub"]) if "sub" in claims else None,
            claims={"iss": claims.get("iss")},
        )

    def _remembered(self, token: str) -> dict[str, Any] | None:
        entry = self._verified.get(token)
        if entry is None:
            return None
        claims, until = entry
        if self.clock() > until:
            del self._verified[token]  # re-verified (or refused, with its reason) by decode()
            return None
        self._verified.move_to_end(token)
        return claims

    def _cached_key_set(self) -> PyJWKSet | None:
        """The client's cached key set while unexpired, else None (no I/O)."""
        cache = getattr(self.jwks, "jwk_set_cache", None)
        return cache.get() if cache is not None else None

    def _cached_signing_key(self, header: dict[str, Any]) -> PyJWK | None:
        """The signing key a token's header names when the client's cached key set
        (unexpired) holds it, else None."""
        key_set = self._cached_key_set()
        if key_set is None:
            return None
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            return None
        return next((k for k in signing_keys(key_set) if k.key_id == kid), None)

    @contextmanager
    def accepting(self, token: str, claims: dict[str, Any]) -> Iterator[None]:
        """Accept ``token`` as verified, with ``claims``, inside the block only (for at most
        ``WARM_UP_LIFETIME_S``): the origin's own warm-up requests, sent in process
        before it listens, with a random token that never leaves the process."""
        self._verified[token] = (claims, self.clock() + WARM_UP_LIFETIME_S)
        try:
            yield
        finally:
            self._verified.pop(token, None)

    def exercise_signature_check(self) -> str:
        """Run a request's token check as a real token takes it, so that the first real
        token of a fresh process does not pay for the check's first runs (measured in
        process: 330 us the first real token's check after one refused warm-up token,
        90 us after this; a warm instance's is 70-90 us). Two tokens, neither of which
        can pass as a caller's:

        - signed with nothing, in the cached key set's first signing key of an allowed
          algorithm: the parse, the key lookup, the claims' types and the signature
          check with that key, refused with "bad signature" (the answer);
        - signed with a key made here and never kept (Ed25519), checked with that key alone
          by the same ``JWT.decode`` call and options: PyJWT's path past a good
          signature, the claims' validation (exp, nbf, iss, aud), which a refused token
          never reaches.

        No I/O: the key set must be in hand (else it answers why nothing was checked)."""
        key_set = self._cached_key_set()
        if key_set is None:
            return "no key set in hand"
        s = self.settings
        key = next((k for k in signing_keys(key_set) if k.algorithm_name in s.algorithms), None)
        if key is None:
            return "no signing key of an allowed algorithm"
        size = key.key.key_size // 8 if isinstance(key.key, rsa.RSAPublicKey) else 64
        claims = {"iss": s.issuer, "aud": s.audience, "sub": WARM_UP_SUBJECT,
                  "exp": int(self.clock()) + WARM_UP_LIFETIME_S}
        token = _compact({"alg": key.algorithm_name, "kid": key.key_id, "typ": "JWT"}, claims, b"\x01" * size)
        try:
            self.decode(token, key, self._parsed_with_key(token, key))
        except TokenRejectedError as exc:
            reason = str(exc)
        else:
            return "accepted"  # cannot happen: nothing signed it
        # A key of its own, made here and never kept: an Ed25519 key (PyJWT takes the key
        # object as it is, where an HMAC secret would be tried as DER and X.509 first,
        # loading what lazy_imports defers; and its first signature costs the cold start
        # 0.3 ms where ES256's first costs 2 ms, its DER signature converted for JOSE).
        own_key = ed25519.Ed25519PrivateKey.generate()
        signed = JWT.encode(claims, own_key, algorithm="EdDSA", headers={"kid": WARM_UP_SUBJECT})
        unverified_parts(signed)
        try:
            checked = self._jwt_decode(signed, own_key.public_key(), ("EdDSA",))
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            return f"claims check: {type(exc).__name__}: {exc}"
        return reason if checked.get("sub") == WARM_UP_SUBJECT else "claims check: claims changed"

    def _parsed_with_key(self, token: str, key: PyJWK) -> tuple[dict[str, Any], dict[str, Any]]:
        """``unverified_parts`` and the key lookup, as ``verify_token`` runs them before ``decode``."""
        parsed = unverified_parts(token)
        self._cached_signing_key(parsed[0])
        return parsed

    # Both run on the event loop only, so the dict needs no lock.
    def _remember(self, token: str, claims: dict[str, Any]) -> None:
        if self.remember <= 0:
            return
        until = min(int(claims["exp"]) + self.settings.leeway_s, self.clock() + self.settings.jwks_cache_s)
        self._verified[token] = (claims, until)
        while len(self._verified) > self.remember:
            self._verified.popitem(last=False)

    def decode(self, token: str, key: PyJWK | None = None,
               parsed: tuple[dict[str, Any], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Verify ``token``; raises TokenRejectedError with the reason. Blocking (JWKS fetch)
        unless ``key``, its signing key from the cached key set, is given; ``parsed`` is
        ``unverified_parts(token)`` when the caller has it."""
        s = self.settings
        header, unverified = parsed or unverified_parts(token)
        alg = header.get("alg")
        if alg not in s.algorithms:
            raise TokenRejectedError(f"algorithm {alg!r} is not allowed")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRejectedError("token has no kid")
        for claim in TIME_CLAIMS:
            # The edge's rule too: JSON numbers only (PyJWT would take "9999999999").
            if claim in unverified and not _is_number(unverified[claim]):
                raise TokenRejectedError(f"claim {claim} is not a number")
        try:
            if key is None:
                key = self.jwks.get_signing_key(kid)
        except KeySetUnavailableError:
            raise
        except jwt.PyJWKClientConnectionError as exc:  # a client without our fetch (tests)
            log.error("JWKS fetch failed: %s", exc)
            raise KeySetUnavailableError("signing keys unavailable", FIRST_BACKOFF_S) from None
        except jwt.PyJWKClientError:
            raise TokenRejectedError(f"unknown kid {kid[:64]!r}") from None
        except (jwt.PyJWTError, ValueError, OSError) as exc:
            log.error("JWKS unusable: %s: %s", type(exc).__name__, exc)
            raise KeySetUnavailableError("signing keys unusable", FIRST_BACKOFF_S) from None
        if (weak := weak_key_reason(key, alg)) is not None:
            raise TokenRejectedError(weak)
        try:
            return self._jwt_decode(token, key, s.algorithms)
        except jwt.ExpiredSignatureError:
            raise TokenRejectedError("token expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejectedError("token not yet valid") from None
        except jwt.InvalidIssuerError:
            raise TokenRejectedError("wrong issuer") from None
        except jwt.InvalidAudienceError:
            raise TokenRejectedError("wrong audience") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRejectedError(f"missing claim {exc.claim}") from None
        except jwt.InvalidAlgorithmError:
            raise TokenRejectedError("algorithm does not match the key") from None
        except jwt.InvalidSignatureError:
            raise TokenRejectedError("bad signature") from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:  # also a key cryptography cannot use
            raise TokenRejectedError(f"invalid token ({type(exc).__name__})") from None

    def _jwt_decode(self, token: str, key: Any, algorithms: tuple[str, ...] | list[str]) -> dict[str, Any]:
        """PyJWT's check of the signature and the claims, with the origin's options."""
        s = self.settings
        claims: dict[str, Any] = JWT.decode(token, key=key, algorithms=list(algorithms), audience=s.audience,
                                            issuer=s.issuer, leeway=s.leeway_s, options=DECODE_OPTIONS)
        return claims


def _compact(header: dict[str, Any], claims: dict[str, Any], signature: bytes) -> str:
    """A JWS in compact form: header, claims and signature, base64url."""
    parts = [json.dumps(header).encode(), json.dumps(claims).encode(), signature]
    return ".".join(base64.urlsafe_b64encode(part).rstrip(b"=").decode() for part in parts)
