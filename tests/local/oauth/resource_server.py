"""A protected MCP resource of the tests' own, for the headless OAuth client's tests: the
official SDK's ``MCPServer`` with its bearer auth (401 with ``resource_metadata``, the
protected resource metadata), tokens verified with PyJWT against the dev issuer's key set,
and a step-up check in front (``403 insufficient_scope``) for its one scoped tool. In the
product the edge does all of this; these tests need only a resource that behaves so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel
from starlette.applications import Starlette

ECHO = "repeat"
SCOPED = "identity"
SCOPED_NEEDS = "mcp:identity"


class Identity(BaseModel):
    subject: str | None
    scopes: list[str]


class JwksVerifier:
    def __init__(self, issuer: str, audience: str, jwks_url: str):
        self.issuer, self.audience = issuer, audience
        self.keys = jwt.PyJWKClient(jwks_url, cache_keys=True)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = self.keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=["RS256", "ES256"], audience=self.audience,
                                issuer=self.issuer)
        except jwt.PyJWTError:
            return None
        return AccessToken(token=token, client_id=str(claims.get("client_id", "")), subject=claims.get("sub"),
                           scopes=str(claims.get("scope", "")).split(), expires_at=int(claims["exp"]))


class StepUp:
    """403 insufficient_scope for a call of the scoped tool whose token lacks its scope."""

    def __init__(self, app: Any, verifier: JwksVerifier, metadata_url: str):
        self.app, self.verifier, self.metadata_url = app, verifier, metadata_url

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers: Mapping[bytes, bytes] = dict(scope["headers"])
        token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
        try:
            called = json.loads(body).get("params", {}).get("name")
        except (ValueError, AttributeError):
            called = None
        verified = await self.verifier.verify_token(token) if called == SCOPED else None
        if verified is not None and SCOPED_NEEDS not in verified.scopes:
            challenge = (f'Bearer error="insufficient_scope", scope="{SCOPED_NEEDS}", '
                         f'resource_metadata="{self.metadata_url}"')
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"www-authenticate", challenge.encode()), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return

        async def replayed() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replayed, send)


def protected_resource(issuer: str, jwks_url: str, mcp_url: str, base_url: str) -> Starlette | StepUp:
    verifier = JwksVerifier(issuer, mcp_url, jwks_url)
    server = MCPServer(name="oauth-test-resource", auth=AuthSettings.model_validate({
        "issuer_url": issuer, "resource_server_url": mcp_url, "required_scopes": ["mcp"],
        "validate_token_resource": False}), token_verifier=verifier)

    @server.tool()
    def repeat(text: str) -> str:
        """Answer the text."""
        return text

    @server.tool()
    def identity() -> Identity:
        """The verified token's subject and scopes."""
        token = get_access_token()
        assert token is not None
        return Identity(subject=token.subject, scopes=list(token.scopes))

    app = server.streamable_http_app(stateless_http=True, json_response=True,
                                     transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return StepUp(app, verifier, f"{base_url}/.well-known/oauth-protected-resource/mcp")
