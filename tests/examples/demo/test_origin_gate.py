"""The origin gate's pure parts: which requests stream, CORS's Vary without Origin, body reading."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server.streamable_http import check_accept_headers
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from examples.demo.demo_server.keepalive import accepts_sse
from examples.demo.demo_server.origin_gate import (
    CORS_ALLOW_HEADERS,
    SILENT_MODERN_METHODS,
    BodyTooLargeError,
    modern_wants_stream,
    read_body,
    replay,
    request_id_of,
    vary_on_origin,
)

media_types = st.sampled_from(["application/json", "text/event-stream", "text/*", "*/*", "application/*",
                                "text/html", "TEXT/EVENT-STREAM", "text/event-stream;q=0.5", " text/event-stream ", ""])


@given(types=st.lists(media_types, max_size=4))
def test_event_stream_acceptance_reads_accept_as_the_sdk_does(types: list[str]):
    accept = ",".join(types)
    request = Request({"type": "http", "headers": [(b"accept", accept.encode())]})
    assert accepts_sse(accept) == check_accept_headers(request)[1]


def test_no_accept_header_does_not_admit_an_event_stream():
    assert not accepts_sse(None)


@given(method=st.one_of(st.none(), st.sampled_from(sorted(SILENT_MODERN_METHODS)),
                        st.sampled_from(["tools/call", "resources/read", "prompts/get", "completion/complete"]),
                        st.text(max_size=20)))
def test_only_silent_2026_methods_that_accept_sse_leave_the_streaming_path(method: str | None):
    # A handler that may emit (progress, log notifications) keeps SSE; a listing does not need it.
    assert modern_wants_stream(method, "application/json, text/event-stream") == (method not in SILENT_MODERN_METHODS)
    # ... and a request the streaming path refuses with 406 is still refused there.
    assert modern_wants_stream(method, "application/json")


header_names = st.sampled_from([b"content-type", b"vary", b"x-mcp-edge-served-region", b"cache-control"])
header_lists = st.lists(st.tuples(header_names, st.sampled_from([b"a", b"Accept", b"b, c", b"text/plain"])), max_size=5)


@given(headers=header_lists)
def test_vary_without_origin_is_what_starlettes_cors_answers(headers: list[tuple[bytes, bytes]]):
    # Given the CORS middleware the gate configures, in front of an app answering `headers`
    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": list(headers)})

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    cors: Any = CORSMiddleware(app, allow_origins=["*"], allow_methods=["GET", "POST", "OPTIONS"],
                          allow_headers=list(CORS_ALLOW_HEADERS), max_age=86400)
    # When a request without Origin goes through it
    anyio.run(cors, {"type": "http", "method": "POST", "headers": []}, receiver([b""]), send)

    # Then the gate's shortcut answers the same headers (order aside)
    def normal(items) -> list[tuple[bytes, bytes]]:
        return sorted((bytes(k), bytes(v)) for k, v in items)

    assert normal(vary_on_origin(list(headers))) == normal(sent[0]["headers"])


def receiver(chunks: list[bytes]):
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    return receive


@given(chunks=st.lists(st.binary(max_size=50), min_size=1, max_size=6))
def test_body_is_read_whole_and_replayed_unchanged(chunks: list[bytes]):
    async def run() -> None:
        body, messages = await read_body(receiver(chunks), limit=10_000)
        assert body == b"".join(chunks)
        again = replay(messages, receiver([]))
        seen = []
        while True:
            message = await again()
            if message["type"] != "http.request":
                break
            seen.append(message["body"])
            if not message.get("more_body"):
                break
        assert seen == chunks

    anyio.run(run)


def test_body_over_the_limit_is_refused():
    async def run() -> None:
        await read_body(receiver([b"x" * 600, b"y" * 600]), limit=1000)

    with pytest.raises(BodyTooLargeError):
        anyio.run(run)


def test_request_id_comes_from_lambdas_request_context_or_is_fresh():
    scope = {"headers": [(b"x-amzn-request-context", json.dumps({"requestId": "abc-1"}).encode())]}
    assert request_id_of(scope) == "abc-1"
    for headers in ([], [(b"x-amzn-request-context", b"not json")], [(b"x-amzn-request-context", b"[]")]):
        rid = request_id_of({"headers": headers})
        assert len(rid) == 32
