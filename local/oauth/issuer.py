"""The development OAuth 2.1 authorization server of the local topology.

It stands in for the stack's authorization server (``authIssuer``) on loopback, and is
complete enough for the MCP clients people run (the official SDKs' OAuth providers, the
Inspector, IDEs, agents) to authorize on their own, starting from the resource's 401:

- ``GET <issuer>/.well-known/oauth-authorization-server`` (RFC 8414) and
  ``.../openid-configuration`` (OpenID Connect Discovery): the metadata, with
  ``client_id_metadata_document_supported`` and ``authorization_response_iss_parameter_supported``.
- ``GET <authorize path>``: authorization code with PKCE (S256 only), exact redirect URI
  matching (loopback URIs on any port, RFC 8252), ``state`` and ``iss`` (RFC 9207) in the
  redirect, resource indicators (RFC 8707). A request whose redirect URI is on loopback
  (RFC 8252: 127.0.0.1, [::1], localhost) is approved without a login page: the response is
  the redirect carrying the code, so a headless client completes the flow by following it.
  Any other redirect URI (an https site, a private-use scheme), and every request when
  ``consent`` is on, gets a page showing the client, the redirect host, the scopes and the
  resource, and the decision is posted back: a web page the developer happens to visit can
  register a client, but only the developer can send a code to a site.
- ``POST <token path>``: ``authorization_code`` (codes live ``code_lifetime_s``, work once;
  a second use revokes what the first issued), ``refresh_token`` (rotated on every use; a
  rotated token used again revokes its whole family), ``client_credentials`` (the probes'
  and the developer's static clients).
- ``POST <register path>``: dynamic client registration (RFC 7591; deprecated by MCP
  2026-07-28 and still what many clients do).
- Client ID metadata documents: a ``client_id`` that is an https URL (for local development
  also an http URL on loopback) without userinfo or dot segments is fetched from the address
  its host resolved to, once checked (a global address or loopback: never 0.0.0.0, private,
  link-local or multicast ones), bounded in time and size, checked, and cached as its
  ``Cache-Control`` says. The authorization endpoint answers without CORS, and the token
  endpoint tells a cross-origin caller no more than that a document could not be used, so a
  web page cannot use the issuer to probe the developer's network.
- ``GET <jwks path>``, ``GET /healthz``.

Tokens are RFC 9068 access-token JWTs (RS256; ``iss``, ``sub``, ``client_id``, ``aud`` = the
requested resource, ``iat``, ``nbf``, ``exp``, ``jti``, ``scope``). The key pair is generated
when the local run starts and kept in the run directory (mode 0600); the static clients get
random secrets at the same time. Every state lives in this one process's memory.

Bad input gets the RFC's error (``invalid_request``, ``invalid_client``, ``invalid_grant``,
``unauthorized_client``, ``unsupported_grant_type``, ``invalid_scope``, ``invalid_target``,
``invalid_client_metadata``, ``invalid_redirect_uri``) with an ``error_description`` naming
what is wrong and what is accepted; never a 500.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import html
import ipaddress
import json
import os
import secrets
import socket
import ssl
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import anyio
import certifi
import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from local.files import write_private
from local.oauth.rules import (
    GRANT_TYPES,
    OFFLINE_ACCESS,
    TOKEN_AUTH_METHODS,
    ClientRecord,
    OAuthError,
    bad_request,
    cache_seconds,
    check_challenge,
    check_metadata_document_url,
    check_resources,
    check_scope,
    check_verifier,
    choose_redirect_uri,
    client_from_metadata,
    is_fetchable_address,
    is_loopback_redirect,
    looks_like_url,
    metadata_document_client,
    parse_scope,
)

__all__ = ["ALGORITHM", "SETTINGS_ENV", "IssuerSettings", "OAuthError", "authenticate_client", "create_app",
           "generate_key_file", "load_private_key", "new_client_secret", "public_jwk", "request_token", "sign_token"]

ALGORITHM = "RS256"
DEFAULT_TOKEN_LIFETIME_S = 3600
MAX_FORM_BYTES = 16 * 1024
MAX_FORM_FIELDS = 1000  # parameters of one request (a form or a query), as Starlette's default
MAX_REGISTERED_CLIENTS = 1000
MAX_PENDING = 1000
SETTINGS_ENV = "MCPEDGE_LOCAL_ISSUER"
DEV_USER = "local-developer"  # the resource owner every local authorization is for


@dataclass(frozen=True)
class IssuerSettings:
    issuer: str  # the iss claim, e.g. http://127.0.0.1:8100/
    audience: str  # the aud claim: the local edge's MCP URL (the one resource served)
    token_path: str  # e.g. /oauth/token
    jwks_path: str  # e.g. /.well-known/jwks.json
    key_file: str  # PEM private key (PKCS#8)
    clients: Mapping[str, str] = field(repr=False)  # static confidential clients: id -> secret
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S
    scopes: tuple[str, ...] = ("mcp",)  # every scope the issuer grants
    default_scopes: tuple[str, ...] = ("mcp",)  # granted when a request names none
    authorize_path: str = "/oauth/authorize"
    register_path: str = "/oauth/register"
    consent: bool = False  # a consent page for every request, not only for redirect URIs off loopback
    code_lifetime_s: int = 60
    refresh_lifetime_s: int = 86400
    metadata_timeout_s: float = 5.0  # fetching a client ID metadata document
    metadata_max_bytes: int = 5 * 1024
    trusted_ca_file: str | None = None  # extra CA certificates for https metadata documents

    def __post_init__(self) -> None:
        # JSON gives lists: keep the tuples the type says.
        for name in ("scopes", "default_scopes"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def base_url(self) -> str:
        parts = urlsplit(self.issuer)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token_url(self) -> str:
        return self.base_url + self.token_path

    @property
    def jwks_url(self) -> str:
        return self.base_url + self.jwks_path

    def to_json(self) -> str:
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}
                          | {"clients": dict(self.clients)})

    @classmethod
    def from_json(cls, text: str) -> IssuerSettings:
        return cls(**json.loads(text))

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 / OpenID Connect Discovery metadata."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.base_url + self.authorize_path,
            "token_endpoint": self.token_url,
            "registration_endpoint": self.base_url + self.register_path,
            "jwks_uri": self.jwks_url,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": list(GRANT_TYPES),
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(TOKEN_AUTH_METHODS),
            "scopes_supported": [*self.scopes, OFFLINE_ACCESS],
            "client_id_metadata_document_supported": True,
            "authorization_response_iss_parameter_supported": True,
            # OpenID Connect Discovery requires these two.
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
        }


def generate_key_file(path: Path) -> None:
    """A fresh RSA key, written where only this user can read it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_private(path, pem)


