"""The origin gate's pure parts: which handshake-era requests stream, body reading."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.mcp_server.origin_gate import BodyTooLargeError, legacy_wants_stream, read_body, replay, request_id_of

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@given(token=st.one_of(st.text(max_size=20), st.integers()))
def test_tool_call_asking_for_progress_streams(token: str | int):
    assert legacy_wants_stream({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": "countdown", "_meta": {"progressToken": token}}})


@given(method=st.sampled_from(["initialize", "tools/list", "ping", "resources/read", "tools/call"]), params=json_values)
def test_everything_else_answers_json(method: str, params: object):
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    wants = legacy_wants_stream(message)
    has_token = (isinstance(params, dict) and isinstance(params.get("_meta"), dict)
                 and isinstance(params["_meta"].get("progressToken"), (str, int)))
    assert wants == (method == "tools/call" and has_token)


@given(message=json_values)
def test_any_json_never_crashes_the_choice(message: object):
    assert legacy_wants_stream(message) in (True, False)


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
