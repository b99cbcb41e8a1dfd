"""Bearer token verification at the edge: PyJWT and cryptography, nothing hand-written.

``KeySet`` holds the issuer's signing keys: the key set embedded at deploy time (no
request waits for a download on a cold start), replaced by a fresh download from the
JWKS URL when a token names a ``kid`` it does not hold. Downloads are bounded so that
no flood of made-up ``kid`` values can hammer the issuer or stall the edge:

- at most one download per ``cooldown_s`` after a successful one (an unknown ``kid``
  inside the cooldown is just an unknown ``kid``: 401);
- after a failed one, none until its backoff (1 s, doubling, at most ``max_backoff_s``)
  has passed; a token whose key is not in hand meanwhile gets 503 with ``Retry-After``
  (the edge cannot tell a forged token from a rotated key without the key set);
- each download has a hard wall-clock bound (``fetch_timeout_s``: DNS, connect, TLS and
  the read together), follows no redirect and reads at most ``MAX_KEY_SET_BYTES``.

A successful download replaces the whole set, so a key the issuer withdrew stops being
accepted at the next download.

``VerifiedTokenCache`` wraps ``TokenVerifier.verify`` with a bounded memory of the tokens it
verified, each until its ``exp`` (its docstring has the bounds and the key-rotation trade-off).

``TokenVerifier.verify`` checks, in order: the token's form (PyJWT); ``alg`` in the
allow-list (asymmetric algorithms only, before any key lookup); a ``kid``; ``exp``
(required), ``nbf`` and ``iat`` (when present) are JSON numbers of seconds between the
epoch and the end of year 9999 (``is_time``: never strings, booleans, NaN, infinities,
or integers too big for a float); the key, bound to its algorithm (the JWK's ``alg`` when
it states one, else its type and curve), RSA at least 2048 bits, EC on the curve the
algorithm names; then PyJWT's signature check and ``exp``/``nbf``/``iat``/``iss``/``aud``
(a string or an array, any of ``audiences``) with ``leeway_s``.

Its contract: the verified claims, ``TokenRejectedError`` (401) or, for key-set trouble
only, ``KeySetUnavailableError`` (503); no other exception leaves ``verify``, whatever the
token holds (an unexpected one is logged and becomes a 401), so that no viewer can turn
a token into a 5xx.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import time
import urllib.error
import urllib.request

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt import PyJWK, PyJWS, PyJWT

from .constants import ASYMMETRIC_ALGORITHMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

MIN_RSA_KEY_BITS = 2048
MAX_KEY_SET_BYTES = 512 * 1024
FIRST_BACKOFF_S = 1.0
TIME_CLAIMS = ("exp", "nbf", "iat")
# The range of a time claim: NumericDate seconds (RFC 7519 2) from the epoch to the end of
# year 9999. Beyond it a number is no date any issuer writes, and a huge integer (10**400)
# would overflow the float arithmetic of every later check.
MAX_TIME_S = 253_402_300_799
_CURVES = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}
_UNVERIFIED: Any = {"verify_signature": False}
_BASE64URL = re.compile(rb"[A-Za-z0-9_-]*")


class StrictSegmentJWS(PyJWS):
    """PyJWT's JWS with its strict segment check (``_decode_base64url_segment``: at most two
    ``=``, only on a whole quantum, the base64url alphabet, canonical trailing bits) done
    by one compiled pattern instead of a Python loop over every character, which was
    most of a real token's verification at the edge (measured: ``bench/edge_gate_bench.py``).
    Same verdicts and bytes as PyJWT's own (a property test holds the two together).

    ``verify`` reads a token twice (its header and claims unverified, to pick the key, then
    PyJWT's verified decode): the segments of the last token loaded are kept for the next
    load of the same string only, so the second pass does not decode them again."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._last: tuple[str | bytes, tuple[bytes, bytes, dict[str, Any], bytes]] | None = None

    def _load(self, jwt: str | bytes) -> tuple[bytes, bytes, dict[str, Any], bytes]:
        last, self._last = self._last, None
        if last is not None and type(last[0]) is type(jwt) and last[0] == jwt:
            return last[1]
        loaded = super()._load(jwt)
        self._last = (jwt, loaded)
        return loaded

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


class OnceParsedJWT(PyJWT):
    """PyJWT's JWT API whose claims JSON, like ``StrictSegmentJWS``'s segments, is kept
    from one decode for the next decode of the same payload bytes only (``verify``'s
    verified pass after its unverified one). ``_decode_payload`` is PyJWT's hook for it."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._last: tuple[bytes, Any] | None = None

    def _decode_payload(self, decoded: dict[str, Any]) -> Any:
        last, self._last = self._last, None
        raw = decoded["payload"]
        if last is not None and type(raw) is bytes and last[0] == raw:
            return last[1]
        payload = super()._decode_payload(decoded)
        self._last = (raw, payload)
        return payload


def strict_segment_jwt() -> PyJWT:
    """PyJWT's JWT API (``OnceParsedJWT``) on ``StrictSegmentJWS`` (PyJWT keeps its JWS in
    ``_jws``; the requirements pin PyJWT, and a test checks the verifier decodes through it)."""
    api = OnceParsedJWT()
    api._jws = StrictSegmentJWS()
    return api


JWT = strict_segment_jwt()


class TokenRejectedError(Exception):
    """Why a token is refused (401): a short reason, never the token."""


class KeySetUnavailableError(Exception):
    """The key set a token needs cannot be fetched now (503, ``Retry-After``)."""

    def __init__(self, reason: str, retry_after_s: float):
        super().__init__(reason)
        self.retry_after_s = retry_after_s


class UnusableKeySetError(Exception):
    """A download failed or did not hold a usable key set."""


class SigningKey:
    """A key a token may name: PyJWT's key and the algorithm its JWK states (or None)."""

    __slots__ = ("jwk", "declared_alg")

    def __init__(self, jwk: PyJWK, declared_alg: str | None):
        self.jwk = jwk
        self.declared_alg = declared_alg