def new_client_secret() -> str:
    return secrets.token_urlsafe(32)


def load_private_key(path: str | Path) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{path} does not hold an RSA private key")
    return key


def public_jwk(key: rsa.RSAPrivateKey) -> dict[str, str]:
    """The public key as a JWK, its ``kid`` the RFC 7638 thumbprint."""
    jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    required = {k: jwk[k] for k in ("e", "kty", "n")}
    thumbprint = hashlib.sha256(json.dumps(required, separators=(",", ":"), sort_keys=True).encode()).digest()
    kid = base64.urlsafe_b64encode(thumbprint).rstrip(b"=").decode()
    return {"kty": "RSA", "use": "sig", "alg": ALGORITHM, "kid": kid, "n": jwk["n"], "e": jwk["e"]}


def sign_token(
    key: rsa.RSAPrivateKey,
    *,
    issuer: str,
    audience: str,
    client_id: str,
    lifetime_s: int,
    scope: str,
    now: float | None = None,
    subject: str | None = None,
) -> str:
    """An RFC 9068 access token. ``lifetime_s`` may be negative (an already expired token, for tests)."""
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": issuer,
        "sub": subject or client_id,
        "client_id": client_id,
        "aud": audience,
        "iat": issued,
        "nbf": issued,
        "exp": issued + lifetime_s,
        "jti": uuid.uuid4().hex,
        "scope": scope,
    }
    headers = {"kid": public_jwk(key)["kid"], "typ": "at+jwt"}
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers=headers)


def error_response(exc: OAuthError) -> JSONResponse:
    headers = {"cache-control": "no-store"}
    if exc.status == 401:
        headers["www-authenticate"] = 'Basic realm="local-dev-issuer"'
    return JSONResponse({"error": exc.error, "error_description": exc.description}, status_code=exc.status,
                        headers=headers)


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise OAuthError(401, "invalid_client", "the Basic credentials are not base64 of id:secret") from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise OAuthError(401, "invalid_client", "the Basic credentials are not base64 of id:secret")
    # RFC 6749 section 2.3.1: id and secret are form-encoded before Basic encoding.
    return unquote(client_id.replace("+", " ")), unquote(secret.replace("+", " "))


