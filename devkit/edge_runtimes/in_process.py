"""The shipped edge code run in this process: the viewer-request CloudFront Function
(JavaScript) in QuickJS, and the origin-request Lambda@Edge function (Python): the router
imported from its rendered source (``RouterFunction``), or the gate imported from its
package folder with the libraries it ships (``PackageFunction``).

QuickJS (``quickjs-ng``) is an interpreter, as CloudFront's runtime is, and runs in the
calling thread. What ``cloudfront-js-2.0`` gives a function and QuickJS lacks comes from
``cloudfront_runtime.js``, evaluated before the function: ``Buffer`` and the
``cloudfront`` module (``cf.kvs()``, a KeyValueStore handle). The function's
``import cf from 'cloudfront';`` line, which a script cannot hold, is replaced by a
binding to that stand-in; every other byte runs as shipped (``runnable_code``, which
the other engines in ``njs_node`` use too). The KeyValueStore is read through a
``KeyValueReader`` (``get(key) -> str | None``, ``None`` for a missing key, raising for a
store that fails), called for each key in ``kvs_keys`` before every event; its values
reach the engine only when they changed. Without a reader no store is associated
(``cf.kvs()`` throws when the function loads, as in CloudFront), unless
``kvs_associated=True`` says a reader will be given per call (``run(event, kvs)``; a call
without one then finds the store unavailable).

A function that throws, runs too long or returns nothing is an ``EdgeFunctionError``
carrying the status and error name CloudFront reports (503/502); what a result means
(a request to go on with, or a response) is the local edge's to read
(``local.cloudfront.events``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import types
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import quickjs

from edge.viewer_function import CLOUDFRONT_IMPORT
from functions.contract import REGION_HEALTH_KEY

# CloudFront Functions' code size limit; the deployed code must fit, so must ours.
MAX_FUNCTION_CODE_BYTES = 10 * 1024
# A CloudFront Function gets about a millisecond of compute; locally (an interpreter on
# a shared or debug machine) a generous bound still catches a function that loops. It
# cuts each eval and each pending job that runs the handler's continuations.
FUNCTION_TIMEOUT_S = 1.0
# How QuickJS reports an eval or job cut at its time limit.
INTERRUPTED = "InternalError: interrupted"
# The KeyValueStore a function reads: the value of a key, None when it is missing;
# raising stands for the store failing.
KeyValueReader = Callable[[str], "str | None"]
# The keys read before every event (what the program's function reads).
KVS_KEYS = (REGION_HEALTH_KEY,)
RUNTIME_JS = Path(__file__).with_name("cloudfront_runtime.js")
CLOUDFRONT_STAND_IN = "var cf = __cf;"
# The function's caller, defined once per context (``__cf_call(eventJson)``): the event
# goes in as JSON text, parsed in the engine (an object literal would turn a "__proto__"
# header or query name into a prototype), and the result comes out as JSON text, so only
# plain data crosses. A handler that returns at once answers its text; an async one (the
# shipped one is) answers null, and once the context's pending jobs ran, ``__cf_result()``
# answers the settled text, ``{e: what it rejected with}``, or null for a promise still
# pending (nothing in the runtime is left to settle it).
CALLER_JS = (
    "var __cf_out = null;"
    " var __cf_call = function (eventJson) {"
    " var s = function (r) { return r === undefined ? 'undefined' : JSON.stringify(r); };"
    " var r = handler(JSON.parse(eventJson));"
    " if (!(r && typeof r.then === 'function')) { return s(r); }"
    " var o = __cf_out = {};"
    " var f = function (e) { o.e = String(e) + (e && e.stack ? '\\n' + e.stack : ''); };"
    " r.then(function (v) { try { o.t = s(v); } catch (e) { f(e); } }, f);"  # one job once it settles
    " return null; };"
    " var __cf_result = function () { var o = __cf_out; __cf_out = null;"
    " return o.e !== undefined ? {e: o.e} : o.t === undefined ? null : o.t; };"
)
_UNSET: Any = object()


class EdgeFunctionError(Exception):
    """The edge code failed as CloudFront would report it: a status and CloudFront's error name."""

    def __init__(self, status: int, error: str, detail: str):
        super().__init__(f"{error}: {detail}")
        self.status, self.error, self.detail = status, error, detail



