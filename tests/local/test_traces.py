"""The local trace view and per-tool panel read what the shipped code logs: the EMF records
the rendered gate package prints (edge/gate/telemetry.py, as the edge process prints them)
and the local Function URL's invocation spans (local/aws/function_url.py), joined by trace id."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import tempfile
from pathlib import Path
from types import ModuleType
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from edge.gate import telemetry
from local.aws.function_url import invocation_span
from local.traces import read_traces, tool_calls, tools_section, traces_section
from tests.edge import gate_harness
from tests.edge.gate_harness import CREDENTIALS, PROBE_CLIENT_ID, Issuer, event, header, render

VIEWER_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@functools.cache
def shipped_gate() -> tuple[ModuleType, Issuer]:
    issuer = Issuer.generate()
    root = Path(tempfile.mkdtemp(prefix="local-traces-gate-"))
    return render(gate_harness.settings(issuer.jwks, server_id="acme-mcp"), root), issuer


def edge_line(tool: str | None, *, traceparent: str | None = None, refused: bool = False, at_ms: int = 1_000,
              client_id: str = "client-1", scope: str = "mcp search:read admin") -> tuple[str, str]:
    """(the EMF line the shipped gate prints, the traceparent it sends the origin) for one
    request from ``client_id`` (a viewer in Germany: eu-west-1); ``refused``: a token without
    the base scope (403 after the gate parsed the call). The record's timestamp is set to
    ``at_ms`` so that the tests order traces without waiting."""
    gate, issuer = shipped_gate()
    params = {"name": tool, "arguments": {}} if tool else {}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call" if tool else "tools/list", "params": params})
    token = issuer.token(scope="" if refused else scope, client_id=client_id)
    headers = {"Authorization": f"Bearer {token}", "CloudFront-Viewer-Country": "DE"}
    if traceparent:
        headers["traceparent"] = traceparent
    out = io.StringIO()
    with mock.patch.dict(os.environ, CREDENTIALS), contextlib.redirect_stdout(out):
        result = gate.handler(event(headers, body=body.encode()), None)
    [line] = [json.loads(x) for x in out.getvalue().splitlines() if '"_aws":' in x]
    line["_aws"]["Timestamp"] = at_ms
    return json.dumps(line), header(result, telemetry.TRACEPARENT) or ""


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
    assert "<code>search</code></td><td>1</td><td>0</td>" in tools_section(tmp_path)  # 1 allowed, 0 probes
    assert "No request yet" in traces_section(tmp_path / "none")
    assert "No tool call yet" in tools_section(tmp_path / "none")


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["search", "countdown", "delete_all", None]), st.booleans(),
                          st.booleans()), max_size=12))
def test_the_per_tool_panel_counts_each_tools_calls_by_decision_and_client_exactly(tmp_path_factory, calls) -> None:
    log_dir = tmp_path_factory.mktemp("logs")
    write_logs(log_dir, [edge_line(tool, refused=refused, client_id=PROBE_CLIENT_ID if probe else "client-1")[0]
                         for tool, refused, probe in calls], [])
    expected: dict[bool, dict[str, dict[str, int]]] = {True: {}, False: {}}
    for tool, refused, probe in calls:
        if tool is not None:
            decision = "403_scope" if refused else "allowed"
            expected[probe].setdefault(tool, {}).setdefault(decision, 0)
            expected[probe][tool][decision] += 1
    assert tool_calls(log_dir, probes=True) == expected[True]
    assert tool_calls(log_dir, probes=False) == expected[False]
    everyone = tool_calls(log_dir)
    assert {t: sum(d.values()) for t, d in everyone.items()} == {
        t: sum(expected[True].get(t, {}).values()) + sum(expected[False].get(t, {}).values())
        for t in {*expected[True], *expected[False]}}


def test_the_last_requests_name_the_verified_client_and_mark_the_probes(tmp_path: Path) -> None:
    gate, issuer = shipped_gate()
    probe, probe_sent = edge_line("search", client_id=PROBE_CLIENT_ID, at_ms=3_000)
    user, user_sent = edge_line("search", client_id="client-1", at_ms=2_000)
    # A token claiming the probes' client, signed by another key: refused, its client unverified.
    forged = issuer.token(client_id=PROBE_CLIENT_ID, scope="mcp search:read", key=Issuer.generate().rsa_key)
    out = io.StringIO()
    with mock.patch.dict(os.environ, CREDENTIALS), contextlib.redirect_stdout(out):
        gate.handler(event({"Authorization": f"Bearer {forged}"}, body=b"{}"), None)
        # The probes' own forged-token check: the same forgery, their real token beside it.
        real = issuer.token(client_id=PROBE_CLIENT_ID, scope="mcp")
        gate.handler(event({"Authorization": f"Bearer {forged}", "x-mcp-edge-probe-token": real}, body=b"{}"), None)
    refused, check = [x for x in out.getvalue().splitlines() if '"_aws":' in x]
    write_logs(tmp_path, [refused, check, user, probe], [origin_line(probe_sent), origin_line(user_sent)])
    spans = [next(s for s in t.to_json()["spans"] if s["kind"] == "edge") for t in read_traces(tmp_path)]
    clients = sorted((s["decision"], s["client"] or "", s["probe"]) for s in spans)
    assert clients == [("401", "", False), ("401", "", True), ("allowed", "client-1", False),
                       ("allowed", PROBE_CLIENT_ID, True)]
    page = traces_section(tmp_path)
    assert f"<code>{PROBE_CLIENT_ID}</code> (probe)" in page and "<code>client-1</code></td>" in page
    assert page.count("unverified</span></td>") == 1 and page.count("unverified</span> (probe check)") == 1
    # The per-tool panel counts the probes' call apart from the user's.
    assert "<code>search</code></td><td>1</td><td>1</td>" in tools_section(tmp_path)


def test_an_invocation_without_a_valid_traceparent_starts_its_own_trace() -> None:
    for headers in ([], [("traceparent", "garbage")], [("traceparent", VIEWER_TRACEPARENT)] * 2):
        span = invocation_span("us-east-1", "POST", "/mcp", headers, 200, 1.0, 1.0)
        assert span["parentSpanId"] is None and len(span["traceId"]) == 32 and span["traceId"] != "0" * 32
