"""The demo server's ASGI app: the official MCP SDK (``MCPServer``), stateless.

- ``create_app(settings)`` builds it (tests, the benchmarks);
- ``app`` (this module's attribute, built on first access from the environment)
  is what the start command serves: ``python -m uvicorn demo_server.app:app``, with the
  SnapStart hooks in front when the environment names them (``snapstart``).

One ``MCPServer`` serves both protocol eras through two SDK transports: streaming
(``json_response=False``: the 2026-07-28 path answers JSON unless a handler emits
or runs long, then SSE with keep-alives; handshake-era requests that run a handler
stream too, see ``keepalive``) and plain JSON for the other handshake-era requests.

No authentication here: the edge verifies the bearer token and the per-tool scopes,
and the Function URL takes only requests the edge (or a probe) signed. The server
gets the token in ``Authorization`` and the verified identity in the edge's headers
(``tools.whoami`` reads them).
"""

from __future__ import annotations

# First, before the heavy imports below: in a server process it pauses the garbage
# collector until start-up is done (start_up_gc).
from . import start_up_gc

# isort: split
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware

from . import __version__
from .logs import configure_logging, request_logger
from .origin_gate import OriginGate
from .settings import Settings
from .snapstart import with_snapshot_hooks
from .tools import register_tools
from .warm_up import SocketWarmUp, warm_up


def transport_security() -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection, off. Behind the edge, requests arrive with the
    Function URL's Host (``<url-id>.lambda-url.<region>.on.aws``, an id that exists only
    once the function does), which the SDK's exact-match allow-list cannot name: on, it
    would answer them 421. The edge validates the viewer's Host and Origin, and the
    Function URL serves only requests the edge or a probe signed."""
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def create_app(settings: Settings) -> Starlette:
    logger = configure_logging(settings.log_level)
    server = MCPServer(
        name=settings.server_name,
        version=__version__,
        # No subscriptions/listen: the tools are fixed per deployment, and on Lambda a
        # held-open listen stream would cost an invocation for its whole life. Both eras
        # then advertise the same capabilities (listChanged/subscribe false).
        subscriptions=False,
        log_level="WARNING",
    )
    register_tools(server, served_region=settings.served_region)
    # The readiness check's own wait: the request path once more, through the socket.
    readiness = SocketWarmUp(settings, logger)

    common: dict[str, Any] = dict(
        streamable_http_path=settings.mcp_path,
        stateless_http=True,
        transport_security=transport_security(),
        max_request_body_size=settings.max_body_bytes,
    )
    streaming_app = server.streamable_http_app(json_response=False, **common)
    streaming_sessions = server.session_manager
    plain_app = server.streamable_http_app(json_response=True, **common)
    plain_sessions = server.session_manager

    @asynccontextmanager
    async def lifespan(shell: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(streaming_sessions.run())
            await stack.enter_async_context(plain_sessions.run())
            # Still before uvicorn listens: what the first request would pay once per
            # process is paid here, in the init phase (warm_up).
            begun = time.perf_counter()
            try:
                shell.state.warm_up_problems = await warm_up(shell, settings, logger)
            finally:
                warm_up_ms = round((time.perf_counter() - begun) * 1000, 1)
                # Start-up is done: what it built is frozen and the collector back on
                # (start_up_gc), whatever became of the warm-up.
                frozen = start_up_gc.resume()
            logger.info("server ready", extra={"mcp_path": settings.mcp_path, "warm_up_ms": warm_up_ms,
                                               "gc_frozen": frozen})
            yield

    app = Starlette(
        middleware=[Middleware(OriginGate, settings=settings, streaming=streaming_app, plain=plain_app,
                               log=request_logger(settings.served_region), readiness=readiness)],
        lifespan=lifespan,
    )
    app.state.readiness = readiness
    return app


def app_from_environment(environ: Mapping[str, str]) -> Any:
    """The app the start command serves: settings from ``environ``, and the SnapStart hooks
    in front when it names their paths."""
    return with_snapshot_hooks(create_app(Settings.from_env(environ)), environ)


_app: Any = None


def __getattr__(name: str) -> Any:
    # `app` is built on first access, so importing this module (tests, the benchmarks)
    # does not build a server from whatever the environment holds.
    global _app
    if name == "app":
        if _app is None:
            _app = app_from_environment(os.environ)
        return _app
    raise AttributeError(name)