def runnable_code(code: str) -> str:
    """The function's code as a plain JS engine runs it: its first line, when it is
    ``import cf from 'cloudfront';``, becomes a binding to the runtime's stand-in
    (``cloudfront_runtime.js``, which must be evaluated first); the rest is unchanged."""
    first, newline, rest = code.partition("\n")
    if first.strip() == CLOUDFRONT_IMPORT:
        return CLOUDFRONT_STAND_IN + newline + rest
    if "from 'cloudfront'" in code or 'from "cloudfront"' in code:
        raise ValueError(f"the cloudfront module must be imported on the first line, as {CLOUDFRONT_IMPORT}")
    return code


def runtime_js() -> str:
    """The stand-ins for what cloudfront-js-2.0 provides (see ``cloudfront_runtime.js``)."""
    return RUNTIME_JS.read_text(encoding="utf-8")


def kvs_snapshot(reader: KeyValueReader | None, keys: Iterable[str] = KVS_KEYS) -> dict[str, Any] | None:
    """What the runtime's KeyValueStore stand-in serves for one event (``__cf.__store``)."""
    if reader is None:
        return None
    values: dict[str, str] = {}
    errors: dict[str, str] = {}
    for key in keys:
        try:
            value = reader(key)
        except Exception as exc:  # the store failing, as the function would see it
            errors[key] = f"{type(exc).__name__}: {exc}"
            continue
        if value is not None:
            values[key] = value
    return {"values": values, "errors": errors}


def js_context(timeout_s: float = FUNCTION_TIMEOUT_S) -> quickjs.Context:
    """A fresh QuickJS context holding the runtime's stand-ins, its evals and pending jobs
    each cut at ``timeout_s``. It must stay on the thread that made it."""
    ctx = quickjs.Context()
    ctx.set_time_limit(timeout_s)
    ctx.eval(runtime_js())
    return ctx


@dataclass
class _Loaded:
    """One thread's context with the function loaded, and the store snapshot it holds."""

    ctx: quickjs.Context
    call: quickjs.Object  # __cf_call and __cf_result (CALLER_JS), called as functions: no script to compile
    result: quickjs.Object
    stored: dict[str, Any] | None = _UNSET  # the snapshot the context holds (None: no store)


