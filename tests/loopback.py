"""An ASGI app under a real uvicorn on 127.0.0.1, in a daemon thread: the one helper
every test that needs a live server builds on (the origin's, the probe's, the local
runner's)."""

from __future__ import annotations

import shlex
import threading
import time
from typing import Any, Literal, Self

import uvicorn

from stack_config.keys import DEMO_SERVER_COMMAND

START_TIMEOUT_S = 30
# How often a ThreadedSocketServer looks for shutdown(): what its close() waits at most.
SHUTDOWN_POLL_S = 0.05
# The demo server's own uvicorn flags (its start command): live test servers parse and loop as it does.
_DEMO_WORDS = shlex.split(DEMO_SERVER_COMMAND)
RUN_SH_HTTP, RUN_SH_LOOP = (_DEMO_WORDS[_DEMO_WORDS.index(flag) + 1] for flag in ("--http", "--loop"))


class LoopbackServer:
    """``with LoopbackServer(app) as server:`` serves ``app`` until the block ends.

    ``port`` 0 picks a free port (``server.port`` says which, once started). Shutdown
    waits ``graceful_shutdown_s`` for open connections, then cancels them; a handler
    that still ignores that (a thread sleeping) is abandoned with uvicorn's force exit.
    """

    def __init__(self, app: Any, *, port: int = 0, lifespan: Literal["auto", "on", "off"] = "on",
                 graceful_shutdown_s: int = 2, http: str = RUN_SH_HTTP, loop: str = RUN_SH_LOOP):
        self.port = port
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan=lifespan, timeout_graceful_shutdown=graceful_shutdown_s,
                                                    # by default as run.sh serves the origin on Lambda (the
                                                    # local edge's tests pass its own protocol and loop)
                                                    http=http, loop=loop))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on 127.0.0.1 (port {self.port or 'any'})")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class ThreadedSocketServer:
    """A ``socketserver`` server (``http.server`` ones too) on 127.0.0.1, any free port,
    served from a daemon thread, one daemon thread per connection: for servers that
    misbehave below what an ASGI app can express."""

    def __init__(self, server_class: Any, handler: Any):
        self.server = server_class(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        # serve_forever checks for shutdown() between polls: 0.5 s by default, which every
        # close() waited out (half a second a test for the servers made per test).
        threading.Thread(target=self.server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