def presented_credentials(form: Mapping[str, str], authorization: str | None) -> tuple[str | None, str | None, bool]:
    """(client id, secret, whether Basic was used) from a token request."""
    basic = _basic_credentials(authorization) if authorization else None
    if basic and form.get("client_secret"):
        raise OAuthError(400, "invalid_request", "use one client authentication method, not Basic and form both")
    if basic:
        if form.get("client_id") and form["client_id"] != basic[0]:
            raise OAuthError(400, "invalid_request", "client_id in the form differs from the Basic credentials")
        return basic[0], basic[1], True
    return form.get("client_id") or None, form.get("client_secret") or None, False


def _secret_matches(expected: str | None, presented: str) -> bool:
    # Compare even for unknown clients, so timing does not tell which ids exist.
    return hmac.compare_digest((expected or "\0").encode(), presented.encode()) and expected is not None


def authenticate_client(clients: Mapping[str, str], form: Mapping[str, str], authorization: str | None) -> str:
    """The client id, when the request carries one static client's secret; else OAuthError."""
    client_id, secret, _ = presented_credentials(form, authorization)
    if not client_id or not secret:
        raise OAuthError(401, "invalid_client", "client authentication required (HTTP Basic or client_id/client_secret)")
    if not _secret_matches(clients.get(client_id), secret):
        raise OAuthError(401, "invalid_client", "unknown client or wrong secret")
    return client_id


@dataclass
class CodeGrant:
    client_id: str
    redirect_uri: str
    redirect_uri_sent: bool  # the authorization request named it (so the token request must too)
    challenge: str
    scopes: tuple[str, ...]
    resource: str
    expires_at: float
    family: str  # what this code's tokens share, to revoke them together
    used: bool = False


@dataclass
class RefreshGrant:
    client_id: str
    scopes: tuple[str, ...]
    resource: str
    expires_at: float
    family: str
    used: bool = False


GrantT = TypeVar("GrantT", CodeGrant, RefreshGrant)


@dataclass
class PendingConsent:
    client: ClientRecord
    redirect_uri: str
    redirect_uri_sent: bool
    state: str | None
    challenge: str
    scopes: tuple[str, ...]
    resource: str
    expires_at: float