class ViewerFunction:
    """A CloudFront Function's code, loaded into QuickJS (quickjs-ng), called per event.

    QuickJS is an interpreter, as CloudFront's runtime is, and it runs in the calling
    thread: an event costs no crossing to an engine thread and back (V8 in mini-racer,
    the engine before it, ran every call on a thread of its own: 0.2-0.3 ms an event on
    the local edge, as much as the function and its JSON). A QuickJS runtime belongs to
    the thread that made it (its stack checks are that thread's), so each calling thread
    gets its own context, loaded on its first event (or by ``warm()``); within a thread
    an event runs to its end before the next one starts, so each event reads its own
    result, and the caller (the local edge's event loop) waits for it, at most its time
    limit, as V8's one engine thread made every other event wait before.
    """

    def __init__(self, code: str, timeout_s: float = FUNCTION_TIMEOUT_S, *, kvs: KeyValueReader | None = None,
                 kvs_keys: Sequence[str] = KVS_KEYS, kvs_associated: bool | None = None):
        size = len(code.encode("utf-8"))
        if size > MAX_FUNCTION_CODE_BYTES:
            raise ValueError(f"the CloudFront Function is {size} bytes; CloudFront allows {MAX_FUNCTION_CODE_BYTES}")
        self.timeout_s = timeout_s
        self.kvs = kvs
        self.kvs_keys = tuple(kvs_keys)
        self._code = code
        self._associated = kvs is not None if kvs_associated is None else kvs_associated
        self._threads = threading.local()
        self.warm()  # a function that does not load fails here, in its creator's thread

    def warm(self) -> None:
        """Load the function for the calling thread now, not on its first event (the
        local edge does it for its serving thread at start-up)."""
        self._loaded()

    def _loaded(self) -> _Loaded:
        loaded: _Loaded | None = getattr(self._threads, "loaded", None)
        if loaded is None:
            ctx = self._load()
            loaded = self._threads.loaded = _Loaded(ctx, ctx.get("__cf_call"), ctx.get("__cf_result"))
        return loaded

    def _load(self) -> quickjs.Context:
        ctx = js_context(self.timeout_s)
        ctx.eval(f"__cf.__associate({json.dumps(self._associated)});")
        ctx.eval(runnable_code(self._code))
        if ctx.eval("typeof handler") != "function":
            raise ValueError("the CloudFront Function code defines no handler(event) function")
        ctx.eval(CALLER_JS)
        return ctx

    def __call__(self, event: dict[str, Any]) -> Any:
        return self.run(event)

    def run(self, event: dict[str, Any], kvs: KeyValueReader | None = _UNSET) -> Any:
        """The handler's (settled) result for one event; ``kvs`` replaces the function's
        KeyValueStore reader for this call."""
        loaded = self._loaded()
        ctx = loaded.ctx
        store = self._store(loaded, self.kvs if kvs is _UNSET else kvs)
        with _function_errors():
            if store:
                ctx.eval(store)
            text = loaded.call(_event_text(event))  # the event's text as a JS string: nothing to parse as code
            if text is None:  # an async handler: it settles as the pending jobs run
                while ctx.execute_pending_job():
                    pass
                text = loaded.result()
        if isinstance(text, quickjs.Object):
            raise EdgeFunctionError(503, "FunctionExecutionError", f"the function threw: {json.loads(text.json())['e']}")
        if text is None:
            raise EdgeFunctionError(503, "FunctionExecutionError",
                                    "the function's promise never settled (the runtime has no timers or I/O to wait for)")
        return _function_result(text)

    def call(self, name: str, *args: Any) -> Any:
        """One of the code's own functions on plain-data arguments, without the handler's
        safety net (raises EdgeFunctionError if it throws)."""
        ctx = self._loaded().ctx
        with _function_errors():
            text = ctx.eval(f"JSON.stringify({name}.apply(null, JSON.parse({json.dumps(json.dumps(list(args)))})))")
        return None if text is None else json.loads(text)

    def _store(self, loaded: _Loaded, reader: KeyValueReader | None) -> str:
        """The script statement that updates the context's KeyValueStore snapshot, if it changed."""
        snapshot = kvs_snapshot(reader, self.kvs_keys)
        if snapshot == loaded.stored:  # compared as data: written out only when it changed
            return ""
        loaded.stored = snapshot
        return "__cf.__store(JSON.parse(" + json.dumps(json.dumps(snapshot)) + "));"

    def close(self) -> None:
        """Forget every thread's context (a later event loads the function again)."""
        self._threads = threading.local()


@contextlib.contextmanager
def _function_errors() -> Iterator[None]:
    """A function that runs too long or throws, as CloudFront answers it (503)."""
    try:
        yield
    except quickjs.StackOverflow as exc:
        raise EdgeFunctionError(503, "FunctionExecutionError", f"the function threw: {exc}") from None
    except quickjs.JSException as exc:
        if str(exc).startswith(INTERRUPTED):
            raise EdgeFunctionError(503, "FunctionExecutionError", "the function ran past its time limit") from None
        raise EdgeFunctionError(503, "FunctionExecutionError", f"the function threw: {exc}") from None


