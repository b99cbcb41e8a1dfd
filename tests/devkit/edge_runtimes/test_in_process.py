"""The edge code's runtimes in this process (``devkit.edge_runtimes.in_process``): QuickJS
for the CloudFront Function from every way in (threads, an event loop), its errors, time
limit, size limit and KeyValueStore, and the Lambda@Edge router imported from its source."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from devkit.edge_runtimes.in_process import (
    EdgeFunctionError,
    RouterFunction,
    ViewerFunction,
    kvs_snapshot,
    runnable_code,
)
from edge.protocol import AVOID_REGIONS_HEADER
from edge.viewer_function import render_viewer_function
from functions.contract import REGION_HEALTH_KEY
from local.cloudfront.events import EdgeResponse, ViewerRequest, read_function_result
from stack_config.loading import load_from_stack_file
from tests.local.cloudfront.test_events import (
    local_viewer_code,
    origin_event,
    signed_token,
    viewer_event,
    viewer_request,
)


@pytest.fixture(scope="module")
def viewer() -> Iterator[ViewerFunction]:
    fn = ViewerFunction(local_viewer_code())
    yield fn
    fn.close()


def test_each_calling_thread_gives_each_event_the_verdict_the_creators_thread_does(viewer: ViewerFunction) -> None:
    # A QuickJS context stays on its thread: another thread (the edge's serving thread in
    # the tests, a tool's worker) gets its own, loaded on its first event.
    events = [viewer_event(viewer_request(authorization=f"Bearer {token}", accept="application/json"))
              for token in (signed_token(), "a.b.c", signed_token(), signed_token(exp=int(time.time()) - 600), signed_token())]
    expected = [viewer(event) for event in events]
    assert [_call_from_another_thread(viewer, event) for event in events] == expected


def test_events_from_several_threads_at_once_each_get_their_own_verdict(viewer: ViewerFunction) -> None:
    # The defect this guards against: one event reading another's result (mixed headers,
    # a wrong Content-Length) when calls overlap.
    events = [viewer_event(viewer_request(authorization=f"Bearer {token}", accept="application/json", **{"x-n": str(i)}))
              for i, token in enumerate([signed_token(), "a.b.c"] * 10)]
    expected = [viewer(event) for event in events]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(viewer, events)) == expected


def test_events_from_asyncio_tasks_each_get_their_own_verdict(viewer: ViewerFunction) -> None:
    # The edge proxy's way in: tasks of one loop, each calling the function in the loop's thread.
    events = [viewer_event(viewer_request(authorization=f"Bearer {token}", accept="application/json", **{"x-n": str(i)}))
              for i, token in enumerate([signed_token(), "a.b.c"] * 10)]
    expected = [viewer(event) for event in events]

    async def all_at_once() -> list[object]:
        results: list[object] = [None] * len(events)

        async def one(i: int) -> None:
            await anyio.sleep(0)
            results[i] = viewer(events[i])

        async with anyio.create_task_group() as group:
            for i in range(len(events)):
                group.start_soon(one, i)
        return results

    assert anyio.run(all_at_once) == expected


def _call_from_another_thread(fn: ViewerFunction, event: dict) -> object:
    """A caller on a thread of its own (its first event loads the function there)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, event).result()


def _call_from_a_loop(fn: ViewerFunction, event: dict) -> object:
    """The edge proxy's way in: from a coroutine, in the loop's thread."""
    async def in_a_task() -> object:
        return fn(event)

    return anyio.run(in_a_task)


# Every way in: a caller's thread (tests, tools), another thread, and an asyncio loop's.
CALLS = {"thread": ViewerFunction.__call__, "another-thread": _call_from_another_thread, "loop": _call_from_a_loop}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_throwing_function_is_a_503_and_a_silent_one_a_502(call: str) -> None:
    run = CALLS[call]
    throwing = ViewerFunction("function handler(event) { throw new Error('boom'); }")
    silent = ViewerFunction("function handler(event) { }")
    looping = ViewerFunction("function handler(event) { while (true) {} }", timeout_s=0.2)
    rejecting = ViewerFunction("async function handler(event) { throw new Error('async boom'); }")
    try:
        with pytest.raises(EdgeFunctionError) as thrown:
            run(throwing, viewer_event(viewer_request()))
        assert thrown.value.status == 503 and "boom" in thrown.value.detail
        with pytest.raises(EdgeFunctionError) as rejected:
            run(rejecting, viewer_event(viewer_request()))
        assert rejected.value.status == 503 and "async boom" in rejected.value.detail
        with pytest.raises(EdgeFunctionError) as nothing:
            run(silent, viewer_event(viewer_request()))
        assert nothing.value.status == 502
        with pytest.raises(EdgeFunctionError) as looped:
            run(looping, viewer_event(viewer_request()))
        assert looped.value.status == 503 and "time limit" in looped.value.detail
    finally:
        for fn in (throwing, silent, looping, rejecting):
            fn.close()


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("body", [
    "return {statusCode: 204, headers: {}};",  # settles at once
    # settles after a chain of jobs (what the runtime can wait for: it has no timers or I/O)
    "await new Promise(function (r) { Promise.resolve().then(function () { r(); }); });"
    " await null; return {statusCode: 204, headers: {}};",
])
def test_an_async_handler_is_awaited(call: str, body: str) -> None:
    fn = ViewerFunction("async function handler(event) { " + body + " }")
    try:
        for _ in range(2):  # and the next call reads its own result, not the last one's
            assert read_function_result(CALLS[call](fn, viewer_event(viewer_request()))) == EdgeResponse(204, [], b"")
    finally:
        fn.close()