class ClientDirectory:
    """Every client the issuer knows: static ones, registered ones, and metadata documents
    (fetched on first use, kept as their Cache-Control says)."""

    def __init__(self, settings: IssuerSettings):
        self.settings = settings
        self.static = {cid: ClientRecord(client_id=cid, redirect_uris=(), grant_types=("client_credentials",),
                                         auth_method="client_secret_basic", secret=secret, source="static")
                       for cid, secret in settings.clients.items()}
        self.registered: OrderedDict[str, ClientRecord] = OrderedDict()
        self.documents: dict[str, tuple[ClientRecord, float]] = {}
        self._http: httpx.AsyncClient | None = None
        self.resolve: Callable[[str, int], Awaitable[list[str]]] = resolve_host

    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            context = ssl.create_default_context(cafile=certifi.where())
            if self.settings.trusted_ca_file:
                context.load_verify_locations(self.settings.trusted_ca_file)
            # No connection is kept: one made (and its certificate checked) for one host name
            # must not carry another name's request that resolves to the same address.
            self._http = httpx.AsyncClient(verify=context, follow_redirects=False, trust_env=False,
                                           timeout=self.settings.metadata_timeout_s,
                                           limits=httpx.Limits(max_keepalive_connections=0))
        return self._http

    def register(self, doc: Any) -> ClientRecord:
        client_id = "dcr-" + secrets.token_urlsafe(16)
        record = client_from_metadata(doc, client_id=client_id, source="registered",
                                      supported_scopes=self.settings.scopes, secret=new_client_secret())
        self.registered[client_id] = record
        while len(self.registered) > MAX_REGISTERED_CLIENTS:
            self.registered.popitem(last=False)
        return record

    async def find(self, client_id: str | None, status: int = 401, *, tell_why: bool = True) -> ClientRecord:
        """The client ``client_id`` names; ``invalid_client`` (with ``status``) when none. Without
        ``tell_why`` (a cross-origin caller) a metadata document's problem is not described:
        what a fetch found out about the developer's network is not for a web page to read."""
        if not client_id:
            raise OAuthError(status, "invalid_client", "client_id is required")
        record = self.static.get(client_id) or self.registered.get(client_id)
        if record is not None:
            return record
        if looks_like_url(client_id):
            try:
                check_metadata_document_url(client_id)
                return await self._document(client_id)
            except OAuthError as exc:
                description = exc.description if tell_why else (
                    "client_id names a client ID metadata document that cannot be used; the authorization "
                    "endpoint says why")
                raise OAuthError(status, exc.error, description) from None
        raise OAuthError(status, "invalid_client", f"unknown client_id {client_id[:200]!r}: register one "
                         f"({self.settings.base_url}{self.settings.register_path}) or use the https URL of a client ID metadata document")

    async def _document(self, url: str) -> ClientRecord:
        cached = self.documents.get(url)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        limit = self.settings.metadata_max_bytes
        try:
            with anyio.fail_after(self.settings.metadata_timeout_s):
                target, host_header, sni = await self._pinned(url)
                async with self.http().stream("GET", target, headers={"accept": "application/json", "host": host_header},
                                              extensions={"sni_hostname": sni}) as response:
                    if response.status_code != 200:
                        raise bad_request("invalid_client", f"the client metadata document {url[:200]} answered "
                                          f"HTTP {response.status_code} (redirects are not followed)")
                    body = b""
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > limit:
                            raise bad_request("invalid_client", f"the client metadata document {url[:200]} is over "
                                              f"{limit} bytes")
                    cache_control = response.headers.get("cache-control")
        except TimeoutError:
            raise bad_request("invalid_client", f"the client metadata document {url[:200]} did not arrive within "
                              f"{self.settings.metadata_timeout_s:g} s") from None
        except (httpx.HTTPError, OSError) as exc:
            raise bad_request("invalid_client", f"the client metadata document {url[:200]} could not be fetched "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            raise bad_request("invalid_client", f"the client metadata document {url[:200]} is not JSON") from None
        record = metadata_document_client(doc, url, self.settings.scopes)
        keep = cache_seconds(cache_control, default_s=300, max_s=3600)
        if keep:
            self.documents.pop(url, None)
            self.documents[url] = (record, time.monotonic() + keep)
            while len(self.documents) > MAX_REGISTERED_CLIENTS:
                del self.documents[next(iter(self.documents))]  # the oldest
        return record


    async def _pinned(self, url: str) -> tuple[str, str, str]:
        """The URL to connect to (the host resolved once, to an address the issuer may fetch
        from), the Host header and the TLS server name: what is checked is what is connected to,
        whatever the name resolves to a moment later (DNS rebinding)."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = await self.resolve(host, port)
        if not addresses:
            raise bad_request("invalid_client", f"the host of the client metadata document {url[:200]} has no address")
        for address in addresses:
            if not is_fetchable_address(address):
                raise bad_request("invalid_client", f"the host of the client metadata document {url[:200]} resolves "
                                  f"to {address}, a special-use address (only global addresses, and loopback for "
                                  "local development, are fetched)")
            if parts.scheme == "http" and not ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                raise bad_request("invalid_client", f"the client metadata document {url[:200]} is http: its host "
                                  f"must resolve to loopback only, not {address}")
        address = addresses[0]
        literal = f"[{address}]" if ":" in address else address
        target = f"{parts.scheme}://{literal}:{port}{parts.path}" + (f"?{parts.query}" if parts.query else "")
        return target, parts.netloc, host


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (itself for an IP literal), in the resolver's order."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise bad_request("invalid_client", f"the host {host[:200]!r} of the client metadata document could not "
                          f"be resolved ({exc})") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class Grants:
    """Authorization codes, refresh tokens and pending consents, in memory."""

    def __init__(self) -> None:
        self.codes: dict[str, CodeGrant] = {}
        self.refresh: dict[str, RefreshGrant] = {}
        self.pending: OrderedDict[str, PendingConsent] = OrderedDict()
        self.revoked_families: set[str] = set()

    def prune(self, now: float) -> None:
        for store in (self.codes, self.refresh, self.pending):
            for key in [k for k, v in store.items() if v.expires_at < now]:
                del store[key]  # type: ignore[attr-defined]

    def revoke(self, family: str) -> None:
        self.revoked_families.add(family)
        for key in [k for k, v in self.refresh.items() if v.family == family]:
            del self.refresh[key]


def _single(params: Sequence[tuple[str, str]], repeatable: tuple[str, ...] = ("resource",)) -> dict[str, str]:
    """Request parameters as a dict; a parameter sent twice is an error (RFC 6749 section 3.1)."""
    out: dict[str, str] = {}
    for key, value in params:
        if key in out and key not in repeatable:
            raise bad_request("invalid_request", f"parameter {key[:64]!r} is sent more than once")
        out[key] = value
    return out


async def _bounded_body(request: Request, content_type: str, error: str, what: str) -> bytes:
    """The request body, when it has ``content_type`` and at most MAX_FORM_BYTES."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != content_type:
        raise bad_request(error, f"the {what} must be {content_type}")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise bad_request(error, f"the {what} is over {MAX_FORM_BYTES} bytes")
    return body


def parse_form(body: bytes, what: str) -> list[tuple[str, str]]:
    """An application/x-www-form-urlencoded body (UTF-8) as its fields, at most MAX_FORM_FIELDS."""
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict",
                         max_num_fields=MAX_FORM_FIELDS)
    except UnicodeDecodeError:
        raise bad_request("invalid_request", f"the {what} is not UTF-8") from None
    except ValueError:
        raise bad_request("invalid_request", f"the {what} has more than {MAX_FORM_FIELDS} parameters") from None


