"""The gate's telemetry (``edge_gate.telemetry``, executed from the rendered package): one
CloudWatch EMF record per request with its MCP facts (both protocol eras), decision and
trace id; the W3C ``traceparent`` toward the origin kept, created or replaced; the
traceparent parser's properties."""

from __future__ import annotations

import functools
import json
import re
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.contract import PROBE_CHECK_HEADER, PROBE_TOKEN_HEADER
from functions.probe.promise import probe_check_proof
from tests.edge.gate_harness import (
    CREDENTIALS,
    PROBE_CLIENT_ID,
    TOOLS_CALL,
    Issuer,
    event,
    header,
    render,
    rpc,
    settings,
    status,
)

VIEWER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
VIEWER_SPAN = "00f067aa0ba902b7"
VIEWER_TRACEPARENT = f"00-{VIEWER_TRACE}-{VIEWER_SPAN}-01"
NEW_ERA = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "search"}
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@pytest.fixture(autouse=True)
def role_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_REGION", "eu-central-1")


@functools.cache
def rendered() -> tuple[ModuleType, Issuer]:
    issuer = Issuer.generate()
    root = Path(tempfile.mkdtemp(prefix="edge-gate-telemetry-"))
    return render(settings(issuer.jwks, server_id="weather", metric_tools=("search",)), root), issuer


@pytest.fixture(scope="module")
def gate() -> ModuleType:
    return rendered()[0]


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return rendered()[1]


def records(out: str) -> list[dict[str, Any]]:
    """The EMF records among the lines the gate printed (it logs other lines too)."""
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"') and '"_aws":' in line]


def assert_well_formed_emf(record: dict[str, Any]) -> None:
    """CloudWatch's EMF specification: ``_aws.Timestamp`` (ms), one directive with a
    Namespace, Dimensions (arrays of member names, at most 30) and Metrics (Name, Unit),
    every dimension a string member and every metric a number member of the record."""
    directive = record["_aws"]
    assert isinstance(directive["Timestamp"], int) and directive["Timestamp"] > 1_600_000_000_000
    for metrics in directive["CloudWatchMetrics"]:
        assert metrics["Namespace"] == "McpEdge"
        for dimension_set in metrics["Dimensions"]:
            assert 1 <= len(dimension_set) <= 30
            for name in dimension_set:
                assert isinstance(record[name], str) and record[name], name
        for metric in metrics["Metrics"]:
            assert set(metric) <= {"Name", "Unit", "StorageResolution"}
            assert isinstance(record[metric["Name"]], (int, float)) and not isinstance(record[metric["Name"]], bool)