def _event_text(event: dict[str, Any]) -> str:
    """An event as JSON text: orjson's (a tenth of ``json.dumps``'s time for a request's
    event, 1.5 against 14 us), ``json.dumps``'s for what orjson refuses (integers past 64
    bits, lone surrogates: never in an event the edge builds, whose text is latin-1)."""
    try:
        return orjson.dumps(event).decode()
    except TypeError:
        return json.dumps(event)


def _function_result(text: Any) -> Any:
    if text == "undefined" or not isinstance(text, str):
        raise EdgeFunctionError(502, "FunctionInvalidResponseError", "the function returned nothing")
    return orjson.loads(text)  # JSON.stringify's text: always JSON


class _RouterContext:
    """The Lambda context a router invocation gets. Its request id is made when read (a
    uuid4 is a random read from the kernel: the edge's every request would pay it, and the
    router never reads it)."""

    function_name = "local-edge-router"

    @functools.cached_property
    def aws_request_id(self) -> str:
        return str(uuid.uuid4())

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 5000


class _EdgeHandler:
    """A Lambda@Edge Python handler, called as Lambda calls it."""

    _handler: Any

    def __call__(self, event: dict[str, Any], *, owned: bool = False) -> Any:
        """Run the handler on ``event``. The function may change its event: it gets its own
        copy, as Lambda's is, unless ``owned`` says the caller built ``event`` for this one
        call and never reads it again (the edge proxy: a new event per request), which
        makes the event its own already."""
        context = _RouterContext()
        if not owned:
            event = json.loads(json.dumps(event))
        try:
            return self._handler(event, context)
        except Exception as exc:
            raise EdgeFunctionError(503, "LambdaExecutionError", f"{type(exc).__name__}: {exc}") from None


class PackageFunction(_EdgeHandler):
    """A Lambda@Edge Python handler imported from its package folder (the program's zip,
    extracted), as Lambda imports ``/var/task``: the folder first on ``sys.path``, so the
    handler and the libraries the package ships (wheels for Lambda's platform) are the ones
    imported. Lambda gives each function a process of its own; here the package shares
    the calling process, so a library it ships that this process imported already from
    elsewhere is refused rather than silently used (``ValueError`` naming it)."""

    def __init__(self, folder: str | Path, handler: str):
        import importlib
        import sys

        root = Path(folder).resolve()
        module_name, _, function_name = handler.rpartition(".")
        shipped = {entry.name.partition(".")[0] for entry in root.iterdir()
                   if entry.name != "__pycache__" and not entry.name.endswith((".dist-info", ".pth"))}
        elsewhere = sorted(name for name in shipped if name in sys.modules
                           and not Path(getattr(sys.modules[name], "__file__", None) or root / "x").resolve()
                           .is_relative_to(root))
        if elsewhere:
            raise ValueError(f"{', '.join(elsewhere)} already imported from outside {root}: the package's own "
                             "copies must be the ones the handler runs with")
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        module = importlib.import_module(module_name)
        if not Path(module.__file__ or "").resolve().is_relative_to(root):
            raise ValueError(f"{module_name} was imported from {module.__file__}, not from the package {root}")
        fn = getattr(module, function_name, None)
        if not callable(fn):
            raise ValueError(f"the package defines no {handler}(event, context)")
        self._handler = fn
        self.module = module


class RouterFunction(_EdgeHandler):
    """A Lambda@Edge Python handler, imported from its rendered source (as Lambda imports the zip's module)."""

    def __init__(self, source: str, handler: str = "geo_router.handler"):
        module_name, _, function_name = handler.rpartition(".")
        module = types.ModuleType(module_name)
        module.__file__ = f"<rendered {module_name}.py>"
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # the program's own rendered code
        fn = getattr(module, function_name, None)
        if not callable(fn):
            raise ValueError(f"the router source defines no {function_name}(event, context)")
        self._handler = fn
        self.module = module  # the imported router, for tests that call its functions directly
