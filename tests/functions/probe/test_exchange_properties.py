"""Whatever JSON a server answers, the probe returns a result or one of its typed errors:
hypothesis writes the server's answers (in-process, ``httpx.MockTransport``)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.probe.errors import ProbeError, ProbeProtocolError
from functions.probe.event import parse_event
from functions.probe.probe import ProbeSettings, run_probe
from functions.probe.wire import Deadline

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
TOOL = st.fixed_dictionaries({"name": st.one_of(st.text(max_size=5), JSON)},
                             optional={"inputSchema": JSON, "description": JSON, "annotations": JSON})
RESULT = st.one_of(
    JSON,
    st.fixed_dictionaries({"tools": st.one_of(st.lists(TOOL, max_size=4), JSON)}, optional={"nextCursor": JSON}),
    st.just({"supportedVersions": ["2026-07-28"]}),
)
ANSWER = st.fixed_dictionaries({
    "status": st.sampled_from([200, 200, 200, 202, 400, 401, 404, 500]),
    "content_type": st.sampled_from(["application/json", "text/event-stream", "text/html", ""]),
    "id": st.one_of(st.just("echo"), JSON),
    "result": RESULT,
    "as_error": st.booleans(),
})


def encode(answer: dict[str, Any], request_id: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id if answer["id"] == "echo" else answer["id"]}
    if answer["as_error"]:
        message["error"] = {"code": -32000, "message": "no", "data": answer["result"]}
    else:
        message["result"] = answer["result"]
    text = json.dumps(message)  # may hold NaN and Infinity, as a careless server sends them
    if answer["content_type"] == "text/event-stream":
        return f"event: message\ndata: {text}\n\n".encode()
    return text.encode()


DISCOVER_OK = {"status": 200, "content_type": "application/json", "id": "echo",
               "result": {"supportedVersions": ["2026-07-28"]}, "as_error": False}
TOOL_PAGE = st.fixed_dictionaries({
    "status": st.just(200), "content_type": st.sampled_from(["application/json", "text/event-stream"]),
    "id": st.just("echo"), "as_error": st.just(False),
    "result": st.fixed_dictionaries({"tools": st.lists(TOOL, max_size=4)},
                                    optional={"nextCursor": st.one_of(st.text(max_size=3), JSON)}),
})


@settings(max_examples=300, deadline=None)
@given(answers=st.lists(ANSWER, min_size=1, max_size=6))
def test_any_sequence_of_answers_ends_in_a_result_or_a_typed_error(answers: list[dict[str, Any]]):
    probe_against(answers)


@settings(max_examples=300, deadline=None)
@given(pages=st.lists(TOOL_PAGE, min_size=1, max_size=4))
def test_any_tools_a_valid_exchange_lists_end_in_a_result_or_a_typed_error(pages: list[dict[str, Any]]):
    probe_against([DISCOVER_OK, *pages])


def probe_against(answers: list[dict[str, Any]], typed_error_is_the_answer: bool = True) -> None:
    """The probe against ``answers``: a result, or a typed error (raised unless
    ``typed_error_is_the_answer``); anything else fails the test."""
    remaining = list(answers)

    def server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        answer = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        headers = {"content-type": answer["content_type"]} if answer["content_type"] else {}
        return httpx.Response(answer["status"], headers=headers, stream=httpx.ByteStream(encode(answer, body.get("id"))))

    target = parse_event({"endpoint": "http://127.0.0.1:9/mcp", "serverId": "s", "target": "origin",
                          "targetRegion": "eu-west-1"})
    settings_ = ProbeSettings(deadline_s=5, degraded_latency_ms=60000, probe_region="us-east-1")
    try:
        result = run_probe(target, settings_, None, lambda: httpx.Client(transport=httpx.MockTransport(server)),
                           Deadline(5))
    except ProbeError:
        if typed_error_is_the_answer:
            return
        raise
    assert isinstance(result["toolCount"], int) and len(result["schemaHash"]) == 64
    json.dumps(result, allow_nan=False)  # what Lambda serializes into the destination record


def tools_page(tools: list[Any]) -> dict[str, Any]:
    return {"status": 200, "content_type": "application/json", "id": "echo", "as_error": False,
            "result": {"tools": tools}}


def nested(depth: int) -> Any:
    return json.loads("[" * depth + "]" * depth)  # what the parser hands over: it goes deeper than Python's recursion


@pytest.mark.parametrize("where", ["inputSchema", "annotations"])
def test_a_tool_nested_deeper_than_python_recurses_is_a_protocol_error(where: str):
    with pytest.raises(ProbeProtocolError, match="tool 'deep' cannot be canonicalized: nested too deep"):
        probe_against([DISCOVER_OK, tools_page([{"name": "deep", where: {"type": "object", "x": nested(3000)}}])],
                      typed_error_is_the_answer=False)
