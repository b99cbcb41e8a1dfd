"""Helpers for the local runner's tests: ASGI apps under a real uvicorn on loopback."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from local.supervisor import free_ports


@contextlib.contextmanager
def serve(app: Any, port: int | None = None) -> Iterator[int]:
    """Run ``app`` under uvicorn in a thread; yields the port; stops it on exit."""
    port = port or free_ports(1)[0]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
