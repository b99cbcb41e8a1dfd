"""The development OAuth issuer: a JWKS and a client-credentials token endpoint.

It stands in for the stack's authorization server (``authIssuer``) on loopback. Its
key pair (RSA, RS256) is generated when the local run starts and kept in the run
directory (mode 0600); its clients (the stack's probe client and a developer client)
get random secrets at the same time. Tokens are RFC 9068 access-token JWTs:
``iss``, ``sub``/``client_id``, ``aud``, ``iat``, ``nbf``, ``exp``, ``jti``, ``scope``.

Endpoints (paths follow the stack's URLs, so only scheme and host differ):

- ``GET <issuer>/.well-known/oauth-authorization-server`` and
  ``.../openid-configuration``: RFC 8414 metadata.
- ``GET <jwks path>``: the public key set.
- ``POST <token path>``: ``grant_type=client_credentials``, client authentication by
  HTTP Basic (``client_secret_basic``, form-encoded id and secret) or form fields
  (``client_secret_post``). An ``audience``/``resource`` parameter must name the one
  audience this issuer serves (RFC 8707 ``invalid_target`` otherwise).
- ``GET /healthz``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from local.files import write_private

ALGORITHM = "RS256"
DEFAULT_TOKEN_LIFETIME_S = 3600
MAX_FORM_BYTES = 16 * 1024
SETTINGS_ENV = "MCPEDGE_LOCAL_ISSUER"


@dataclass(frozen=True)
class IssuerSettings:
    issuer: str  # the iss claim, e.g. http://127.0.0.1:8100/
    audience: str  # the aud claim: the local edge's MCP URL
    token_path: str  # e.g. /oauth/token
    jwks_path: str  # e.g. /.well-known/jwks.json
    key_file: str  # PEM private key (PKCS#8)
    clients: Mapping[str, str] = field(repr=False)  # client id -> secret
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S
    scope: str = "mcp"

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
        return json.dumps({**self.__dict__, "clients": dict(self.clients)})

    @classmethod
    def from_json(cls, text: str) -> IssuerSettings:
        return cls(**json.loads(text))


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
) -> str:
    """An RFC 9068 access token. ``lifetime_s`` may be negative (an already expired token, for tests)."""
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": issuer,
        "sub": client_id,
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


class OAuthError(Exception):
    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description

    def response(self) -> JSONResponse:
        headers = {"cache-control": "no-store"}
        if self.status == 401:
            headers["www-authenticate"] = 'Basic realm="local-dev-issuer"'
        return JSONResponse({"error": self.error, "error_description": self.description},
                            status_code=self.status, headers=headers)


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise OAuthError(401, "invalid_client", "the Basic credentials are not base64 of id:secret") from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise OAuthError(401, "invalid_client", "the Basic credentials are not base64 of id:secret")
    # RFC 6749 section 2.3.1: id and secret are form-encoded before Basic encoding.
    return unquote(client_id.replace("+", " ")), unquote(secret.replace("+", " "))


def authenticate_client(clients: Mapping[str, str], form: Mapping[str, str], authorization: str | None) -> str:
    """The client id, when the request carries one known client's secret; else OAuthError."""
    basic = _basic_credentials(authorization) if authorization else None
    posted = (form.get("client_id"), form.get("client_secret"))
    if basic and posted[1]:
        raise OAuthError(400, "invalid_request", "use one client authentication method, not Basic and form both")
    client_id, secret = basic or posted
    if not client_id or not secret:
        raise OAuthError(401, "invalid_client", "client authentication required (HTTP Basic or client_id/client_secret)")
    expected = clients.get(client_id)
    # Compare even for unknown clients, so timing does not tell which ids exist.
    if not hmac.compare_digest((expected or "\0").encode(), secret.encode()) or expected is None:
        raise OAuthError(401, "invalid_client", "unknown client or wrong secret")
    return client_id


def create_app(settings: IssuerSettings | None = None) -> Starlette:
    """The issuer app; without settings, read from ``$MCPEDGE_LOCAL_ISSUER`` (JSON)."""
    if settings is None:
        raw = os.environ.get(SETTINGS_ENV)
        if not raw:
            raise RuntimeError(f"{SETTINGS_ENV} is not set: the local runner passes the issuer's settings in it")
        settings = IssuerSettings.from_json(raw)
    key = load_private_key(settings.key_file)
    jwks = {"keys": [public_jwk(key)]}
    issuer = settings.issuer

    metadata = {
        "issuer": issuer,
        "token_endpoint": settings.token_url,
        "jwks_uri": settings.jwks_url,
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "response_types_supported": ["token"],
        "scopes_supported": [settings.scope],
        "id_token_signing_alg_values_supported": [ALGORITHM],
    }

    async def well_known(_: Request) -> Response:
        return JSONResponse(metadata)

    async def keys(_: Request) -> Response:
        return JSONResponse(jwks, headers={"cache-control": "public, max-age=300"})

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    async def token(request: Request) -> Response:
        try:
            return await _token(request)
        except OAuthError as exc:
            return exc.response()

    async def _token(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            raise OAuthError(400, "invalid_request", "the token request must be application/x-www-form-urlencoded")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise OAuthError(400, "invalid_request", f"the token request is over {MAX_FORM_BYTES} bytes")
        async with request.form() as form_data:
            form = {k: v for k, v in form_data.items() if isinstance(v, str)}
        client_id = authenticate_client(settings.clients, form, request.headers.get("authorization"))
        grant = form.get("grant_type")
        if grant != "client_credentials":
            raise OAuthError(400, "unsupported_grant_type", f"grant_type {grant!r}: only client_credentials")
        for name in ("audience", "resource"):
            wanted = form.get(name)
            if wanted and wanted.rstrip("/") != settings.audience.rstrip("/"):
                raise OAuthError(400, "invalid_target", f"{name} {wanted!r}: this issuer serves {settings.audience!r}")
        access_token = sign_token(key, issuer=issuer, audience=settings.audience, client_id=client_id,
                                  lifetime_s=settings.token_lifetime_s, scope=settings.scope)
        return JSONResponse(
            {"access_token": access_token, "token_type": "Bearer", "expires_in": settings.token_lifetime_s,
             "scope": settings.scope},
            headers={"cache-control": "no-store", "pragma": "no-cache"},
        )

    issuer_path = urlsplit(issuer).path.rstrip("/")
    routes = [
        Route(settings.jwks_path, keys, methods=["GET"]),
        Route(settings.token_path, token, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
    ]
    for name in ("oauth-authorization-server", "openid-configuration"):
        # RFC 8414 inserts the well-known segment before the issuer's path; OIDC appends it.
        routes.append(Route(f"/.well-known/{name}{issuer_path}", well_known, methods=["GET"]))
        if issuer_path:
            routes.append(Route(f"{issuer_path}/.well-known/{name}", well_known, methods=["GET"]))
    return Starlette(routes=routes)


def request_token(token_url: str, client_id: str, client_secret: str, audience: str | None = None,
                  timeout_s: float = 10.0) -> dict[str, Any]:
    """Client side: a client-credentials token (client_secret_basic), as the probes ask for one."""
    basic = base64.b64encode(f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}".encode()).decode()
    form = {"grant_type": "client_credentials"}
    if audience:
        form["resource"] = audience
    response = httpx.post(token_url, data=form, headers={"authorization": f"Basic {basic}"}, timeout=timeout_s,
                          trust_env=False)
    if response.status_code != 200:
        raise RuntimeError(f"token endpoint {token_url} answered HTTP {response.status_code}: {response.text[:500]}")
    body: dict[str, Any] = response.json()
    return body
