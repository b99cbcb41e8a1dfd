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
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import jwt
from jwt import PyJWKClient
from mcp.server.auth.provider import AccessToken

from .settings import Settings

log = logging.getLogger("mcp_server.auth")
VERIFIED_TOKENS_REMEMBERED = 1024


class TokenRejectedError(Exception):
    """Why a token is refused: a short reason for logs and tests, never the token."""


def make_jwks_client(settings: Settings) -> PyJWKClient:
    return PyJWKClient(
        settings.jwks_url,
        cache_jwk_set=True,
        lifespan=settings.jwks_cache_s,
        cooldown_duration=settings.jwks_refresh_cooldown_s,
        timeout=settings.jwks_timeout_s,
        headers={"User-Agent": f"{settings.server_name}-mcp-origin"},
    )


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


class JwtVerifier:
    """The SDK's ``TokenVerifier``: an ``AccessToken`` for a valid token, else None."""

    def __init__(self, settings: Settings, jwks: PyJWKClient, on_reject: Callable[[str], None] | None = None,
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
                claims = await anyio.to_thread.run_sync(self.decode, token)
            except TokenRejectedError as exc:
                if self.on_reject is not None:
                    self.on_reject(str(exc))
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

    # Both run on the event loop only, so the dict needs no lock.
    def _remember(self, token: str, claims: dict[str, Any]) -> None:
        if self.remember <= 0:
            return
        until = min(int(claims["exp"]) + self.settings.leeway_s, self.clock() + self.settings.jwks_cache_s)
        self._verified[token] = (claims, until)
        while len(self._verified) > self.remember:
            self._verified.popitem(last=False)

    def decode(self, token: str) -> dict[str, Any]:
        """Verify ``token``; raises TokenRejectedError with the reason. Blocking (JWKS fetch)."""
        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejectedError("malformed token") from None
        alg = header.get("alg")
        if alg not in s.algorithms:
            raise TokenRejectedError(f"algorithm {alg!r} is not allowed")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRejectedError("token has no kid")
        try:
            key = self.jwks.get_signing_key(kid)
        except jwt.PyJWKClientConnectionError as exc:
            log.error("JWKS fetch failed: %s", exc)
            raise TokenRejectedError("signing keys unavailable") from None
        except jwt.PyJWKClientError:
            raise TokenRejectedError(f"unknown kid {kid[:64]!r}") from None
        except jwt.PyJWTError as exc:
            log.error("JWKS unusable: %s", exc)
            raise TokenRejectedError("signing keys unusable") from None
        try:
            return jwt.decode(
                token,
                key=key,
                algorithms=list(s.algorithms),
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.leeway_s,
                options={"require": ["exp", "iss", "aud"], "verify_nbf": True},
            )
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
        except jwt.PyJWTError as exc:
            raise TokenRejectedError(f"invalid token ({type(exc).__name__})") from None