def parse_key_set(document: Any) -> dict[str, SigningKey]:
    """``kid`` -> key for a JWKS document's signing keys (``use`` ``sig`` or unstated; keys
    PyJWT cannot load are skipped); ``UnusableKeySetError`` when none is usable."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise UnusableKeySetError("not a JWKS document (an object with a keys array)")
    keys: dict[str, SigningKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict):
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str) or not kid or entry.get("use", "sig") != "sig":
            continue
        declared = entry.get("alg")
        if declared is not None and declared not in ASYMMETRIC_ALGORITHMS:
            continue  # an HMAC secret or "none" is never a key a token may name
        try:
            keys[kid] = SigningKey(PyJWK(entry), declared)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError, NotImplementedError):
            continue
    if not keys:
        raise UnusableKeySetError("no usable signing key with a kid")
    return keys


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an answer, not a key set


def download(url: str, timeout_s: float, user_agent: str = "mcp-edge-gate") -> bytes:
    """The JWKS document's bytes within ``timeout_s`` of wall-clock time, or
    ``UnusableKeySetError``. The download runs in a daemon thread, so that DNS (which no
    socket timeout bounds) cannot hold the request longer."""
    outcome: list[bytes | BaseException] = []

    def run() -> None:
        try:
            opener = urllib.request.build_opener(_NoRedirect)
            request = urllib.request.Request(url, headers={"User-Agent": user_agent, "Accept": "application/json"})
            with opener.open(request, timeout=timeout_s) as response:
                outcome.append(response.read(MAX_KEY_SET_BYTES + 1))
        except BaseException as exc:  # handed to the waiting request
            outcome.append(exc)

    worker = threading.Thread(target=run, name="jwks-download", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        raise UnusableKeySetError(f"no answer within {timeout_s:g} s")
    result = outcome[0]
    if isinstance(result, BaseException):
        raise UnusableKeySetError(f"fetch failed: {type(result).__name__}: {str(result)[:200]}")
    if len(result) > MAX_KEY_SET_BYTES:
        raise UnusableKeySetError(f"answer larger than {MAX_KEY_SET_BYTES} bytes")
    return result


class KeySet:
    """The issuer's signing keys, embedded and refreshed as the module docstring says."""

    def __init__(self, embedded: Any, url: str, *, cooldown_s: float, max_backoff_s: float,
                 fetch_timeout_s: float, clock: Callable[[], float] = time.monotonic,
                 fetch: Callable[[str, float], bytes] = download):
        try:
            self.keys = parse_key_set(embedded)
        except UnusableKeySetError:
            self.keys = {}  # nothing embedded (the issuer was unreachable at deploy): the first token fetches
        self.url = url
        self.cooldown_s = cooldown_s
        self.max_backoff_s = max(max_backoff_s, FIRST_BACKOFF_S)
        self.fetch_timeout_s = fetch_timeout_s
        self.clock = clock
        self.fetch = fetch
        self.fetches = 0
        self.failures = 0  # consecutive failed downloads
        self._next_fetch_at = float("-inf")

    def key(self, kid: str) -> SigningKey | None:
        """The key for ``kid`` (downloading the set when allowed); None when the issuer
        has none; ``KeySetUnavailableError`` when it cannot be asked now."""
        found = self.keys.get(kid)
        if found is not None:
            return found
        now = self.clock()
        if now < self._next_fetch_at:
            if self.failures:
                raise KeySetUnavailableError(f"signing keys unavailable (after {self.failures} failed "
                                             f"fetch(es))", self._next_fetch_at - now)
            return None  # cooling down after a successful download
        self.fetches += 1
        try:
            self.keys = parse_key_set(json.loads(self.fetch(self.url, self.fetch_timeout_s)))
        except Exception as exc:  # whatever the answer held, it is key-set trouble: 503, never a 500
            self.failures += 1
            backoff = min(FIRST_BACKOFF_S * 2 ** (self.failures - 1), self.max_backoff_s)
            self._next_fetch_at = self.clock() + backoff
            print(f"edge-gate: JWKS {self.url} unusable ({str(exc)[:200]}); tokens needing it get 503 "
                  f"for {backoff:.0f} s")
            raise KeySetUnavailableError(f"signing keys unavailable: {str(exc)[:120]}", backoff) from None
        self.failures = 0
        self._next_fetch_at = self.clock() + self.cooldown_s
        return self.keys.get(kid)