def _only(params: Sequence[tuple[str, str]], name: str) -> str | None:
    """The one value of parameter ``name``; invalid_request when it is sent more than once."""
    values = [v for k, v in params if k == name]
    if len(values) > 1:
        raise bad_request("invalid_request", f"parameter {name!r} is sent more than once")
    return values[0] if values else None


class CORSExceptMiddleware(CORSMiddleware):
    """CORS for every path but ``without``: those answer as if CORS did not exist."""

    def __init__(self, app: ASGIApp, /, *, without: Collection[str], **options: Any):
        super().__init__(app, **options)
        self.without = frozenset(without)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.without:
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _redirect(uri: str, params: Mapping[str, str | None]) -> RedirectResponse:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return RedirectResponse(uri + ("&" if "?" in uri else "?") + query, status_code=302,
                            headers={"cache-control": "no-store"})


def create_app(settings: IssuerSettings | None = None) -> Starlette:
    """The issuer app; without settings, read from ``$MCPEDGE_LOCAL_ISSUER`` (JSON)."""
    if settings is None:
        raw = os.environ.get(SETTINGS_ENV)
        if not raw:
            raise RuntimeError(f"{SETTINGS_ENV} is not set: the local runner passes the issuer's settings in it")
        settings = IssuerSettings.from_json(raw)
    key = load_private_key(settings.key_file)
    jwks = {"keys": [public_jwk(key)]}
    metadata = settings.metadata()
    directory = ClientDirectory(settings)
    grants = Grants()
    s = settings

    def issue(client: ClientRecord, scopes: tuple[str, ...], resource: str, *, subject: str | None,
              family: str | None) -> dict[str, Any]:
        scope = " ".join(scopes)
        body: dict[str, Any] = {
            "access_token": sign_token(key, issuer=s.issuer, audience=resource, client_id=client.client_id,
                                       lifetime_s=s.token_lifetime_s, scope=scope, subject=subject),
            "token_type": "Bearer",
            "expires_in": s.token_lifetime_s,
            "scope": scope,
        }
        if family is not None and "refresh_token" in client.grant_types:
            refresh = secrets.token_urlsafe(32)
            grants.refresh[refresh] = RefreshGrant(client_id=client.client_id, scopes=scopes, resource=resource,
                                                   expires_at=time.time() + s.refresh_lifetime_s, family=family)
            body["refresh_token"] = refresh
        return body

    # --- metadata, keys, health ---------------------------------------------------------
    async def well_known(_: Request) -> Response:
        return JSONResponse(metadata)

    async def keys(_: Request) -> Response:
        return JSONResponse(jwks, headers={"cache-control": "public, max-age=300"})

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    # --- authorization endpoint -------------------------------------------------------------
    async def authorize(request: Request) -> Response:
        try:
            if request.method == "POST":
                return await _decide(request)
            return await _authorize(request)
        except OAuthError as exc:  # not redirectable: client or redirect URI not trusted
            return error_response(exc)

    async def _authorize(request: Request) -> Response:
        items = request.query_params.multi_items()
        # Until the client and its redirect URI are known to be good, errors are shown, not
        # redirected (RFC 6749 section 4.1.2.1); after that every error goes to the client.
        client = await directory.find(_only(items, "client_id"), status=400)
        if "authorization_code" not in client.grant_types or not client.redirect_uris:
            raise bad_request("unauthorized_client", f"client {client.client_id[:200]!r} is not registered for the "
                              "authorization_code grant (no redirect_uris)")
        presented_redirect = _only(items, "redirect_uri")
        redirect_uri = choose_redirect_uri(client.redirect_uris, presented_redirect)
        states = [v for k, v in items if k == "state"]
        state = states[0] if len(states) == 1 else None
        try:
            if len(items) > MAX_FORM_FIELDS:
                raise bad_request("invalid_request", f"the authorization request has more than {MAX_FORM_FIELDS} "
                                  "parameters")
            params = _single(items)
            response_type = params.get("response_type")
            if not response_type:
                raise bad_request("invalid_request", "response_type is required (code)")
            if response_type != "code":
                raise bad_request("unsupported_response_type",
                                  f"response_type {response_type[:64]!r}: only code is served")
            challenge = check_challenge(params.get("code_challenge"), params.get("code_challenge_method"))
            # A registration's scope does not limit later requests: clients step up beyond it.
            scopes = check_scope(parse_scope(params.get("scope")), s.scopes, s.default_scopes)
            resources = [v for k, v in items if k == "resource"]
            resource = check_resources(resources, s.audience)
        except OAuthError as exc:
            return _redirect(redirect_uri, {"error": exc.error, "error_description": exc.description,
                                            "state": state, "iss": s.issuer})
        sent = presented_redirect is not None
        if s.consent or not is_loopback_redirect(redirect_uri):
            grants.prune(time.time())
            request_id = secrets.token_urlsafe(24)
            grants.pending[request_id] = PendingConsent(client, redirect_uri, sent, state, challenge, scopes, resource,
                                                        time.time() + 600)
            while len(grants.pending) > MAX_PENDING:
                grants.pending.popitem(last=False)
            return _consent_page(request_id, client, redirect_uri, scopes, resource)
        return _approve(client, redirect_uri, sent, state, challenge, scopes, resource)

    def _approve(client: ClientRecord, redirect_uri: str, redirect_uri_sent: bool, state: str | None,
                 challenge: str, scopes: tuple[str, ...], resource: str) -> Response:
        grants.prune(time.time())
        code = secrets.token_urlsafe(32)
        grants.codes[code] = CodeGrant(client_id=client.client_id, redirect_uri=redirect_uri,
                                       redirect_uri_sent=redirect_uri_sent, challenge=challenge, scopes=scopes,
                                       resource=resource, expires_at=time.time() + s.code_lifetime_s,
                                       family=secrets.token_urlsafe(12))
        return _redirect(redirect_uri, {"code": code, "state": state, "iss": s.issuer})

    async def _decide(request: Request) -> Response:
        body = await _bounded_body(request, "application/x-www-form-urlencoded", "invalid_request", "consent decision")
        form = _single(parse_form(body, "consent decision"))
        request_id, decision = form.get("request_id", ""), form.get("decision", "")
        pending = grants.pending.pop(request_id, None)
        if pending is None or pending.expires_at < time.time():
            raise bad_request("invalid_request", "this consent request is unknown or expired: start the authorization "
                              "again from the client")
        if decision != "approve":
            return _redirect(pending.redirect_uri, {"error": "access_denied", "error_description":
                                                    "the resource owner denied the request", "state": pending.state,
                                                    "iss": s.issuer})
        return _approve(pending.client, pending.redirect_uri, pending.redirect_uri_sent, pending.state,
                        pending.challenge, pending.scopes, pending.resource)

    def _consent_page(request_id: str, client: ClientRecord, redirect_uri: str, scopes: tuple[str, ...],
                      resource: str) -> Response:
        e = html.escape
        host = urlsplit(redirect_uri).hostname or redirect_uri
        items = "".join(f"<li><code>{e(scope)}</code></li>" for scope in scopes) or "<li>(no scopes)</li>"
        page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Authorize {e(client.name or client.client_id)}</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
