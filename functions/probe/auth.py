"""The probe's bearer token: OAuth 2.0 client credentials, cached until shortly before
it expires.

The client secret lives in AWS Secrets Manager (never in the schedule input or the
environment). It is read once per execution environment, and read again only when
the token endpoint rejects the client (the secret was rotated). The secret value is
the plain client secret, or a JSON object with a ``client_secret`` member.

The read is one signed request (``secrets_manager``: the standard library's HTTP and
botocore's signer, no boto3, whose import and client cost about 300 ms of a cold
invocation), and warm invocations never touch Secrets Manager.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from .errors import ProbeAuthError
from .secrets_manager import SecretReadError, get_secret_string
from .wire import ACCEPT_ENCODING, Deadline, ExchangeBudget, deadline_active, decoded_pieces

# Refresh this long before expiry, so a token never expires mid-probe or in flight.
REFRESH_MARGIN_S = 60.0
# Cache a token without expires_in (and without a readable JWT exp) this long at most.
UNKNOWN_LIFETIME_S = 60.0
# A token response is a few KB; the body is read (decompressed) up to this much.
MAX_TOKEN_RESPONSE_BYTES = 64 * 1024


def secrets_manager_reader(secret_id: str, environ: Mapping[str, str] | None = None,
                           parse: Callable[[str, str | None], str] | None = None,
                           what: str = "the probe client secret") -> Callable[[], str]:
    """A function that reads a secret from Secrets Manager, in the region and with the
    credentials ``environ`` names (the function's environment by default); by default
    parsed as the client secret (``parse_secret_value``)."""

    def read() -> str:
        try:
            value = get_secret_string(secret_id, environ, user_agent="mcp-edge-probe")
        except SecretReadError as exc:
            raise ProbeAuthError(f"cannot read {what} {secret_id!r} from Secrets Manager: {exc}") from None
        return (parse or parse_secret_value)(secret_id, value)

    return read


def parse_secret_value(secret_id: str, raw: str | None) -> str:
    if not raw:
        raise ProbeAuthError(f"probe client secret {secret_id!r} has no SecretString")
    text = raw.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            raise ProbeAuthError(f"probe client secret {secret_id!r} looks like JSON but does not parse") from None
        value = doc.get("client_secret") if isinstance(doc, dict) else None
        if not isinstance(value, str) or not value:
            raise ProbeAuthError(f"probe client secret {secret_id!r} is a JSON object without a client_secret string")
        return value
    return text


def _seconds(value: Any) -> float | None:
    """A JSON number as finite seconds; None for anything else (a bool, ``Infinity``, ``NaN``,
    an integer too large for a float)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def _jwt_exp(token: str) -> float | None:
    """The exp claim of a JWT, read without verification (only to time the cache)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):  # not base64 or JSON, or nested deeper than the parser goes
        return None
    return _seconds(payload.get("exp")) if isinstance(payload, dict) else None


@dataclass
class _Cached:
    token: str
    refresh_at: float


class TokenSource:
    """Client-credentials tokens for one client, cached across invocations."""

    def __init__(
        self,
        *,
        token_url: str,
        client_id: str,
        read_client_secret: Callable[[], str],
        audience: str | None,
        http: httpx.Client,
        clock: Callable[[], float] = time.time,
    ):
        self.token_url = token_url
        self.client_id = client_id
        self._read_secret = read_client_secret
        self.audience = audience
        self._http = http
        self._clock = clock
        self._secret: str | None = None
        self._cached: _Cached | None = None
        self.fetches = 0  # token endpoint calls (for tests and logs)

    def token(self, deadline: Deadline) -> str:
        cached = self._cached
        if cached is not None and self._clock() < cached.refresh_at:
            return cached.token
        return self._fetch(deadline, secret_may_be_stale=True)

    def invalidate(self) -> None:
        """Forget the cached token (the target refused it)."""
        self._cached = None

    def _fetch(self, deadline: Deadline, secret_may_be_stale: bool) -> str:
        if self._secret is None:
            self._secret = self._read_secret()
            secret_may_be_stale = False
        form = {"grant_type": "client_credentials"}
        if self.audience:
            form["audience"] = self.audience  # Auth0 and others
            if urlsplit(self.audience).scheme in ("https", "http"):
                form["resource"] = self.audience  # RFC 8707, which MCP clients must send
        # client_secret_basic, the method RFC 6749 requires every server to support;
        # id and secret are form-encoded first (RFC 6749 section 2.3.1).
        basic = base64.b64encode(f"{quote(self.client_id, safe='')}:{quote(self._secret, safe='')}".encode()).decode()
        # Within the probe's deadline (bound in the transport) and a byte budget: the
        # token endpoint is a server like any other.
        try:
            with deadline_active(deadline), self._http.stream(
                "POST",
                self.token_url,
                data=form,
                headers={"authorization": f"Basic {basic}", "accept": "application/json",
                         "accept-encoding": ACCEPT_ENCODING},
                timeout=deadline.timeout_for("fetching a token"),
            ) as response:
                status = response.status_code
                body = b"".join(decoded_pieces(response, deadline, ExchangeBudget(MAX_TOKEN_RESPONSE_BYTES), "token"))
        except httpx.HTTPError as exc:
            raise ProbeAuthError(
                f"token endpoint {self.token_url} failed: {type(exc).__name__}: {exc or 'timed out'}"
            ) from None
        self.fetches += 1
        doc = _json_or_none(body)
        error_code = doc.get("error") if isinstance(doc, dict) else None
        if status in (400, 401) and secret_may_be_stale and error_code == "invalid_client":
            # The secret may have been rotated since this environment read it.
            self._secret = None
            return self._fetch(deadline, secret_may_be_stale=False)
        if status != 200:
            raise ProbeAuthError(
                f"token endpoint {self.token_url} answered HTTP {status}: {_error_text(doc, body)}", status=status)
        if doc is None:
            raise ProbeAuthError(f"token endpoint {self.token_url} answered 200 with a body that is not JSON")
        token = doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise ProbeAuthError(f"token endpoint {self.token_url} answered without an access_token")
        token_type = doc.get("token_type", "Bearer")
        if not isinstance(token_type, str) or token_type.lower() != "bearer":
            raise ProbeAuthError(f"token endpoint {self.token_url} issued a {token_type!r} token, not a Bearer token")
        now = self._clock()
        expires_in = _seconds(doc.get("expires_in"))
        if expires_in is not None and expires_in > 0:
            expires_at = now + expires_in
        else:
            expires_at = _jwt_exp(token) or now + UNKNOWN_LIFETIME_S
        margin = min(REFRESH_MARGIN_S, (expires_at - now) / 2)
        self._cached = _Cached(token, refresh_at=expires_at - margin)
        return token


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None


def _error_text(doc: Any, body: bytes) -> str:
    if isinstance(doc, dict) and "error" in doc:
        description = doc.get("error_description")
        return f"{doc['error']}" + (f" ({str(description)[:200]})" if description else "")
    return repr(body[:200].decode("utf-8", errors="replace"))
