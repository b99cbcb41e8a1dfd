"""The origin under Lambda SnapStart: the app of ``app`` with the snapshot's two hooks.

Shipped only in the SnapStart package (``components/origin.py`` adds this module and
points ``run.sh`` at ``mcp_server.snapstart:app``); the other packages leave it out,
so their bytes do not change.

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
on to the origin app (whose gate answers it as any unknown path).

What a restore must refresh, since every environment restored from one snapshot
starts with the same memory:
- the issuer's key set: cached at init (possibly days before the restore), with a
  ``time.monotonic`` timestamp, which a restored VM does not advance by the time it
  spent in the snapshot, so the cache would look fresh and keep keys the issuer has
  withdrawn since. It is dropped, with the client's fetch backoff and unknown-``kid``
  cooldown (monotonic too) and any early download (``key_prefetch``) not yet taken, and
  fetched again before the hook answers (in a worker thread, bounded by the client's
  timeout, within Lambda's 10 s for a restore), as init does before reporting ready: the
  adapter admits traffic after the hook, so no request pays the fetch and none starts a
  second one. A failed fetch does not fail the restore: tokens get 503 until the
  backoff lets a request fetch again, as after a failed fetch at init;
- ``random``'s state (Mersenne Twister, seeded once at start-up): reseeded from the
  OS, so restored environments do not draw the same numbers. ``secrets``, ``uuid4``
  and ``os.urandom`` read the kernel's generator, which Lambda reseeds on restore;
- what cannot be refreshed: Python's string-hash seed (``PYTHONHASHSEED``, drawn once at
  interpreter start), so restored environments share it; it only hardens dicts against
  hash flooding, which one environment's request size limit bounds anyway;
- the verified-token cache is empty at snapshot time (init serves only readiness
  checks) and bounded by the wall clock, which is right after a restore.
Before the snapshot nothing needs draining: the app holds no connection open (each
key-set download opens its own).
"""

from __future__ import annotations

# First, as in ``app``: starts the key set's download while the rest imports, and
# defers what PyJWT imports but the origin never uses.
from . import key_prefetch, lazy_imports  # noqa: F401

# isort: split
import json
import logging
import os
import random
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from jwt import PyJWKClient

from .app import create_app, settings_from_environment
from .auth import BackoffJWKClient, make_jwks_client
from .contract import SnapStartHookEnv
from .settings import Settings

# On every invocation the adapter forwards; never on its own hook calls.
INVOCATION_HEADER = b"x-amzn-request-context"

log = logging.getLogger("mcp_server.snapstart")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[..., Any]


def forget_key_set(jwks: PyJWKClient) -> None:
    """Drop what the key-set client remembers from before the snapshot: the cached set,
    the unknown-``kid`` cooldown and (ours) the fetch backoff, all with monotonic
    timestamps, and any early download of the key set not taken yet."""
    if jwks.jwk_set_cache is not None:
        jwks.jwk_set_cache.put(None)
    jwks._last_successful_fetch = None
    if isinstance(jwks, BackoffJWKClient):
        with jwks._lock:
            jwks.failures, jwks._retry_at, jwks._early = 0, 0.0, None
    with key_prefetch._lock:
        key_prefetch._started = None


@dataclass
class SnapshotHooks:
    """What the two SnapStart events do; counts them (the benchmark and tests read it)."""

    jwks: PyJWKClient
    reseed: Callable[[], None] = random.seed
    checkpoints: int = 0
    restores: int = 0

    def before_checkpoint(self) -> dict[str, Any]:
        self.checkpoints += 1
        return {"phase": "before-checkpoint"}

    def after_restore(self) -> dict[str, Any]:
        self.restores += 1
        self.reseed()
        forget_key_set(self.jwks)
        try:
            self.jwks.get_jwk_set()
            keys = "fetched"
        except Exception as exc:  # a token request fetches again once the backoff allows
            log.warning("JWKS fetch after restore failed: %s", str(exc)[:200])
            keys = "unavailable"
        return {"phase": "after-restore", "key_set": keys}


def hook_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """Hook path -> phase, from the adapter's variables (unset: no such hook)."""
    paths = {}
    for env, phase in ((SnapStartHookEnv.BEFORE_CHECKPOINT_PATH, "before_checkpoint"),
                       (SnapStartHookEnv.AFTER_RESTORE_PATH, "after_restore")):
        path = environ.get(env, "").strip()
        if path.startswith("/"):
            paths[path] = phase
    return paths


class SnapStartApp:
    """ASGI: the adapter's hook calls answered here, everything else by the origin app."""

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
            # In a worker thread: the key set's download is blocking I/O.
            body = await anyio.to_thread.run_sync(getattr(self.hooks, phase))
            status = 200
        except Exception as exc:  # a failed hook fails the phase (the adapter sees non-2xx)
            log.error("SnapStart %s hook failed: %s", phase, exc)
            body, status = {"phase": phase, "error": type(exc).__name__}, 500
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def create_snapstart_app(settings: Settings, environ: Mapping[str, str], *,
                         jwks_client: PyJWKClient | None = None) -> SnapStartApp:
    jwks = jwks_client or make_jwks_client(settings)
    return SnapStartApp(create_app(settings, jwks_client=jwks), SnapshotHooks(jwks), hook_paths(environ))


_app: SnapStartApp | None = None


def __getattr__(name: str) -> Any:
    # Built on first access, like ``app.app``: what run.sh starts under SnapStart.
    global _app
    if name == "app":
        if _app is None:
            # As ``app.app``: the origin secret from Secrets Manager, read before the snapshot.
            _app = create_snapstart_app(settings_from_environment(), os.environ)
        return _app
    raise AttributeError(name)
