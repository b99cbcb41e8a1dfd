"""Helpers for the local runner's tests: ASGI apps under a real uvicorn on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from local.supervisor import free_ports
from tests.loopback import LoopbackServer


@contextlib.contextmanager
def serve(app: Any, port: int | None = None, **options: Any) -> Iterator[int]:
    """Run ``app`` under uvicorn in a thread (``options``: LoopbackServer's); yields the
    port; stops it on exit."""
    with LoopbackServer(app, port=port or free_ports(1)[0], **options) as server:
        yield server.port
