"""The parts of an app's start-up, timed one after another in a fresh interpreter, for
``bench/origin_bench.py`` to show where the origin's cold start goes beside the bare
SDK app's (``origin_bench.cold_start_parts``).

    python -m bench.cold_start_parts origin|bare h11|httptools   (run.sh's --http)

Run with the app's environment and task root (as ``origin_bench.serving`` starts it);
prints one JSON object, part name -> milliseconds. Only the standard library is
imported before the timed parts, so each part's time is the app's. The parts are
imported in a fixed order (the origin's collector pause, key-set download and deferred
imports first, as its ``app.py`` starts them, then the server and the SDK: what both apps import), so a module two parts share
is counted in the first; the origin's app logs its in-process warm-up time
(``warm_up_ms`` of its "origin ready" line), read back here.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

# What `python -m uvicorn` with run.sh's flags imports (its HTTP implementation, ``--http``,
# named on the command line), then the SDK and Starlette: both apps.
SERVER_AND_SDK = ("uvicorn.main", "uvicorn.config", "uvicorn.lifespan.on", "uvicorn.loops.asyncio",
                  "mcp.server.mcpserver", "starlette.applications")
KEY_SET_DOWNLOAD = "the collector paused (start_up_gc, imported first)"
SHARED = "uvicorn and the MCP SDK imported"
APP_BUILT = "app built"
LIFESPAN = "lifespan (before uvicorn listens)"
WARM_UP = "of which the in-process warm-up"
ORIGIN_ONLY_IMPORTS = {"Powertools imported": "aws_lambda_powertools.logging"}
OWN_MODULES = "the app's own modules imported"
# Every part, in the order they are timed (the bare app has no key-set download, no
# origin-only imports and no warm-up).
PARTS = (KEY_SET_DOWNLOAD, SHARED, *ORIGIN_ONLY_IMPORTS, OWN_MODULES, APP_BUILT, LIFESPAN, WARM_UP)


def logged_ms(log: str, message: str, field_name: str = "ms") -> float | None:
    """``field_name`` of the JSON log line whose message is ``message``, if the app logged one."""
    for line in log.splitlines():
        if line.startswith("{") and (record := json.loads(line)).get("message") == message:
            return float(record[field_name])
    return None


def timed(parts: dict[str, float], name: str, step: Callable[[], Any]) -> Any:
    begun = time.perf_counter()
    result = step()
    parts[name] = (time.perf_counter() - begun) * 1000
    return result


async def run_lifespan(app: Any) -> None:
    async with app.router.lifespan_context(app):
        pass


def measure(which: str, http: str, logs: io.StringIO) -> dict[str, float]:
    parts: dict[str, float] = {}
    if which == "origin":  # first, as app.py imports it
        timed(parts, KEY_SET_DOWNLOAD, lambda: importlib.import_module("demo_server.start_up_gc"))
    server_and_sdk = (f"uvicorn.protocols.http.{http}_impl", *SERVER_AND_SDK)
    timed(parts, SHARED, lambda: [importlib.import_module(name) for name in server_and_sdk])
    if which == "origin":
        for name, module in ORIGIN_ONLY_IMPORTS.items():
            timed(parts, name, partial(importlib.import_module, module))
        origin = timed(parts, OWN_MODULES, lambda: importlib.import_module("demo_server.app"))
        app = timed(parts, APP_BUILT, lambda: origin.app)
    else:
        bare = timed(parts, OWN_MODULES, lambda: importlib.import_module("bench.bare_sdk"))
        app = timed(parts, APP_BUILT, bare.bare_sdk_app)
    timed(parts, LIFESPAN, lambda: asyncio.run(run_lifespan(app)))
    if (warm_up_ms := logged_ms(logs.getvalue(), "origin ready", "warm_up_ms")) is not None:
        parts[WARM_UP] = warm_up_ms
    return parts


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("origin", "bare") or sys.argv[2] not in ("h11", "httptools"):
        raise SystemExit("usage: python -m bench.cold_start_parts origin|bare h11|httptools")
    which, http = sys.argv[1:]
    # The app's log lines (Powertools writes to the sys.stdout it finds) are read back, not printed.
    logs, out = io.StringIO(), sys.stdout
    sys.stdout = logs
    try:
        parts = measure(which, http, logs)
    finally:
        sys.stdout = out
    print(json.dumps(parts))


if __name__ == "__main__":
    main()