def test_a_call_of_one_of_the_codes_functions_answers_its_value_and_a_throw_is_an_edge_function_error() -> None:
    fn = ViewerFunction("function handler(event) { return event.request; }\n"
                        "function pair(a, b) { if (b === 'boom') { throw new Error('boom'); } return {a: a, b: b}; }")
    try:
        assert fn.call("pair", {"x": [1]}, "y") == {"a": {"x": [1]}, "b": "y"}
        with pytest.raises(EdgeFunctionError, match="boom"):
            fn.call("pair", 1, "boom")
    finally:
        fn.close()


@pytest.mark.parametrize("loop", ["while (true) {}", "await null; while (true) {}"], ids=["before-await", "after-await"])
def test_after_an_event_cut_at_its_time_limit_the_next_event_is_answered(loop: str) -> None:
    fn = ViewerFunction("async function handler(event) {"
                        f" if (event.request.uri === '/loop') {{ {loop} }}"
                        " await null; return event.request; }", timeout_s=0.2)
    try:
        with pytest.raises(EdgeFunctionError, match="time limit"):
            fn(viewer_event(ViewerRequest("GET", "/loop", [], [])))
        for uri in ("/next", "/and-the-next"):
            after = read_function_result(fn(viewer_event(ViewerRequest("GET", uri, [], []))))
            assert isinstance(after, ViewerRequest) and after.uri == uri
    finally:
        fn.close()


def test_an_async_handler_that_never_settles_is_a_503_and_the_next_event_is_answered() -> None:
    # CloudFront would cut it at its compute limit; here nothing is left that could settle it.
    fn = ViewerFunction("async function handler(event) {"
                        " if (event.request.uri === '/wait') { await new Promise(function () {}); }"
                        " return event.request; }")
    try:
        with pytest.raises(EdgeFunctionError) as waiting:
            fn(viewer_event(ViewerRequest("GET", "/wait", [], [])))
        assert waiting.value.status == 503 and "never settled" in waiting.value.detail
        after = read_function_result(fn(viewer_event(ViewerRequest("GET", "/next", [], []))))
        assert isinstance(after, ViewerRequest) and after.uri == "/next"
    finally:
        fn.close()


@pytest.mark.parametrize("call", sorted(CALLS))
def test_an_async_handler_looping_after_its_first_await_is_cut_at_its_time_limit(call: str) -> None:
    # Its continuation runs as a pending job, which the time limit cuts as it cuts an eval.
    fn = ViewerFunction("async function handler(event) { await null; while (true) {} }", timeout_s=0.2)
    try:
        with pytest.raises(EdgeFunctionError) as looped:
            CALLS[call](fn, viewer_event(viewer_request()))
        assert looped.value.status == 503 and "time limit" in looped.value.detail
    finally:
        fn.close()


def test_code_over_cloudfronts_size_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="10240"):
        ViewerFunction("function handler(e) { return e.request; }\n//" + "x" * 10240)


def test_a_router_exception_is_a_503() -> None:
    broken = RouterFunction("def handler(event, context):\n    raise KeyError('origins')\n", "geo_router.handler")
    with pytest.raises(EdgeFunctionError) as info:
        broken(origin_event([]))
    assert info.value.status == 503 and info.value.error == "LambdaExecutionError"


