"""CloudFront's events and the two edge runtimes, on the program's own rendered code."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from edge.router import OriginTarget, render_router
from edge.viewer_function import ViewerFunctionSettings, render_viewer_function
from local.cloudfront import (
    EdgeFunctionError,
    EdgeResponse,
    OriginConfig,
    OriginRequest,
    RouterFunction,
    ViewerFunction,
    ViewerRequest,
    format_query,
    kvs_snapshot,
    origin_request_event,
    parse_query,
    read_function_result,
    read_router_result,
    runnable_code,
    viewer_request_event,
)
from mcpedge.config import load_from_stack_file
from mcpedge.constants import AVOID_REGIONS_HEADER, REGION_HEALTH_KEY

ISSUER = "http://127.0.0.1:8100/"
AUDIENCE = "http://127.0.0.1:8080/mcp"
PORTS = {"us-east-1": 8110, "eu-west-1": 8111, "ap-southeast-1": 8112, "ap-northeast-1": 8113}
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def viewer() -> Iterator[ViewerFunction]:
    stack = ViewerFunctionSettings.from_config(load_from_stack_file("prod"))
    local = dataclasses.replace(stack, issuer=ISSUER, audience=AUDIENCE, public_host="127.0.0.1:8080",
                                public_scheme="http")
    fn = ViewerFunction(render_viewer_function(local))
    yield fn
    fn.close()


@pytest.fixture(scope="module", params=["sync", "async"])
def pass_through(request: pytest.FixtureRequest) -> Iterator[ViewerFunction]:
    # An async handler's result comes back through the pending jobs and __cf_result, a
    # plain one's straight from the call: both carry the request back alike.
    prefix = "async " if request.param == "async" else ""
    fn = ViewerFunction(prefix + "function handler(event) { return event.request; }")
    yield fn
    fn.close()


@pytest.fixture(scope="module")
def router() -> RouterFunction:
    source = render_router({r: OriginTarget("127.0.0.1", p, "http") for r, p in PORTS.items()}, "us-east-1")
    return RouterFunction(source)


def _request(**headers: str) -> ViewerRequest:
    return ViewerRequest(method="POST", uri="/mcp", querystring=[], headers=[(k.replace("_", "-"), v)
                                                                            for k, v in headers.items()])


def _event(request: ViewerRequest) -> dict:
    return viewer_request_event(request, client_ip="127.0.0.1", distribution_domain="127.0.0.1",
                                distribution_id="E1", request_id="r1")


def _token(**overrides: object) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 600, "iat": now, **overrides}
    return jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "k"})


def test_the_rendered_viewer_function_turns_away_a_missing_token_with_the_metadata_url(viewer: ViewerFunction) -> None:
    result = read_function_result(viewer(_event(_request(host="127.0.0.1:8080"))))
    assert isinstance(result, EdgeResponse) and result.status == 401
    challenge = dict(result.headers)["www-authenticate"]
    assert 'resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"' in challenge


# Tokens are built when the test runs (a long suite would expire ones built at collection).
@pytest.mark.parametrize("make_token", [
    lambda: "not-a-jwt",
    lambda: "a.b.c",
    lambda: _token(exp=int(time.time()) - 600),
    lambda: _token(iss="https://auth.acme.example/"),
], ids=["not-a-jwt", "bad-segments", "expired", "stack-issuer"])
def test_the_rendered_viewer_function_rejects_bad_tokens(viewer: ViewerFunction, make_token: Callable[[], str]) -> None:
    result = read_function_result(viewer(_event(_request(authorization=f"Bearer {make_token()}"))))
    assert isinstance(result, EdgeResponse) and result.status == 401
    assert 'error="invalid_token"' in dict(result.headers)["www-authenticate"]


def test_the_rendered_viewer_function_passes_a_good_token_unchanged(viewer: ViewerFunction) -> None:
    request = _request(authorization=f"Bearer {_token()}", accept="application/json")
    assert read_function_result(viewer(_event(request))) == request


def test_each_calling_thread_gives_each_event_the_verdict_the_creators_thread_does(viewer: ViewerFunction) -> None:
    # A QuickJS context stays on its thread: another thread (the edge's serving thread in
    # the tests, a tool's worker) gets its own, loaded on its first event.
    events = [_event(_request(authorization=f"Bearer {token}", accept="application/json"))
              for token in (_token(), "a.b.c", _token(), _token(exp=int(time.time()) - 600), _token())]
    expected = [viewer(event) for event in events]
    assert [_call_from_another_thread(viewer, event) for event in events] == expected


def test_events_from_several_threads_at_once_each_get_their_own_verdict(viewer: ViewerFunction) -> None:
    # The defect this guards against: one event reading another's result (mixed headers,
    # a wrong Content-Length) when calls overlap.
    events = [_event(_request(authorization=f"Bearer {token}", accept="application/json", **{"x-n": str(i)}))
              for i, token in enumerate([_token(), "a.b.c"] * 10)]
    expected = [viewer(event) for event in events]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(viewer, events)) == expected


def test_events_from_asyncio_tasks_each_get_their_own_verdict(viewer: ViewerFunction) -> None:
    # The edge proxy's way in: tasks of one loop, each calling the function in the loop's thread.
    events = [_event(_request(authorization=f"Bearer {token}", accept="application/json", **{"x-n": str(i)}))
              for i, token in enumerate([_token(), "a.b.c"] * 10)]
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
            run(throwing, _event(_request()))
        assert thrown.value.status == 503 and "boom" in thrown.value.detail
        with pytest.raises(EdgeFunctionError) as rejected:
            run(rejecting, _event(_request()))
        assert rejected.value.status == 503 and "async boom" in rejected.value.detail
        with pytest.raises(EdgeFunctionError) as nothing:
            run(silent, _event(_request()))
        assert nothing.value.status == 502
        with pytest.raises(EdgeFunctionError) as looped:
            run(looping, _event(_request()))
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
            assert read_function_result(CALLS[call](fn, _event(_request()))) == EdgeResponse(204, [], b"")
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
            fn(_event(ViewerRequest("GET", "/loop", [], [])))
        for uri in ("/next", "/and-the-next"):
            after = read_function_result(fn(_event(ViewerRequest("GET", uri, [], []))))
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
            fn(_event(ViewerRequest("GET", "/wait", [], [])))
        assert waiting.value.status == 503 and "never settled" in waiting.value.detail
        after = read_function_result(fn(_event(ViewerRequest("GET", "/next", [], []))))
        assert isinstance(after, ViewerRequest) and after.uri == "/next"
    finally:
        fn.close()


@pytest.mark.parametrize("call", sorted(CALLS))
def test_an_async_handler_looping_after_its_first_await_is_cut_at_its_time_limit(call: str) -> None:
    # Its continuation runs as a pending job, which the time limit cuts as it cuts an eval.
    fn = ViewerFunction("async function handler(event) { await null; while (true) {} }", timeout_s=0.2)
    try:
        with pytest.raises(EdgeFunctionError) as looped:
            CALLS[call](fn, _event(_request()))
        assert looped.value.status == 503 and "time limit" in looped.value.detail
    finally:
        fn.close()


def test_code_over_cloudfronts_size_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="10240"):
        ViewerFunction("function handler(e) { return e.request; }\n//" + "x" * 10240)


def _origin_event(headers: list[tuple[str, str]]) -> dict:
    origin = OriginConfig("127.0.0.1", PORTS["us-east-1"], "http", 60, 5, {"x-mcp-edge-origin-secret": "s" * 32})
    return origin_request_event(method="POST", uri="/mcp", querystring="a=1", headers=headers, client_ip="10.0.0.1",
                                origin=origin, distribution_domain="127.0.0.1", distribution_id="E1", request_id="r")


@pytest.mark.parametrize(("country", "region"), [("JP", "ap-northeast-1"), ("DE", "eu-west-1"), ("SG", "ap-southeast-1"),
                                                 ("US", "us-east-1"), ("SE", "eu-west-1"), (None, "us-east-1")])
def test_the_rendered_router_picks_the_nearest_local_origin_and_keeps_the_origin_secret(
    router: RouterFunction, country: str | None, region: str
) -> None:
    headers = [("host", "127.0.0.1:8080"), ("x-mcp-edge-origin-secret", "forged")]
    if country:
        headers.append(("cloudfront-viewer-country", country))
    result = read_router_result(router(_origin_event(headers)))
    assert isinstance(result, OriginRequest)
    assert result.url == f"http://127.0.0.1:{PORTS[region]}/mcp?a=1"
    sent = dict(result.headers)
    assert sent["host"] == f"127.0.0.1:{PORTS[region]}"
    # The distribution's custom header wins over a viewer's forged one, and only one is sent.
    assert [v for n, v in result.headers if n == "x-mcp-edge-origin-secret"] == ["s" * 32]


def test_a_router_exception_is_a_503() -> None:
    broken = RouterFunction("def handler(event, context):\n    raise KeyError('origins')\n", "geo_router.handler")
    with pytest.raises(EdgeFunctionError) as info:
        broken(_origin_event([]))
    assert info.value.status == 503 and info.value.error == "LambdaExecutionError"


def test_a_router_response_is_sent_as_is() -> None:
    answering = RouterFunction(
        "def handler(event, context):\n"
        "    return {'status': '403', 'headers': {'content-type': [{'key': 'Content-Type', 'value': 'text/plain'}]},"
        " 'body': 'no'}\n"
    )
    assert read_router_result(answering(_origin_event([]))) == EdgeResponse(403, [("content-type", "text/plain")], b"no")


def test_a_router_changes_its_own_copy_of_the_event_unless_the_caller_hands_the_event_over() -> None:
    mutating = RouterFunction(
        "SEEN = []\n"
        "def handler(event, context):\n"
        "    SEEN.append(event)\n"
        "    request = event['Records'][0]['cf']['request']\n"
        "    request['headers']['x-added'] = [{'key': 'X-Added', 'value': '1'}]\n"
        "    return request\n"
    )
    kept = _origin_event([("host", "127.0.0.1:8080")])
    mutating(kept)
    assert "x-added" not in kept["Records"][0]["cf"]["request"]["headers"]  # a copy, as Lambda's
    handed_over = _origin_event([("host", "127.0.0.1:8080")])
    mutating(handed_over, owned=True)
    assert mutating.module.SEEN[-1] is handed_over  # the edge proxy's: built for this call, not copied


_token_chars = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="&="),
                       min_size=1, max_size=12)
_header_names = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True).filter(lambda n: n != "cookie")
_header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)


@settings(max_examples=100, deadline=None)
@example(headers=[("__proto__", "x")], query=[("__proto__", "")])  # an object literal would eat these
@given(
    headers=st.lists(st.tuples(_header_names, _header_values), max_size=8),
    query=st.lists(st.tuples(_token_chars, st.one_of(st.just(""), _token_chars)), max_size=6),
)
def test_a_pass_through_function_gives_back_the_same_request(pass_through: ViewerFunction,
                                                             headers: list[tuple[str, str]],
                                                             query: list[tuple[str, str]]) -> None:
    """Multi-valued headers and query strings survive CloudFront's event shape (grouped by name)."""
    fn = pass_through
    request = ViewerRequest(method="GET", uri="/x", querystring=query, headers=headers)
    result = read_function_result(fn(_event(request)))
    assert isinstance(result, ViewerRequest)

    def grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, value in pairs:
            out.setdefault(name, []).append(value)
        return out

    assert grouped(result.headers) == grouped(headers)
    assert grouped(result.querystring) == grouped(query)
    assert parse_query(format_query(result.querystring)) == [(n, v) for n, v in result.querystring]



# --- the KeyValueStore the function reads -------------------------------------------------


def _health(*avoid: str) -> str:
    return json.dumps({"v": 1, "avoid": list(avoid), "at": "2026-12-01T08:00:00.000Z"})


@pytest.fixture(scope="module")
def store() -> dict[str, str]:
    return {}


@pytest.fixture(scope="module")
def reading(store: dict[str, str]) -> Iterator[ViewerFunction]:
    """The rendered function with a KeyValueStore read through a reader of ``store``."""
    stack = ViewerFunctionSettings.from_config(load_from_stack_file("prod"))
    fn = ViewerFunction(render_viewer_function(stack), kvs=store.get)
    yield fn
    fn.close()


def _avoid_header(fn: ViewerFunction) -> list[str]:
    result = read_function_result(fn(_event(ViewerRequest("GET", "/healthz", [], [("host", "h")]))))
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

    stack = ViewerFunctionSettings.from_config(load_from_stack_file("prod"))
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
        from local.cloudfront import ViewerFunction
        HELD = [ViewerFunction("function handler(event) { return event.request; }") for _ in range(3)]
        assert HELD[0]({"request": {"uri": "/"}})["uri"] == "/"
        print("done")
    """)
    root = Path(__file__).resolve().parents[2]
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
