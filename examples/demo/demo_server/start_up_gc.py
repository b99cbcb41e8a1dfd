"""Python's cyclic garbage collector, paused while the origin starts, then told to leave
what start-up built alone.

Importing the SDK, pydantic and Starlette allocates over 100,000
objects that the collector tracks, and almost none of them is garbage: they are
modules, classes, functions and schemas that live as long as the process. With the
collector on, every 2,000 allocations start a young-generation collection that
traverses them again as they age, about a tenth of the import time for nothing
(measured on this repository's machine when the server still imported PyJWT and cryptography,
alternating 30 pairs of fresh interpreters:
imports 803 ms with the collector paused against 893 ms with it on, 0.90x; one
collection afterwards found 676 unreachable objects). So, when this is the origin's
process (``origin_process``: the environment is a function's or names the port the Web
Adapter forwards to):

- ``pause_from_environment`` (run on import; ``app`` imports this module before
  anything heavy) turns the collector off;
- ``resume`` (the lifespan, once the app is built and warmed, still before uvicorn
  listens) moves everything start-up left to the permanent generation
  (``gc.freeze()``) and turns the collector back on. Without the freeze, the first
  full collection would traverse the whole start-up heap (80-100 ms here, on some
  request); with it, collections see only what requests allocate. What start-up left
  unreachable (about 1,200 objects by the end of the warm-up) stays allocated:
  collecting them would cost the cold start that same full traversal.

The Python documentation describes the pattern for ``gc.freeze`` (disable early,
freeze once the long-lived state is built). A process that never reaches ``resume``
is one whose start-up failed, and it exits.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Mapping

_lock = threading.Lock()
_paused = False


# Lambda sets the first in every function's environment; the Web Adapter's port is set
# wherever the server is started as the adapter starts it (the local topology too).
ORIGIN_MARKERS = ("AWS_LAMBDA_FUNCTION_NAME", "AWS_LWA_PORT")


def origin_process(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is a server process's, started as the Web Adapter starts it."""
    return any(environ.get(name, "").strip() for name in ORIGIN_MARKERS)


def pause_from_environment(environ: Mapping[str, str]) -> bool:
    """Turn the collector off in an origin's process; True when this call paused it."""
    global _paused
    with _lock:
        if _paused or not origin_process(environ) or not gc.isenabled():
            return False
        gc.disable()
        _paused = True
        return True


def resume() -> int:
    """Freeze what start-up built and turn the collector back on, if ``pause_from_environment``
    turned it off (otherwise nothing changes). Answers how many tracked objects start-up made
    while the collector was off (0: nothing done): the count the collector keeps, read in
    constant time (``gc.get_freeze_count()`` walks the whole frozen list: 20 ms here)."""
    global _paused
    with _lock:
        if not _paused:
            return 0
        made = gc.get_count()[0]
        gc.freeze()
        gc.enable()
        _paused = False
        return max(made, 1)


pause_from_environment(os.environ)