def test_a_router_changes_its_own_copy_of_the_event_unless_the_caller_hands_the_event_over() -> None:
    mutating = RouterFunction(
        "SEEN = []\n"
        "def handler(event, context):\n"
        "    SEEN.append(event)\n"
        "    request = event['Records'][0]['cf']['request']\n"
        "    request['headers']['x-added'] = [{'key': 'X-Added', 'value': '1'}]\n"
        "    return request\n"
    )
    kept = origin_event([("host", "127.0.0.1:8080")])
    mutating(kept)
    assert "x-added" not in kept["Records"][0]["cf"]["request"]["headers"]  # a copy, as Lambda's
    handed_over = origin_event([("host", "127.0.0.1:8080")])
    mutating(handed_over, owned=True)
    assert mutating.module.SEEN[-1] is handed_over  # the edge proxy's: built for this call, not copied


def _health(*avoid: str) -> str:
    return json.dumps({"v": 1, "avoid": list(avoid), "at": "2026-12-01T08:00:00.000Z"})


@pytest.fixture(scope="module")
def store() -> dict[str, str]:
    return {}


@pytest.fixture(scope="module")
def reading(store: dict[str, str]) -> Iterator[ViewerFunction]:
    """The rendered function with a KeyValueStore read through a reader of ``store``."""
    stack = load_from_stack_file("prod").viewer_function_settings()
    fn = ViewerFunction(render_viewer_function(stack), kvs=store.get)
    yield fn
    fn.close()


def _avoid_header(fn: ViewerFunction) -> list[str]:
    result = read_function_result(fn(viewer_event(ViewerRequest("GET", "/healthz", [], [("host", "h")]))))
    assert isinstance(result, ViewerRequest)
    return [v for n, v in result.headers if n == AVOID_REGIONS_HEADER]


def test_what_the_reader_holds_reaches_the_function_on_the_next_event(reading, store):
    store.pop(REGION_HEALTH_KEY, None)
    assert _avoid_header(reading) == []
    store[REGION_HEALTH_KEY] = _health("eu-west-1")
    assert _avoid_header(reading) == ["eu-west-1"]
    store[REGION_HEALTH_KEY] = _health()
    assert _avoid_header(reading) == []


def test_an_unchanged_store_is_not_sent_to_the_engine_again(reading, store):
    loaded = reading._loaded()  # this thread's context
    store[REGION_HEALTH_KEY] = _health("us-east-1")
    assert "__cf.__store" in reading._store(loaded, store.get)
    assert reading._store(loaded, store.get) == ""
    store[REGION_HEALTH_KEY] = _health("ap-northeast-1")
    assert "ap-northeast-1" in reading._store(loaded, store.get)


def test_a_failing_reader_is_a_failing_store_the_function_survives():
    def broken(key: str) -> str | None:
        raise OSError("emulator file unreadable")

    stack = load_from_stack_file("prod").viewer_function_settings()
    fn = ViewerFunction(render_viewer_function(stack), kvs=broken)
    try:
        assert kvs_snapshot(broken) == {"values": {}, "errors": {REGION_HEALTH_KEY: "OSError: emulator file unreadable"}}
        assert _avoid_header(fn) == []
    finally:
        fn.close()


def test_the_cloudfront_import_must_be_the_first_line():
    with pytest.raises(ValueError, match="first line"):
        runnable_code("var x = 1;\nimport cf from 'cloudfront';\nfunction handler(e) { return e.request; }")
    assert runnable_code("function handler(e) { return e.request; }") == "function handler(e) { return e.request; }"


def test_a_process_holding_viewer_functions_at_exit_exits():
    """A process still holding contexts at exit (the test suite, a local edge stopped
    with Ctrl-C) exits: an engine whose teardown joined a thread of its own once hung
    there (mini-racer's, the engine before QuickJS)."""
    script = textwrap.dedent("""
        from devkit.edge_runtimes.in_process import ViewerFunction
        HELD = [ViewerFunction("function handler(event) { return event.request; }") for _ in range(3)]
        assert HELD[0]({"request": {"uri": "/"}})["uri"] == "/"
        print("done")
    """)
    root = Path(__file__).resolve().parents[3]
    try:
        done = subprocess.run([sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit after its last statement: a JS context's teardown hung")
    assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr


def test_each_router_invocation_gets_a_context_with_its_own_request_id():
    # Given a router that answers what Lambda's context tells it
    source = ("def handler(event, context):\n"
              "    return [context.function_name, context.aws_request_id, context.aws_request_id,\n"
              "            context.get_remaining_time_in_millis()]\n")
    router = RouterFunction(source, "probe_router.handler")
    # When it runs twice, Then each run has one request id of its own (a UUID), read as often as it likes
    first, second = router({}), router({})
    assert first[0] == "local-edge-router" and first[3] > 0
    assert first[1] == first[2] and str(uuid.UUID(first[1])) == first[1]
    assert second[1] != first[1]
