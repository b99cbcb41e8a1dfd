"""What the origin says as an OAuth 2.1 resource server, besides verifying tokens (``auth``):

- its protected resource metadata (RFC 9728): ``resource`` is the public MCP URL the
  clients use, ``authorization_servers`` the stack's issuer, ``scopes_supported`` the
  scopes the stack advertises (``AUTH_SCOPES_SUPPORTED``; else the scopes every request
  needs, if any), ``bearer_methods_supported: ["header"]``; served at the path-suffixed
  well-known URL (``/.well-known/oauth-protected-resource/mcp``, what the 401 names) and
  at the root one (``/.well-known/oauth-protected-resource``, the clients' fallback),
  readable from any browser origin;
- the step-up challenge (MCP authorization, RFC 6750 section 3.1): a ``tools/call`` of a
  tool that declares scopes (``tools.py``) with a valid token lacking one of them is
  answered ``403`` with ``WWW-Authenticate: Bearer error="insufficient_scope",
  scope="<every scope the call needs>", resource_metadata="...", error_description="..."``
  before the tool runs, in both protocol eras.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.shared.inbound import decode_header_value

from .settings import Settings

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def resource_metadata_url(resource_url: str) -> str:
    """RFC 9728 section 3.1: the well-known segment goes between the host and the resource's path."""
    parts = urlsplit(resource_url)
    path = parts.path if parts.path != "/" else ""
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def metadata_paths(settings: Settings) -> frozenset[str]:
    """Where the origin serves its metadata: the path-suffixed URL (for the resource's path
    and the MCP path, which are normally the same) and the root one."""
    resource_path = urlsplit(settings.resource_url).path.rstrip("/")
    return frozenset({WELL_KNOWN, WELL_KNOWN + settings.mcp_path, WELL_KNOWN + resource_path})


def advertised_scopes(settings: Settings) -> tuple[str, ...]:
    return settings.scopes_supported or settings.required_scopes


def protected_resource_metadata(settings: Settings) -> dict[str, Any]:
    document: dict[str, Any] = {
        "resource": settings.resource_url,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": settings.server_name,
    }
    if advertised_scopes(settings):
        document["scopes_supported"] = list(advertised_scopes(settings))
    return document


def metadata_body(settings: Settings) -> bytes:
    return json.dumps(protected_resource_metadata(settings), separators=(",", ":")).encode()


# Public, the same for every viewer: any browser origin may read it (and preflight it,
# since the SDKs send MCP-Protocol-Version on metadata requests).
METADATA_CORS = (
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
    (b"access-control-allow-headers", b"mcp-protocol-version, content-type, authorization"),
    (b"access-control-max-age", b"86400"),
)


def called_tool(era_headers: Mapping[str, str | None], message: Any) -> str | None:
    """The tool a request calls, or None when it calls none.

    2026-07-28 requests name it in ``Mcp-Method``/``Mcp-Name`` (the SDK refuses a body that
    disagrees with them, so the headers are what runs); handshake-era requests in the body."""
    if era_headers.get("mcp-protocol-version") is not None and era_headers.get("mcp-method") is not None:
        if era_headers.get("mcp-method") != "tools/call":
            return None
        raw = era_headers.get("mcp-name")
        return decode_header_value(raw) if raw is not None else None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else None


def missing_scopes(granted: list[str], needed: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(s for s in needed if s not in granted)


def quoted(value: str) -> str:
    """An RFC 7235 quoted-string (scopes never hold quotes; descriptions might)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def insufficient_scope(settings: Settings, tool: str, needed: tuple[str, ...],
                       missing: tuple[str, ...]) -> tuple[int, dict[str, Any], tuple[tuple[bytes, bytes], ...]]:
    """The 403 step-up answer: status, JSON body, headers."""
    description = f"tool {tool!r} needs scope {' '.join(missing)}"
    scope = " ".join(dict.fromkeys((*settings.required_scopes, *needed)))
    challenge = (f'Bearer error="insufficient_scope", scope="{quoted(scope)}", '
                 f'resource_metadata="{resource_metadata_url(settings.resource_url)}", '
                 f'error_description="{quoted(description)}"')
    return 403, {"error": "insufficient_scope", "error_description": description, "scope": scope}, (
        (b"www-authenticate", challenge.encode("latin-1", "replace")), (b"cache-control", b"no-store"))


class ScopeCheck:
    """The step-up check the origin gate runs on ``tools/call`` before the SDK does."""

    def __init__(self, settings: Settings, verifier: TokenVerifier, scopes_by_tool: Mapping[str, tuple[str, ...]]):
        self.settings = settings
        self.verifier = verifier
        self.scopes_by_tool = dict(scopes_by_tool)

    async def token(self, authorization: str | None) -> AccessToken | None:
        """The verified access token of an ``Authorization: Bearer`` header, else None."""
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        return await self.verifier.verify_token(authorization[7:].strip())

    async def refusal(self, authorization: str | None, tool: str | None
                      ) -> tuple[int, dict[str, Any], tuple[tuple[bytes, bytes], ...]] | None:
        """The 403 answer when the call's valid token lacks a scope the tool needs; None to go on
        (no scoped tool, or no valid token: the SDK then answers 401 itself)."""
        needed = self.scopes_by_tool.get(tool) if tool is not None else None
        if not needed:
            return None
        token = await self.token(authorization)
        if token is None:
            return None
        missing = missing_scopes(token.scopes, needed)
        if not missing:
            return None
        assert tool is not None
        return insufficient_scope(self.settings, tool, needed, missing)
