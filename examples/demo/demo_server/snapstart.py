"""The server under Lambda SnapStart: the snapshot's two hooks, in front of the app.

``app.app`` puts them in front whenever the environment names the hook paths (the
adapter's two variables; the program leaves them unset, since a server without such
hooks would answer them 404 and fail every restore), so the start command is the same
with and without SnapStart.

How the hooks reach the app: the app runs in uvicorn, a process the AWS Lambda Web
Adapter starts (``run.sh``); the adapter, not a Python runtime client, talks to
Lambda's Runtime API. So the Python runtime's own hooks (the ``snapshot_restore_py``
library Lambda ships for Python) never run in this process. The adapter relays the
two SnapStart events over HTTP instead (since release 1.1.0, layer version 30):
before the snapshot it POSTs to ``AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH``, after a
restore, before any invocation, to ``AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH``; a non-2xx
answer fails that phase. The adapter refuses those paths to outside callers (403);
this app serves them only for requests that are not invocations (the adapter puts
``x-amzn-request-context`` on every invocation it forwards), and passes anything else
on to the server's app (which answers it as any unknown path).

What a restore must refresh, since every environment restored from one snapshot
starts with the same memory:
- ``random``'s state (Mersenne Twister, seeded once at start-up): reseeded from the
  OS, so restored environments do not draw the same numbers. ``secrets``, ``uuid4``
  and ``os.urandom`` read the kernel's generator, which Lambda reseeds on restore;
- what cannot be refreshed: Python's string-hash seed (``PYTHONHASHSEED``, drawn once at
  interpreter start), so restored environments share it; it only hardens dicts against
  hash flooding, which one environment's request size limit bounds anyway.
The server keeps no credentials, caches or clocks that a restore would make stale (the
edge verifies tokens), and holds no connection open, so nothing needs draining before
the snapshot.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

# On every invocation the adapter forwards; never on its own hook calls.
INVOCATION_HEADER = b"x-amzn-request-context"
# The Web Adapter's variables naming the hook paths it POSTs to.
BEFORE_CHECKPOINT_PATH_ENV = "AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"
AFTER_RESTORE_PATH_ENV = "AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"

log = logging.getLogger("demo_server.snapstart")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[..., Any]


@dataclass
class SnapshotHooks:
    """What the two SnapStart events do; counts them (the benchmark and tests read it)."""

    reseed: Callable[[], None] = random.seed
    checkpoints: int = 0
    restores: int = 0

    def before_checkpoint(self) -> dict[str, Any]:
        self.checkpoints += 1
        return {"phase": "before-checkpoint"}

    def after_restore(self) -> dict[str, Any]:
        self.restores += 1
        self.reseed()
        return {"phase": "after-restore"}


def hook_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """Hook path -> phase, from the adapter's variables (unset: no such hook)."""
    paths = {}
    for env, phase in ((BEFORE_CHECKPOINT_PATH_ENV, "before_checkpoint"), (AFTER_RESTORE_PATH_ENV, "after_restore")):
        path = environ.get(env, "").strip()
        if path.startswith("/"):
            paths[path] = phase
    return paths


class SnapStartApp:
    """ASGI: the adapter's hook calls answered here, everything else by the server's app."""

    def __init__(self, app: ASGIApp, hooks: SnapshotHooks, paths: Mapping[str, str]):
        self.app = app
        self.hooks = hooks
        self.paths = dict(paths)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        phase = self.paths.get(scope.get("path", "")) if scope["type"] == "http" else None
        if phase is None or scope["method"] != "POST" or any(k == INVOCATION_HEADER for k, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return
        try:
            # In a worker thread: a hook may block (and the thread pool starts before the snapshot).
            body = await anyio.to_thread.run_sync(getattr(self.hooks, phase))
            status = 200
        except Exception as exc:  # a failed hook fails the phase (the adapter sees non-2xx)
            log.error("SnapStart %s hook failed: %s", phase, exc)
            body, status = {"phase": phase, "error": type(exc).__name__}, 500
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def with_snapshot_hooks(app: ASGIApp, environ: Mapping[str, str]) -> ASGIApp:
    """``app`` with the hooks in front when ``environ`` names their paths, else ``app`` itself."""
    paths = hook_paths(environ)
    return SnapStartApp(app, SnapshotHooks(), paths) if paths else app