def is_time(value: Any) -> bool:
    """A time claim's value: a JSON number (not a string, not a boolean) that is finite
    and between 0 and ``MAX_TIME_S``. Compared without converting to float, which a huge
    integer cannot survive (``OverflowError``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return 0 <= value <= MAX_TIME_S


def key_mismatch(key: SigningKey, alg: str) -> str | None:
    """Why ``key`` must not verify ``alg`` tokens, or None."""
    if key.declared_alg is not None and key.declared_alg != alg:
        return f"key is for {key.declared_alg}, token says {alg}"
    material = key.jwk.key
    if alg.startswith(("RS", "PS")):
        if not isinstance(material, rsa.RSAPublicKey):
            return f"{alg} needs an RSA key"
        if material.key_size < MIN_RSA_KEY_BITS:
            return f"signing key is {material.key_size}-bit RSA (at least {MIN_RSA_KEY_BITS})"
        return None
    curve = _CURVES.get(alg)
    if curve is not None:
        if not (isinstance(material, ec.EllipticCurvePublicKey) and isinstance(material.curve, curve)):
            return f"signing key is not on {alg}'s curve"
        return None
    if alg == "EdDSA" and isinstance(material, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return None
    return f"key cannot verify {alg}"


class TokenVerifier:
    """Verifies bearer tokens against ``key_set``; ``verify`` returns the claims."""

    def __init__(self, key_set: KeySet, *, issuer: str, audiences: Iterable[str], algorithms: Iterable[str],
                 leeway_s: float):
        self.key_set = key_set
        self.issuer = issuer
        self.audiences = list(audiences)
        self.algorithms = frozenset(algorithms) & frozenset(ASYMMETRIC_ALGORITHMS)
        self.leeway_s = leeway_s
        self.options: Any = {"require": ["exp", "iss", "aud"], "verify_nbf": True}

    def verify(self, token: str) -> dict[str, Any]:
        """The verified claims; ``TokenRejectedError`` or ``KeySetUnavailableError``, and
        no other exception (the module docstring's contract)."""
        try:
            return self._verify(token)
        except (TokenRejectedError, KeySetUnavailableError):
            raise
        except Exception as exc:  # a case no check above foresaw: refused, and said in the log
            print(f"edge-gate: token refused on an unexpected {type(exc).__name__}: {str(exc)[:200]}")
            raise TokenRejectedError(f"invalid token ({type(exc).__name__})") from None

    def _verify(self, token: str) -> dict[str, Any]:
        if not isinstance(token, str):
            raise TokenRejectedError("malformed token")
        try:
            parts = JWT.decode_complete(token, options=_UNVERIFIED)
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError, OverflowError):
            raise TokenRejectedError("malformed token") from None
        header: Mapping[str, Any] = parts["header"]
        claims: Mapping[str, Any] = parts["payload"]
        alg = header.get("alg")
        if not isinstance(alg, str):
            raise TokenRejectedError(f"algorithm is a {type(alg).__name__}, not a string")
        if alg not in self.algorithms:
            raise TokenRejectedError(f"algorithm {alg[:16]!r} is not allowed")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRejectedError("token has no kid")
        if "exp" not in claims:
            raise TokenRejectedError("missing claim exp")
        for claim in TIME_CLAIMS:
            if claim in claims and not is_time(claims[claim]):
                raise TokenRejectedError(f"claim {claim} is not a number of seconds from 1970 to 9999")
        key = self.key_set.key(kid)
        if key is None:
            raise TokenRejectedError(f"unknown kid {kid[:64]!r}")
        if (mismatch := key_mismatch(key, alg)) is not None:
            raise TokenRejectedError(mismatch)
        try:
            verified: dict[str, Any] = JWT.decode(
                token, key=key.jwk.key, algorithms=[alg], audience=self.audiences, issuer=self.issuer,
                leeway=self.leeway_s, options=self.options)
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
        except jwt.InvalidSignatureError:
            raise TokenRejectedError("bad signature") from None
        except (jwt.PyJWTError, ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise TokenRejectedError(f"invalid token ({type(exc).__name__})") from None
        return verified


class VerifiedTokenCache:
    """``verifier.verify`` with a bounded memory of the tokens it verified, by the exact
    token string, each until its validity window closes: a hit skips the signature check
    and returns a copy of the same claims. The window is PyJWT's own with the verifier's
    ``leeway_s``: from ``int(nbf)``/``int(iat)`` - leeway (when present) to ``int(exp)`` +
    leeway, checked on every hit, so a cached token is never served outside it.

    - Only a successful verification is remembered. A refusal (401) or an unavailable key
      set (503) is raised as it is and leaves nothing behind: no token can pass from the
      cache that did not pass the verifier, and no request can plant a failure that a
      later holder of a good token would be refused by.
    - At most ``max_entries``; a new token beyond that pushes out the oldest one (a flood
      of distinct valid tokens costs their senders a verification each, as without the
      cache).
    - Key-set rotation: an entry remembers the key set it was verified against; once a
      download replaced the set (``KeySet.keys``), every entry is verified afresh on its
      next use, so a withdrawn key stops passing cached tokens as soon as the edge learns
      of the new set, exactly when it stops passing new ones. The trade-off: the edge
      learns of a withdrawal only at its next download (a token naming an unknown
      ``kid``), with or without this cache; a token whose key was withdrawn meanwhile
      passes until then, never past its ``exp`` (+ leeway).
    """

    def __init__(self, verifier: TokenVerifier, *, max_entries: int = 512, clock: Callable[[], float] = time.time):
        self.verifier = verifier
        self.max_entries = max_entries
        self.clock = clock  # PyJWT reads the wall clock (time.time) for exp/nbf/iat
        self._entries: dict[str, tuple[dict[str, Any], float, float, object]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def verify(self, token: str) -> dict[str, Any]:
        """The verified claims (a copy), as ``TokenVerifier.verify`` returns and raises them."""
        entry = self._entries.get(token)
        if entry is not None:
            claims, not_before, expires, keys = entry
            now = self.clock()
            if not_before <= now < expires and keys is self.verifier.key_set.keys:
                return dict(claims)
            del self._entries[token]
        claims = self.verifier.verify(token)
        # Read the set after verifying: a download during verify is the set the token passed.
        keys = self.verifier.key_set.keys
        if self.max_entries > 0:
            leeway = self.verifier.leeway_s
            starts = [int(claims[c]) for c in ("nbf", "iat") if c in claims]
            not_before = (max(starts) - leeway) if starts else float("-inf")
            expires = int(claims["exp"]) + leeway
            while len(self._entries) >= self.max_entries:
                del self._entries[next(iter(self._entries))]  # the oldest
            self._entries[token] = (dict(claims), not_before, expires, keys)
        return claims


def client_id_of(claims: Mapping[str, Any]) -> str:
    """The OAuth client a token was issued to: ``client_id`` (RFC 9068), else ``azp``."""
    for claim in ("client_id", "azp"):
        value = claims.get(claim)
        if isinstance(value, str) and value:
            return value
    return ""
