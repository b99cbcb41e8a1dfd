"""The official Python SDK's OAuth client provider, made headless for the local edge.

The dev issuer approves a loopback redirect URI at once: its authorization endpoint answers
with the redirect that carries the code. ``HeadlessAuthorization`` plays the browser: it requests the
authorization URL the SDK hands it, does not follow the redirect, and gives the SDK the
``code``, ``state`` and ``iss`` from its ``Location`` (an error redirect is raised with
the issuer's description). Everything else (discovery from the 401, registration by
client ID metadata document or dynamically, PKCE, the token request, refresh, step-up)
is the SDK's own ``OAuthClientProvider``. ``BrowserAuthorization`` is the same for a person:
it prints the URL to open and receives the redirect on a loopback port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
import httpx
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

# A loopback redirect URI (RFC 8252): nothing listens there, the code is read off the redirect.
REDIRECT_URI = "http://127.0.0.1/callback"


class AuthorizationRefusedError(RuntimeError):
    """The authorization endpoint answered with an error (redirected or shown)."""


@dataclass
class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory (what a real client keeps on disk)."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None
    history: list[OAuthToken] = field(default_factory=list)  # every token set stored, in order

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessAuthorization:
    """The SDK's redirect and callback handlers, following the issuer's redirect itself."""

    def __init__(self, timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self.visited: list[str] = []  # authorization URLs, in order
        self._result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.visited.append(authorization_url)
        async with httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=self.timeout_s) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location")
        if response.status_code == 200 and "text/html" in response.headers.get("content-type", ""):
            raise AuthorizationRefusedError("the dev issuer shows a consent page (the topology runs with --consent, "
                                            "or the redirect URI is not on loopback): a headless client cannot "
                                            "approve it; use a browser-based client, a loopback redirect URI, or run "
                                            "without --consent")
        if response.status_code not in (302, 303) or not location:
            raise AuthorizationRefusedError(f"the authorization endpoint answered HTTP {response.status_code} "
                                            f"without a redirect: {response.text[:300]}")
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        if "error" in query:
            raise AuthorizationRefusedError(f"authorization refused: {query['error']}: "
                                            f"{query.get('error_description', '')}")
        self._result = AuthorizationCodeResult(code=query.get("code", ""), state=query.get("state"),
                                               iss=query.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise AuthorizationRefusedError("no authorization response was received")
        result, self._result = self._result, None
        return result


class BrowserAuthorization:
    """The SDK's redirect and callback handlers for a person with a browser (the dev issuer
    run with ``--consent``): the authorization URL is printed to be opened, and the redirect
    lands on a loopback port of this process (RFC 8252: any port matches the registered URI)."""

    def __init__(self, out: Callable[[str], None] = print, timeout_s: float = 300.0):
        self.out, self.timeout_s = out, timeout_s
        self.received = threading.Event()
        self.query: dict[str, str] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
                if urlsplit(self.path).path != "/callback" or not ({"code", "error"} & set(query)):
                    self.send_error(404)
                    return
                owner.query = query
                page = b"<!doctype html><p>Authorized: you can close this tab and go back to the terminal.</p>"
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                owner.received.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, name="oauth-callback", daemon=True).start()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/callback"

    async def redirect(self, authorization_url: str) -> None:
        self.received.clear()
        self.out(f"Open this URL in a browser to authorize:\n  {authorization_url}")

    async def callback(self) -> AuthorizationCodeResult:
        if not await anyio.to_thread.run_sync(self.received.wait, self.timeout_s):
            raise AuthorizationRefusedError(f"no authorization arrived on {self.redirect_uri} within "
                                            f"{self.timeout_s:.0f} s")
        if "error" in self.query:
            raise AuthorizationRefusedError(f"authorization refused: {self.query['error']}: "
                                            f"{self.query.get('error_description', '')}")
        return AuthorizationCodeResult(code=self.query["code"], state=self.query.get("state"),
                                       iss=self.query.get("iss"))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def oauth_provider(server_url: str, *, storage: MemoryStorage | None = None, client_metadata_url: str | None = None,
                   client_name: str = "mcp-edge local client",
                   authorization: HeadlessAuthorization | BrowserAuthorization | None = None) -> OAuthClientProvider:
    """An SDK OAuth provider for ``server_url`` that starts from nothing (no token, no client):
    it registers dynamically, or uses ``client_metadata_url`` as its client id when the issuer
    supports client ID metadata documents."""
    authorization = authorization or HeadlessAuthorization()
    redirect_uri = authorization.redirect_uri if isinstance(authorization, BrowserAuthorization) else REDIRECT_URI
    metadata = OAuthClientMetadata.model_validate({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    })
    return OAuthClientProvider(server_url=server_url, client_metadata=metadata, storage=storage or MemoryStorage(),
                               redirect_handler=authorization.redirect, callback_handler=authorization.callback,
                               client_metadata_url=client_metadata_url)


def client_metadata_document(url: str, client_name: str = "mcp-edge local client") -> dict[str, object]:
    """The client ID metadata document a client with id ``url`` publishes there."""
    return {"client_id": url, "client_name": client_name, "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "token_endpoint_auth_method": "none"}
