"""The origin's ASGI app: the official MCP SDK (``MCPServer``), stateless, behind the
origin gate.

- ``create_app(settings)`` builds it (tests, the local runner, the benchmark);
- ``app`` (this module's attribute, built on first access from the environment)
  is what ``run.sh`` starts under uvicorn on Lambda: ``uvicorn mcp_server.app:app``.

One ``MCPServer`` serves both protocol eras through two SDK transports: streaming
(``json_response=False``: the 2026-07-28 path answers JSON unless a handler emits
or runs long, then SSE with keep-alives; handshake-era requests that run a handler
stream too, see ``keepalive``) and plain JSON for the other handshake-era requests.
"""

from __future__ import annotations

# First, before the heavy imports below (about a second): in the origin's process they
# pause the garbage collector until start-up is done (start_up_gc), start the key set's
# download and the origin secret's read, which run meanwhile, and defer what PyJWT
# imports but the origin never uses (lazy_imports).
from . import start_up_gc

# isort: split
from . import key_prefetch, lazy_imports, origin_secrets  # noqa: F401

# isort: split
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio.to_thread
from jwt import PyJWKClient
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware

from . import __version__
from .auth import JwtVerifier, make_jwks_client
from .hosts import HostPolicy, PolicyAllowList, origin_allowed
from .logs import configure_logging, request_logger
from .origin_gate import OriginGate, note_auth_failure
from .origin_secrets import with_origin_secrets
from .resource_server import ScopeCheck
from .settings import Settings
from .tools import register_tools
from .warm_up import SocketWarmUp, warm_up


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection, on, with our Host policy (which knows
    ``*.domain`` patterns the SDK's exact matching cannot express)."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True)
    hosts = HostPolicy(settings.allowed_hosts)
    # Assigned after construction so pydantic keeps these objects (it would copy a
    # list given to the constructor into a plain list).
    security.allowed_hosts = PolicyAllowList(settings.allowed_hosts, hosts.allows)
    security.allowed_origins = PolicyAllowList(
        settings.allowed_origins, lambda origin: origin_allowed(settings.allowed_origins, origin)
    )
    return security


def create_app(settings: Settings, *, jwks_client: PyJWKClient | None = None) -> Starlette:
    logger = configure_logging(settings.log_level)
    jwks = jwks_client or make_jwks_client(settings)
    # The key set is fetched while the app is built, and the lifespan waits for it:
    # the origin reports ready (uvicorn accepts connections, the Web Adapter's
    # readiness check passes) with the keys in hand, so no request pays the fetch.
    # A failed fetch does not hold start-up back: tokens get 503 until the backoff
    # lets the next request fetch again.
    prefetch = threading.Thread(target=_prefetch_keys, args=(jwks, logger), daemon=True, name="jwks-prefetch")
    prefetch.start()
    verifier = JwtVerifier(settings, jwks, on_reject=note_auth_failure)
    server = MCPServer(
        name=settings.server_name,
        version=__version__,
        # No subscriptions/listen: the tools are fixed per deployment, and on Lambda a
        # held-open listen stream would cost an invocation for its whole life. Both eras
        # then advertise the same capabilities (listChanged/subscribe false).
        subscriptions=False,
        # Validated from plain strings so the SDK keeps the issuer exactly as configured
        # (RFC 8414 compares issuers as strings: no added trailing slash).
        auth=AuthSettings.model_validate({
            "issuer_url": settings.issuer,
            "resource_server_url": settings.resource_url,
            "required_scopes": list(settings.required_scopes) or None,
            # JwtVerifier checks aud itself (PyJWT's audience=).
            "validate_token_resource": False,
        }),
        token_verifier=verifier,
        log_level="WARNING",
    )
    scopes_by_tool = register_tools(server, served_region=settings.served_region)
    # The readiness check's own wait: the request path once more, through the socket.
    readiness = SocketWarmUp(settings, verifier, logger)

    security = transport_security(settings)
    common: dict[str, Any] = dict(
        streamable_http_path=settings.mcp_path,
        stateless_http=True,
        transport_security=security,
        max_request_body_size=settings.max_body_bytes,
    )
    streaming_app = server.streamable_http_app(json_response=False, **common)
    streaming_sessions = server.session_manager
    plain_app = server.streamable_http_app(json_response=True, **common)
    plain_sessions = server.session_manager

    @asynccontextmanager
    async def lifespan(shell: Starlette) -> AsyncIterator[None]:
        # Joined from a worker thread (bounded by the fetch's own timeout), which also
        # starts the thread pool that token verification runs in.
        await anyio.to_thread.run_sync(prefetch.join, settings.jwks_timeout_s)
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(streaming_sessions.run())
            await stack.enter_async_context(plain_sessions.run())
            # Still before uvicorn listens: what the first request would pay once per
            # process is paid here, in the init phase (warm_up).
            begun = time.perf_counter()
            try:
                shell.state.warm_up_problems = await warm_up(shell, settings, verifier, logger)
            finally:
                warm_up_ms = round((time.perf_counter() - begun) * 1000, 1)
                # Start-up is done: what it built is frozen and the collector back on
                # (start_up_gc), whatever became of the warm-up.
                frozen = start_up_gc.resume()
            logger.info("origin ready", extra={"mcp_path": settings.mcp_path, "allowed_hosts": list(settings.allowed_hosts),
                                               "warm_up_ms": warm_up_ms, "gc_frozen": frozen})
            yield

    app = Starlette(
        middleware=[Middleware(OriginGate, settings=settings, streaming=streaming_app, plain=plain_app,
                               log=request_logger(settings.served_region),
                               scope_check=ScopeCheck(settings, verifier, scopes_by_tool), readiness=readiness)],
        lifespan=lifespan,
    )
    app.state.readiness = readiness
    return app


def _prefetch_keys(jwks: PyJWKClient, logger: Any) -> None:
    try:
        jwks.get_jwk_set()
    except Exception as exc:  # any failure: the first request retries
        logger.warning("JWKS prefetch failed", extra={"error": str(exc)[:200]})


def settings_from_environment(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings run.sh's app is built from: the function's environment, with the
    origin secret read from Secrets Manager when ORIGIN_SECRET_ID names it (on Lambda,
    once per execution environment)."""
    return Settings.from_env(with_origin_secrets(os.environ if environ is None else environ))


_app: Starlette | None = None


def __getattr__(name: str) -> Any:
    # `app` is built on first access, so importing this module (tests, the local
    # runner) does not need the Lambda environment.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app(settings_from_environment())
        return _app
    raise AttributeError(name)
