"""The request line: Powertools' structure, written without Powertools' per-record cost."""

from __future__ import annotations

import io
import json
import logging

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from hypothesis import given
from hypothesis import strategies as st

from examples.demo.demo_server import logs
from examples.demo.demo_server.origin_gate import RequestRecord

CREATED = 1_795_000_000.123456

records = st.builds(
    RequestRecord,
    request_id=st.text(min_size=1, max_size=12),
    method=st.sampled_from(["POST", "GET", "OPTIONS"]),
    path=st.text(max_size=12),
    mcp_method=st.one_of(st.none(), st.text(max_size=12)),
    protocol_version=st.one_of(st.none(), st.sampled_from(["2026-07-28", "2025-11-25"])),
    status=st.one_of(st.none(), st.sampled_from([200, 202, 400, 405, 413, 503])),
    streamed=st.booleans(),
    refused=st.one_of(st.none(), st.sampled_from(["method", "body too large", "protocol"])),
)


def powertools_line(record: RequestRecord, latency_ms: float) -> dict:
    """What Powertools' own formatter writes for the same request, at the same instant."""
    level = logging.WARNING if record.status is None or record.status >= 500 else logging.INFO
    log_record = logging.makeLogRecord({
        "name": logs.SERVICE, "levelno": level, "levelname": logging.getLevelName(level), "msg": "request",
        "created": CREATED, "msecs": (CREATED - int(CREATED)) * 1000, "funcName": "log_request", "lineno": 1,
        **logs.request_fields(record, "eu-west-1", latency_ms)})
    return json.loads(LambdaPowertoolsFormatter(service=logs.SERVICE).format(log_record))


@pytest.fixture(autouse=True)
def info_level():
    logs.configure_logging("INFO")


@given(record=records, latency_ms=st.floats(min_value=0, max_value=1e5))
def test_the_request_line_is_what_powertools_would_write(record: RequestRecord, latency_ms: float):
    stream = io.StringIO()
    logs.RequestLog("eu-west-1", stream=stream, clock=lambda: CREATED)(record, latency_ms)
    ours = json.loads(stream.getvalue())
    expected = powertools_line(record, latency_ms)
    assert ours.pop("location").startswith("log_request:") and expected.pop("location")
    assert ours == expected and list(ours) == list(expected)  # same fields, same values, same order
    assert stream.getvalue().count("\n") == 1


def test_the_trace_id_comes_from_the_lambda_environment_as_powertools_reads_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(logs.XRAY_TRACE_ID_ENV, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f;Sampled=1")
    record = RequestRecord("r-1", "POST", "/mcp", status=200)
    stream = io.StringIO()
    logs.RequestLog("eu-west-1", stream=stream, clock=lambda: CREATED)(record, 1.0)
    ours = json.loads(stream.getvalue())
    assert ours["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert ours["xray_trace_id"] == powertools_line(record, 1.0)["xray_trace_id"]


def test_the_logger_level_silences_info_lines_but_not_failures():
    stream = io.StringIO()
    log = logs.RequestLog("eu-west-1", stream=stream)
    logs.configure_logging("WARNING")
    log(RequestRecord("ok", "POST", "/mcp", status=200), 1.0)
    log(RequestRecord("failed", "POST", "/mcp", status=503), 1.0)
    log(RequestRecord("no answer", "POST", "/mcp"), 1.0)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["request_id"], line["level"]) for line in lines] == [("failed", "WARNING"), ("no answer", "WARNING")]


def test_a_line_built_for_the_warm_up_is_not_written(monkeypatch: pytest.MonkeyPatch):
    stream = io.StringIO()
    log = logs.RequestLog("eu-west-1", stream=stream, clock=lambda: CREATED)
    built: list[float] = []
    stamp = logs.powertools_timestamp

    def noted(created: float) -> str:
        built.append(created)
        return stamp(created)

    monkeypatch.setattr(logs, "powertools_timestamp", noted)
    # Given the readiness work's own request (written=False) and one sent while QUIET is set
    log(RequestRecord("own", "POST", "/mcp", status=200), 1.0, written=False)
    quiet = logs.QUIET.set(True)
    try:
        log(RequestRecord("in process", "POST", "/mcp", status=200), 1.0)
    finally:
        logs.QUIET.reset(quiet)
    # Then both lines were built (their path warmed) and neither was written
    assert built == [CREATED, CREATED] and stream.getvalue() == ""
    # while a request from outside is written
    log(RequestRecord("outside", "POST", "/mcp", status=200), 1.0)
    assert json.loads(stream.getvalue())["request_id"] == "outside"