def run(gate: ModuleType, capsys: pytest.CaptureFixture[str], headers: dict[str, Any] | None = None,
        body: Any = TOOLS_CALL, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gate's result and the one record it printed for the request."""
    capsys.readouterr()
    raw = body if isinstance(body, bytes) or body is None else rpc(body)
    result: dict[str, Any] = gate.handler(event(headers or {}, body=raw, **kwargs), None)
    [record] = records(capsys.readouterr().out)
    assert_well_formed_emf(record)
    return result, record


def token(issuer: Issuer, scope: str = "mcp search:read") -> dict[str, str]:
    return {"Authorization": f"Bearer {issuer.token(scope=scope)}"}


def dimension_sets(record: dict[str, Any]) -> list[list[str]]:
    return [d for directive in record["_aws"]["CloudWatchMetrics"] for d in directive["Dimensions"]]


def metrics_by(record: dict[str, Any]) -> dict[tuple[str, ...], set[str]]:
    """Dimension set -> the metrics published by it."""
    return {tuple(d): {m["Name"] for m in directive["Metrics"]}
            for directive in record["_aws"]["CloudWatchMetrics"] for d in directive["Dimensions"]}


# --- one record per request ------------------------------------------------------------------


@pytest.mark.parametrize("era", [{}, NEW_ERA], ids=["handshake-era", "2026-07-28"])
def test_a_forwarded_tool_call_is_recorded_with_its_tool_decision_and_trace(gate, issuer, capsys, era):
    result, record = run(gate, capsys, {**token(issuer), **era, "CloudFront-Viewer-Country": "JP"})
    assert status(result) is None
    assert record["Decision"] == record["mcp.edge.decision"] == "allowed"
    assert record["Tool"] == record["gen_ai.tool.name"] == "search"  # a tool the stack names
    assert record["Method"] == record["mcp.method.name"] == "tools/call"
    assert record["jsonrpc.request.id"] == "7"
    assert record["ServerId"] == "weather"
    assert (record["Requests"], record["Refusals"], record["EdgeErrors"]) == (1, 0, 0)
    assert record["mcp.edge.origin_region"] == "ap-northeast-1"
    assert record["cloud.region"] == "eu-central-1"
    assert ["ServerId", "Tool", "Decision"] in dimension_sets(record)
    traceparent = TRACEPARENT.fullmatch(header(result, "traceparent") or "")
    assert traceparent and traceparent.group(1) == record["trace_id"] and traceparent.group(2) == record["span_id"]
    if era:
        assert record["mcp.protocol.version"] == "2026-07-28"


@pytest.mark.parametrize(("headers", "body", "kwargs", "decision"), [
    ({}, TOOLS_CALL, {}, "401"),
    ("token", TOOLS_CALL, {"truncated": True}, "413"),
    ("token", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","name":"x"}}', {}, "400"),
    ("token", {**TOOLS_CALL, "params": {"name": "search"}}, {"headers": {"Mcp-Name": "delete_all"}}, "400"),
])
def test_a_request_refused_before_the_gate_authorized_its_body_names_no_method_tool_or_client(
        gate, issuer, capsys, headers, body, kwargs, decision):
    sent = {} if headers == {} else token(issuer)
    sent.update(kwargs.pop("headers", {}))
    result, record = run(gate, capsys, sent, body, **kwargs)
    assert status(result) == int(decision)
    assert (record["Decision"], record["Refusals"], record["Requests"]) == (decision, 1, 1)
    # The gate never read (401) or refused its body: the record has the HTTP method alone.
    assert record["Method"] == "http:POST" and "mcp.method.name" not in record
    assert "Tool" not in record and "gen_ai.tool.name" not in record
    assert (record["Client"], record["mcp.edge.client_id"]) == ("other", None)
    assert "mcp.edge.origin_region" not in record


def test_a_scope_refusal_is_recorded_against_the_tool_the_gate_parsed_and_the_verified_client(gate, issuer, capsys):
    result, record = run(gate, capsys, token(issuer, "mcp"))
    assert status(result) == 403
    assert (record["Decision"], record["Refusals"]) == ("403_scope", 1)
    assert record["Tool"] == record["gen_ai.tool.name"] == "search"
    assert (record["Client"], record["mcp.edge.client_id"]) == ("other", "client-1")


@pytest.mark.parametrize("names", [("search", "delete_all"), ("delete_all", "search"), ("search", "search")])
def test_a_body_with_duplicate_names_is_refused_and_its_record_names_no_tool(gate, issuer, capsys, names):
    # Given a body whose two name members a lax parser reads as the last one, whichever it is
    first, second = names
    params = f'{{"name":"{first}","arguments":{{}},"name":"{second}"}}'
    body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}'.encode()
    result, record = run(gate, capsys, token(issuer, "mcp search:read admin"), body)
    # Then the gate refuses it, and no tool appears in the record under any key
    assert status(result) == 400 and record["Decision"] == "400"
    assert not {"search", "delete_all"} & {v for v in record.values() if isinstance(v, str)}


@pytest.mark.parametrize(("message", "tool"), [
    ({**TOOLS_CALL, "params": {"name": "search", "arguments": {"name": "delete_all"}}}, "search"),
    ({**TOOLS_CALL, "params": {"arguments": {"x": 1}, "name": "search", "_meta": {"name": "delete_all"}}}, "search"),
])
def test_an_allowed_calls_record_names_exactly_the_authorized_tool(gate, issuer, capsys, message, tool):
    # Names nested in arguments or _meta are the server's business, never the record's tool.
    result, record = run(gate, capsys, token(issuer), message)
    assert status(result) is None
    assert record["Tool"] == record["gen_ai.tool.name"] == tool
    assert (record["Client"], record["mcp.edge.client_id"]) == ("other", "client-1")


def test_a_batch_is_recorded_by_its_size_and_never_by_one_of_its_tools(gate, issuer, capsys):
    batch = [{**TOOLS_CALL, "id": 1}, {**TOOLS_CALL, "id": 2, "params": {"name": "other_tool"}}]
    result, record = run(gate, capsys, token(issuer), batch)
    assert status(result) is None
    assert (record["Method"], record["jsonrpc.batch.size"]) == ("batch", 2)
    assert "Tool" not in record and "gen_ai.tool.name" not in record


def test_the_probes_verified_requests_carry_the_probe_client_and_a_forged_probe_claim_does_not(gate, issuer, capsys):
    probe = {"Authorization": f"Bearer {issuer.token(client_id=PROBE_CLIENT_ID, scope='mcp search:read')}"}
    result, record = run(gate, capsys, probe)
    assert status(result) is None
    assert (record["Client"], record["mcp.edge.client_id"]) == ("probe", PROBE_CLIENT_ID)
    assert ["ServerId", "Client", "Decision"] in dimension_sets(record)
    # A token naming the probes' client but signed by another key (the probes' own forged-token check,
    # or anyone's): refused, and never counted as the probes'.
    forged = issuer.token(client_id=PROBE_CLIENT_ID, key=Issuer.generate().rsa_key)
    result, record = run(gate, capsys, {"Authorization": f"Bearer {forged}"})
    assert status(result) == 401
    assert (record["Client"], record["mcp.edge.client_id"]) == ("other", None)
    # A probe token refused for its body is not counted as the probes' either: nothing was authorized.
    result, record = run(gate, capsys, probe, b"{not json")
    assert status(result) == 400 and record["Client"] == "other"


def test_an_unreachable_key_set_is_recorded_as_an_edge_error(issuer, capsys, tmp_path):
    gate = render(settings({"keys": []}, jwks_fetch_timeout_s=0.2), tmp_path)
    result, record = run(gate, capsys, token(issuer))
    assert status(result) == 503
    assert (record["Decision"], record["EdgeErrors"], record["Refusals"]) == ("503", 1, 0)


def test_metrics_are_few_per_decision_and_no_client_can_mint_a_metric_name(gate, issuer, capsys):
    # Given a call of a tool the stack does not name, and a method MCP does not define
    unknown = {**TOOLS_CALL, "params": {**TOOLS_CALL["params"], "name": "made-up-7f3a"}}  # type: ignore[dict-item]
    _, call = run(gate, capsys, {**token(issuer, "mcp"), **NEW_ERA, "Mcp-Name": "made-up-7f3a"}, unknown)
    _, odd = run(gate, capsys, token(issuer), {"jsonrpc": "2.0", "id": 2, "method": "x-vendor/reindex"})
    # Then their metric dimensions say "other", while the records keep the real names for log queries
    assert (call["Tool"], call["gen_ai.tool.name"]) == ("other", "made-up-7f3a")
    assert (odd["Method"], odd["mcp.method.name"]) == ("other", "x-vendor/reindex")
    # And only the decision set carries more than the request count
    assert metrics_by(call) == {("ServerId", "Decision"): {"Requests", "GateMilliseconds"},
                                ("ServerId", "Method", "Decision"): {"Requests"},
                                ("ServerId", "Client", "Decision"): {"Requests"},
                                ("ServerId", "Tool", "Decision"): {"Requests"}}


def test_metadata_and_non_tool_methods_are_recorded_by_method(gate, issuer, capsys):
    _, metadata = run(gate, capsys, body=None, method="GET", uri="/.well-known/oauth-protected-resource")
    assert (metadata["Decision"], metadata["Method"]) == ("metadata", "http:GET")
    assert "Tool" not in metadata and ["ServerId", "Tool", "Decision"] not in dimension_sets(metadata)
    _, listing = run(gate, capsys, token(issuer), {"jsonrpc": "2.0", "id": "a", "method": "tools/list"})
    assert (listing["Decision"], listing["Method"], listing["jsonrpc.request.id"]) == ("allowed", "tools/list", "a")
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c"}}}
    _, init = run(gate, capsys, token(issuer), initialize)
    assert init["mcp.protocol.version"] == "2025-06-18"


def proof_of(result: dict) -> str | None:
    entries = result["headers"].get(PROBE_CHECK_HEADER)
    return entries[0]["value"] if entries else None


def forged_probe_token(issuer: Issuer) -> str:
    """The probes' forged-token check: their claims, signed by another key."""
    return issuer.token(client_id=PROBE_CLIENT_ID, scope="mcp search:read", key=Issuer.generate().rsa_key)


def test_the_probes_forged_token_check_counts_as_the_probes_when_their_real_token_comes_beside_it(
        gate, issuer, capsys):
    real = issuer.token(client_id=PROBE_CLIENT_ID, scope="mcp search:read")
    result, record = run(gate, capsys, {"Authorization": f"Bearer {forged_probe_token(issuer)}",
                                        PROBE_TOKEN_HEADER: real})
    # The answer is the refusal; only the record's Client says whose check it was
    assert status(result) == 401 and record["Decision"] == "401"
    assert (record["Client"], record["mcp.edge.probe_check"]) == ("probe", True)
    assert record["mcp.edge.client_id"] is None  # the bearer itself was not verified
    # and the refusal proves itself the edge's to the probe, by the rule the probe computes
    assert proof_of(result) == probe_check_proof(real)


@pytest.mark.parametrize("beside", ["forged", "other-client", "two", "garbage"])
def test_a_token_beside_a_refusal_counts_it_as_the_probes_only_when_it_verifies_as_theirs(
        gate, issuer, capsys, beside):
    real = issuer.token(client_id=PROBE_CLIENT_ID, scope="mcp")
    value: str | list[str] = {"forged": forged_probe_token(issuer), "other-client": issuer.token(client_id="client-9"),
                              "two": [real, real], "garbage": "not.a.jwt"}[beside]
    result, record = run(gate, capsys, {"Authorization": f"Bearer {forged_probe_token(issuer)}",
                                        PROBE_TOKEN_HEADER: value})
    assert status(result) == 401
    assert record["Client"] == "other" and "mcp.edge.probe_check" not in record
    assert proof_of(result) is None  # no proof for a token that is not the probes'


def test_the_probes_token_beside_a_users_request_is_neither_forwarded_nor_counted(gate, issuer, capsys):
    real = issuer.token(client_id=PROBE_CLIENT_ID, scope="mcp search:read")
    result, record = run(gate, capsys, {**token(issuer), PROBE_TOKEN_HEADER: real})
    assert status(result) is None and PROBE_TOKEN_HEADER not in result["headers"]
    assert (record["Client"], record["mcp.edge.client_id"]) == ("other", "client-1")
    # Nor beside a request refused for its scope: only a 401 can be the probes' check
    _, record = run(gate, capsys, {**token(issuer, "mcp"), PROBE_TOKEN_HEADER: real})
    assert record["Decision"] == "403_scope" and record["Client"] == "other"


# --- the trace context toward the origin ---------------------------------------------------


def test_the_viewers_traceparent_is_continued_with_the_edges_span(gate, issuer, capsys):
    result, record = run(gate, capsys, {**token(issuer), "traceparent": VIEWER_TRACEPARENT,
                                        "tracestate": "vendor=abc"})
    sent = TRACEPARENT.fullmatch(header(result, "traceparent") or "")
    assert sent and sent.group(1) == VIEWER_TRACE and sent.group(2) != VIEWER_SPAN and sent.group(3) == "01"
    assert (record["trace_id"], record["parent_span_id"], record["trace_source"]) == (
        VIEWER_TRACE, VIEWER_SPAN, "header")
    assert header(result, "tracestate") == "vendor=abc"


def test_without_a_traceparent_the_edge_starts_a_trace(gate, issuer, capsys):
    first, record = run(gate, capsys, token(issuer))
    second, _ = run(gate, capsys, token(issuer))
    assert record["trace_source"] == "new" and "parent_span_id" not in record
    ids = {TRACEPARENT.fullmatch(header(r, "traceparent") or "").group(1) for r in (first, second)}  # type: ignore[union-attr]
    assert len(ids) == 2 and record["trace_id"] in ids


@pytest.mark.parametrize("malformed", [
    f"00-{'0' * 32}-{VIEWER_SPAN}-01",
    f"00-{VIEWER_TRACE}-{'0' * 16}-01",
    f"ff-{VIEWER_TRACE}-{VIEWER_SPAN}-01",
    VIEWER_TRACEPARENT.upper(),
    VIEWER_TRACEPARENT + "-extra",
    VIEWER_TRACEPARENT[:-1],
    "not a traceparent",
])
def test_a_malformed_traceparent_is_replaced_and_its_tracestate_dropped(gate, issuer, capsys, malformed):
    result, record = run(gate, capsys, {**token(issuer), "traceparent": malformed, "tracestate": "vendor=abc"})
    assert record["trace_source"] == "new" and record["trace_id"] != VIEWER_TRACE
    assert header(result, "traceparent") == f"00-{record['trace_id']}-{record['span_id']}-01"
    assert header(result, "tracestate") is None


def test_two_traceparent_headers_start_a_new_trace(gate, issuer, capsys):
    _, record = run(gate, capsys, {**token(issuer), "traceparent": [VIEWER_TRACEPARENT, VIEWER_TRACEPARENT]})
    assert record["trace_source"] == "new"


def test_an_mcp_client_may_carry_the_trace_context_in_meta(gate, issuer, capsys):
    params: dict[str, Any] = {**TOOLS_CALL["params"], "_meta": {"traceparent": VIEWER_TRACEPARENT}}  # type: ignore[dict-item]
    body = {**TOOLS_CALL, "params": params}
    result, record = run(gate, capsys, token(issuer), body)
    assert (record["trace_id"], record["trace_source"]) == (VIEWER_TRACE, "meta")
    assert (header(result, "traceparent") or "").startswith(f"00-{VIEWER_TRACE}-")
    # The header wins over _meta.
    other = "00-11111111111111111111111111111111-2222222222222222-00"
    _, record = run(gate, capsys, {**token(issuer), "traceparent": other}, body)
    assert record["trace_id"] == "1" * 32


def test_a_traceparent_is_never_an_identity(gate, capsys):
    result, record = run(gate, capsys, {"traceparent": VIEWER_TRACEPARENT})
    assert status(result) == 401 and record["Decision"] == "401"


def test_the_trace_context_is_signed_as_forwarded(gate, issuer, capsys):
    from tests.edge.gate_harness import verify_sigv4

    result, _ = run(gate, capsys, {**token(issuer), "traceparent": VIEWER_TRACEPARENT})
    assert verify_sigv4(result, rpc(TOOLS_CALL)) == "us-east-1"


# --- the parser's properties -----------------------------------------------------------------


def telemetry() -> ModuleType:
    module: ModuleType = rendered()[0].telemetry
    return module


HEX = "0123456789abcdef"
trace_ids = st.text(HEX, min_size=32, max_size=32).filter(lambda s: s != "0" * 32)
span_ids = st.text(HEX, min_size=16, max_size=16).filter(lambda s: s != "0" * 16)


@given(trace_ids, span_ids, st.integers(0, 255))
def test_a_valid_version_00_traceparent_round_trips(trace_id, span_id, flags):
    value = f"00-{trace_id}-{span_id}-{flags:02x}"
    context = telemetry().parse_traceparent(value)
    assert context is not None and (context.trace_id, context.parent_id, context.flags) == (trace_id, span_id, flags)
    assert context.header() == value


@given(st.text(max_size=80))
def test_the_parser_accepts_only_the_w3c_shape(value):
    context = telemetry().parse_traceparent(value)
    if context is not None:
        stripped = value.strip(" \t")
        assert re.match(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-|$)", stripped)
        assert not stripped.startswith("ff") and context.trace_id != "0" * 32 and context.parent_id != "0" * 16


@given(trace_ids, span_ids, st.sampled_from(["01", "7f", "fe"]), st.text(HEX + "-", max_size=20))
def test_a_later_version_is_read_by_its_first_four_fields(trace_id, span_id, version, tail):
    value = f"{version}-{trace_id}-{span_id}-01" + ("-" + tail if tail else "")
    context = telemetry().parse_traceparent(value)
    assert context is not None and context.trace_id == trace_id
    assert telemetry().parse_traceparent(f"00-{trace_id}-{span_id}-01-{tail}") is None


@given(st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text())))
def test_a_traceparent_that_is_not_a_string_is_ignored(value):
    assert telemetry().parse_traceparent(value) is None


# --- every refusal the edge makes is counted as one --------------------------------------------


@pytest.mark.parametrize(("kwargs", "headers", "decision"), [
    ({"uri": "/other"}, {}, "404"),
    ({"method": "GET", "body": None}, {}, "405"),
    ({}, {"Content-Type": "text/plain; charset=utf-7"}, "415"),
    ({"method": "OPTIONS", "body": None}, {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
     "403"),
])
def test_the_path_method_and_media_type_refusals_are_recorded_as_refusals(gate, issuer, capsys, kwargs, headers,
                                                                          decision):
    result, record = run(gate, capsys, {**token(issuer), **headers}, **kwargs)
    assert status(result) == int(decision), result
    assert (record["Decision"], record["Refusals"], record["EdgeErrors"]) == (decision, 1, 0)
