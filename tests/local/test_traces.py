"""The local trace view and per-tool panel read what the shipped code logs: the gate's EMF
records (edge/gate/telemetry.py, as the edge process prints them) and the local Function
URL's invocation spans (local/aws/function_url.py), joined by trace id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edge.gate import telemetry
from local.aws.function_url import invocation_span
from local.traces import read_traces, tool_calls, tools_section, traces_section

VIEWER_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SIGNED = {"authorization": [{"key": "Authorization", "value":
          "AWS4-HMAC-SHA256 Credential=AKIA/20261206/eu-west-1/lambda/aws4_request, SignedHeaders=host, Signature=x"}]}


def edge_line(tool: str | None, *, traceparent: str | None = None, refused: bool = False, at_ms: int = 1_000) -> tuple[str, str]:
    """(the EMF line the gate prints, the traceparent it sends the origin) for one request."""
    params = {"name": tool, "arguments": {}} if tool else {}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call" if tool else "tools/list", "params": params})
    headers = {telemetry.TRACEPARENT: [{"key": "traceparent", "value": traceparent}]} if traceparent else {}
    request: dict[str, Any] = {"headers": headers, "body": {"data": body, "encoding": "text"}}
    observation = telemetry.begin(request)
    result = {"status": "401"} if refused else {"headers": SIGNED}
    record = telemetry.record(observation, result, "acme-mcp", timestamp_ms=at_ms, environ={"AWS_REGION": "us-east-1"})
    return json.dumps(record), request["headers"][telemetry.TRACEPARENT][0]["value"]


def origin_line(traceparent: str, status: int = 200, started: float = 1.5) -> str:
    span = invocation_span("eu-west-1", "POST", "/mcp", [("traceparent", traceparent), ("host", "x")], status,
                           started, 12.5)
    return json.dumps(span)


def write_logs(log_dir: Path, edge: list[str], origin: list[str], server: list[str] = ()) -> None:  # type: ignore[assignment]
    log_dir.mkdir(parents=True, exist_ok=True)
    # The edge's log holds uvicorn's and the proxy's own lines too.
    (log_dir / "edge.log").write_text("INFO: started\n" + "\n".join(edge) + "\n{not json\n")
    (log_dir / "function-url-eu-west-1.log").write_text(
        json.dumps({"functionUrl": "forwarded", "region": "eu-west-1"}) + "\n" + "\n".join(origin) + "\n")
    (log_dir / "origin-eu-west-1.log").write_text("\n".join(server) + "\n")


def test_a_trace_joins_the_edge_span_and_the_origin_span_under_the_viewers_trace_id(tmp_path: Path) -> None:
    edge, sent = edge_line("search", traceparent=VIEWER_TRACEPARENT)
    other_edge, other_sent = edge_line("search", at_ms=500)
    server = json.dumps({"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "msg": "search ran"})
    write_logs(tmp_path, [other_edge, edge], [origin_line(other_sent), origin_line(sent)], [server])
    [trace] = read_traces(tmp_path, trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    doc = trace.to_json()
    edge_span, origin_span, server_line = doc["spans"]
    assert (edge_span["kind"], origin_span["kind"], server_line["kind"]) == ("edge", "origin", "server")
    # The edge continues the viewer's trace under a span of its own; the origin's span is its child.
    assert edge_span["parentSpanId"] == "00f067aa0ba902b7" and edge_span["traceSource"] == "header"
    assert origin_span["parentSpanId"] == edge_span["spanId"] != origin_span["spanId"]
    assert (edge_span["decision"], edge_span["tool"], edge_span["originRegion"]) == ("allowed", "search", "eu-west-1")
    assert (origin_span["region"], origin_span["status"], origin_span["durationMs"]) == ("eu-west-1", 200, 12.5)
    assert server_line["msg"] == "search ran"
    # Newest first; a trace the edge started on its own is there too.
    assert [t.trace_id for t in read_traces(tmp_path)] == ["4bf92f3577b34da6a3ce929d0e0e4736",
                                                           other_sent.split("-")[1]]
    assert read_traces(tmp_path, trace_id="0" * 31 + "1") == []


def test_the_html_sections_link_each_trace_and_count_each_tool(tmp_path: Path) -> None:
    edge, sent = edge_line("search", traceparent=VIEWER_TRACEPARENT)
    write_logs(tmp_path, [edge], [origin_line(sent)])
    page = traces_section(tmp_path)
    assert "href='/traces/4bf92f3577b34da6a3ce929d0e0e4736'" in page and "eu-west-1 200" in page
    assert "<code>search</code></td><td>1</td>" in tools_section(tmp_path)
    assert "No request yet" in traces_section(tmp_path / "none")
    assert "No tool call yet" in tools_section(tmp_path / "none")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["search", "countdown", "delete_all", None]), st.booleans()), max_size=30))
def test_the_per_tool_panel_counts_each_tools_calls_by_decision_exactly(tmp_path_factory, calls) -> None:
    log_dir = tmp_path_factory.mktemp("logs")
    write_logs(log_dir, [edge_line(tool, refused=refused)[0] for tool, refused in calls], [])
    expected: dict[str, dict[str, int]] = {}
    for tool, refused in calls:
        if tool is not None:
            decision = "401" if refused else "allowed"
            expected.setdefault(tool, {}).setdefault(decision, 0)
            expected[tool][decision] += 1
    assert tool_calls(log_dir) == expected


def test_an_invocation_without_a_valid_traceparent_starts_its_own_trace() -> None:
    for headers in ([], [("traceparent", "garbage")], [("traceparent", VIEWER_TRACEPARENT)] * 2):
        span = invocation_span("us-east-1", "POST", "/mcp", headers, 200, 1.0, 1.0)
        assert span["parentSpanId"] is None and len(span["traceId"]) == 32 and span["traceId"] != "0" * 32
