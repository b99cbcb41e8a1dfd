"""The origin gate's pure parts: body reading, request ids."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.mcp_server.origin_gate import BodyTooLargeError, read_body, replay, request_id_of


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