<h1>Authorize {e(client.name or client.client_id)}?</h1>
<p>Client <code>{e(client.client_id)}</code> ({e(client.source)}) asks for access to
<code>{e(resource)}</code> as <code>{DEV_USER}</code>, with these scopes:</p><ul>{items}</ul>
<p>The answer goes to <strong>{e(host)}</strong> (<code>{e(redirect_uri)}</code>).</p>
<form method="post" action="{e(s.authorize_path)}"><input type="hidden" name="request_id" value="{e(request_id)}">
<button name="decision" value="approve">Approve</button> <button name="decision" value="deny">Deny</button></form>
<p><small>Development authorization server of the local topology: there is no login.</small></p></body></html>"""
        return HTMLResponse(page, headers={"cache-control": "no-store", "x-frame-options": "DENY"})

    # --- token endpoint -------------------------------------------------------------------------
    async def token(request: Request) -> Response:
        try:
            return await _token(request)
        except OAuthError as exc:
            return error_response(exc)

    async def _token(request: Request) -> Response:
        body = await _bounded_body(request, "application/x-www-form-urlencoded", "invalid_request", "token request")
        items = parse_form(body, "token request")
        form = _single(items)
        resources = [v for k, v in items if k == "resource"]
        grant = form.get("grant_type")
        if not grant:
            raise bad_request("invalid_request", f"grant_type is required (one of {', '.join(GRANT_TYPES)})")
        if grant not in GRANT_TYPES:
            raise bad_request("unsupported_grant_type", f"grant_type {grant[:64]!r}: this issuer serves "
                              f"{', '.join(GRANT_TYPES)}")
        origin = request.headers.get("origin")
        client = await _authenticate(form, request.headers.get("authorization"),
                                     tell_why=origin is None or origin == s.base_url)
        if grant not in client.grant_types:
            raise bad_request("unauthorized_client", f"client {client.client_id[:200]!r} may use "
                              f"{', '.join(client.grant_types)}, not {grant}")
        now = time.time()
        grants.prune(now)
        if grant == "client_credentials":
            scopes = check_scope(parse_scope(form.get("scope")), s.scopes, s.default_scopes)
            audience = [form["audience"]] if form.get("audience") else []
            body_out = issue(client, scopes, check_resources([*resources, *audience], s.audience), subject=None,
                             family=None)
        elif grant == "authorization_code":
            body_out = _redeem_code(client, form, resources)
        else:
            body_out = _refresh(client, form, resources)
        return JSONResponse(body_out, headers={"cache-control": "no-store", "pragma": "no-cache"})

    async def _authenticate(form: Mapping[str, str], authorization: str | None, *, tell_why: bool) -> ClientRecord:
        client_id, secret, basic = presented_credentials(form, authorization)
        client = await directory.find(client_id, tell_why=tell_why)
        if client.public:
            if secret:
                raise OAuthError(401, "invalid_client", f"client {client.client_id[:200]!r} is a public client "
                                 "(token_endpoint_auth_method none): send no secret")
            return client
        if not secret:
            raise OAuthError(401, "invalid_client", f"client {client.client_id[:200]!r} must authenticate "
                             "(HTTP Basic or client_id/client_secret)")
        if not _secret_matches(client.secret, secret):
            raise OAuthError(401, "invalid_client", "unknown client or wrong secret")
        return client

    def _live(grant: GrantT | None, client: ClientRecord, what: str, gone: str, reused: str) -> GrantT:
        """The grant behind a code or refresh token, when this client may use it now; a second
        use of either revokes every token of its grant (RFC 9700 reuse detection)."""
        if grant is None or grant.expires_at < time.time() or grant.family in grants.revoked_families:
            raise bad_request("invalid_grant", f"the {what} is {gone}")
        if grant.client_id != client.client_id:
            raise bad_request("invalid_grant", f"the {what} was issued to another client")
        if grant.used:
            grants.revoke(grant.family)
            raise bad_request("invalid_grant", f"the {what} was already used{reused}: every token of this grant "
                              "is revoked")
        return grant

    def _required(form: Mapping[str, str], name: str, grant_type: str) -> str:
        value = form.get(name)
        if not value:
            raise bad_request("invalid_request", f"{name} is required for the {grant_type} grant")
        return value

    def _redeem_code(client: ClientRecord, form: Mapping[str, str], resources: list[str]) -> dict[str, Any]:
        code = _required(form, "code", "authorization_code")
        grant = _live(grants.codes.get(code), client, "authorization code",
                      f"unknown or expired (codes live {s.code_lifetime_s} s and work once)", "")
        # RFC 6749 section 4.1.3: required when the authorization request included it, and then
        # identical; a client that sends one anyway must send the one the code went to.
        presented = form.get("redirect_uri")
        if grant.redirect_uri_sent and presented is None:
            raise bad_request("invalid_request", "redirect_uri is required: the authorization request included it")
        if presented is not None and presented != grant.redirect_uri:
            raise bad_request("invalid_grant", "redirect_uri must be the one of the authorization request, exactly")
        check_verifier(grant.challenge, form.get("code_verifier"))
        if resources:
            check_resources(resources, grant.resource)
        grant.used = True
        return issue(client, grant.scopes, grant.resource, subject=DEV_USER, family=grant.family)

    def _refresh(client: ClientRecord, form: Mapping[str, str], resources: list[str]) -> dict[str, Any]:
        token = _required(form, "refresh_token", "refresh_token")
        grant = _live(grants.refresh.get(token), client, "refresh token", "unknown, expired or revoked",
                      " (tokens rotate on every refresh)")
        scopes = check_scope(parse_scope(form.get("scope")), s.scopes, grant.scopes, grant.scopes)
        if resources:
            check_resources(resources, grant.resource)
        grant.used = True
        return issue(client, scopes, grant.resource, subject=DEV_USER, family=grant.family)

    # --- dynamic client registration ----------------------------------------------------------------
    async def register(request: Request) -> Response:
        try:
            body = await _bounded_body(request, "application/json", "invalid_client_metadata", "registration request")
            try:
                doc = json.loads(body)
            except (ValueError, RecursionError):
                raise bad_request("invalid_client_metadata", "the registration request is not JSON") from None
            record = directory.register(doc)
        except OAuthError as exc:
            return error_response(exc)
        answer: dict[str, Any] = {
            "client_id": record.client_id,
            "client_id_issued_at": int(time.time()),
            "redirect_uris": list(record.redirect_uris),
            "grant_types": list(record.grant_types),
            "response_types": ["code"],
            "token_endpoint_auth_method": record.auth_method,
        }
        if record.secret:
            answer |= {"client_secret": record.secret, "client_secret_expires_at": 0}
        if record.name:
            answer["client_name"] = record.name
        if record.scope is not None:
            answer["scope"] = " ".join(record.scope)
        for extra in ("application_type", "client_uri", "logo_uri", "software_id", "software_version"):
            if isinstance(doc.get(extra), str):
                answer[extra] = doc[extra]
        return JSONResponse(answer, status_code=201, headers={"cache-control": "no-store"})

    issuer_path = urlsplit(s.issuer).path.rstrip("/")
    routes = [
        Route(s.jwks_path, keys, methods=["GET"]),
        Route(s.token_path, token, methods=["POST"]),
        Route(s.authorize_path, authorize, methods=["GET", "POST"]),
        Route(s.register_path, register, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
    ]
    for name in ("oauth-authorization-server", "openid-configuration"):
        # RFC 8414 inserts the well-known segment before the issuer's path; OIDC appends it.
        routes.append(Route(f"/.well-known/{name}{issuer_path}", well_known, methods=["GET"]))
        if issuer_path:
            routes.append(Route(f"{issuer_path}/.well-known/{name}", well_known, methods=["GET"]))
    # Browser-based clients (the MCP Inspector) call discovery, registration and the token
    # endpoint from their own origin. The authorization endpoint is a page a browser navigates
    # to: no web page may read what it answers (a consent page's request id, a fetch's error).
    cors = Middleware(CORSExceptMiddleware, without=[s.authorize_path], allow_origins=["*"],
                      allow_methods=["GET", "POST", "OPTIONS"],
                      allow_headers=["authorization", "content-type", "mcp-protocol-version"], max_age=86400)
    return Starlette(routes=routes, middleware=[cors])


def request_token(token_url: str, client_id: str, client_secret: str, audience: str | None = None,
                  timeout_s: float = 10.0, scope: str | None = None) -> dict[str, Any]:
    """Client side: a client-credentials token (client_secret_basic), as the probes ask for one."""
    basic = base64.b64encode(f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}".encode()).decode()
    form = {"grant_type": "client_credentials"}
    if audience:
        form["resource"] = audience
    if scope:
        form["scope"] = scope
    response = httpx.post(token_url, data=form, headers={"authorization": f"Basic {basic}"}, timeout=timeout_s,
                          trust_env=False)
    if response.status_code != 200:
        raise RuntimeError(f"token endpoint {token_url} answered HTTP {response.status_code}: {response.text[:500]}")
    body: dict[str, Any] = response.json()
    return body
