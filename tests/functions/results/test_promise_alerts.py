"""The platform's promise through the consumer (moto): a probe result whose check was
answered 2xx (or a ProbePromiseError failure record) raises a "promise-broken" alert,
claimed once per change like the others, kept in the target's latest state and history
for the status page, and resolved once when the check passes again; "unknown" changes
nothing."""

from __future__ import annotations

import datetime as dt
import importlib
import sys
from types import ModuleType
from typing import Any

import pytest

from functions.results.envelope import MalformedRecordError, parse_record_body
from tests.functions.results.conftest import (
    DLQ_ARN,
    REGION,
    T0,
    TABLE,
    Aws,
    Context,
    Record,
    failure,
    pin_clock,
    probe_event,
    probe_result,
    sqs_event,
)


def check(status: str, http_status: int | None, check: str = "forged-token") -> dict[str, Any]:
    detail = None if status == "pass" else f"answered HTTP {http_status}"
    return {"check": check, "status": status, "httpStatus": http_status, "detail": detail}


@pytest.fixture
def handler(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("HISTORY_TTL_DAYS", "30")
    monkeypatch.setenv("DEAD_LETTER_QUEUE_ARN", DLQ_ARN)
    sys.modules.pop("functions.results.handler", None)
    return pin_clock(importlib.import_module("functions.results.handler"))


def edge_round(handler: ModuleType, minute: int, promise: dict[str, Any], probe_region: str = REGION) -> None:
    record = Record(event=probe_event("edge", "us-east-1"), response=probe_result(promise=promise),
                    at=T0 + dt.timedelta(minutes=minute), probe_region=probe_region)
    handler.handler(sqs_event(record.json()), Context())


def latest(aws: Aws, probe_region: str = REGION) -> dict[str, Any]:
    (item,) = [i for i in aws.items("LATEST#") if i["sk"] == f"TARGET#{probe_region}#edge@us-east-1"]
    return item


def test_a_forged_token_answered_2xx_alerts_once_and_its_repair_once(handler, aws: Aws):
    edge_round(handler, 0, check("pass", 401))
    assert aws.alerts() == []
    edge_round(handler, 1, check("broken", 200))
    alerts = aws.alerts()
    assert [a["kind"] for a in alerts] == ["promise-broken"]
    assert alerts[0]["subject"] == "[acme-mcp] SECURITY: edge@us-east-1 lets unverified requests through"
    assert "the edge let a forged token" in alerts[0]["message"] and "HTTP 200" in alerts[0]["message"]
    state = latest(aws)
    assert state["status"] == "healthy"  # the target answers; its lock does not hold
    assert (state["promiseCheck"], state["promiseStatus"], state["promiseHttpStatus"]) == ("forged-token", "broken", 200)
    # Still broken, then unknown (a 5xx proves nothing): no new page, the state stays broken.
    edge_round(handler, 2, check("broken", 200))
    edge_round(handler, 3, check("unknown", 503))
    assert aws.alerts() == []
    assert latest(aws)["promiseAlerted"] is True
    # Refused again: resolved, once.
    edge_round(handler, 4, check("pass", 401))
    edge_round(handler, 5, check("pass", 401))
    assert [a["kind"] for a in aws.alerts()] == ["promise-kept"]
    assert latest(aws)["promiseStatus"] == "pass" and latest(aws).get("promiseBrokenSince") is None


def test_the_same_broken_promise_seen_from_two_probe_regions_pages_once(handler, aws: Aws):
    edge_round(handler, 1, check("broken", 200), probe_region="eu-west-1")
    edge_round(handler, 1, check("broken", 200), probe_region="ap-southeast-1")
    assert [a["kind"] for a in aws.alerts()] == ["promise-broken"]


def test_an_unsigned_request_answered_by_a_function_url_is_a_broken_promise_in_history_too(handler, aws: Aws):
    record = Record(event=probe_event("origin", "eu-west-1"),
                    response=probe_result(promise=check("broken", 200, check="unsigned")))
    handler.handler(sqs_event(record.json()), Context())
    (alert,) = aws.alerts()
    assert alert["kind"] == "promise-broken" and "the Function URL answered a request without a signature" in alert["message"]
    (history,) = aws.items("HISTORY#")
    assert (history["promiseCheck"], history["promiseStatus"], history["promiseHttpStatus"]) == ("unsigned", "broken", 200)


def test_a_promise_error_failure_record_is_a_broken_promise_and_a_failure(handler, aws: Aws):
    message = "edge@us-east-1: a forged token answered HTTP 200 ...; the probe itself failed: ProbeHttpError: HTTP 500"
    record = failure(error_type="ProbePromiseError", message=message, event=probe_event("edge", "us-east-1"))
    handler.handler(sqs_event(record.json(), queue_arn=DLQ_ARN), Context())
    assert [a["kind"] for a in aws.alerts()] == ["promise-broken"]  # at once: one failure is not yet "down"
    state = latest(aws)
    assert state["status"] == "failed" and state["promiseStatus"] == "broken" and state["promiseCheck"] == "forged-token"


def test_results_without_a_promise_check_change_nothing(handler, aws: Aws):
    handler.handler(sqs_event(Record(event=probe_event("edge", "us-east-1")).json()), Context())
    assert aws.alerts() == [] and latest(aws).get("promiseStatus") is None


@pytest.mark.parametrize("promise", [{"check": "forged-token"}, {"check": "guess", "status": "pass"}, "broken"])
def test_a_malformed_promise_is_a_malformed_record(promise: Any):
    with pytest.raises(MalformedRecordError, match="responsePayload.promise"):
        parse_record_body(Record(response={**probe_result(), "promise": promise}).json(), REGION)


def test_a_forged_token_refused_by_the_server_not_the_edge_alerts_with_why(handler, aws: Aws):
    # The probe's verdict on a 401 without the edge's mark: broken, its detail saying whose refusal it was.
    detail = ("answered HTTP 401 without the edge's x-mcp-edge-refusal header: the refusal did not come from "
              "the edge, so the edge let a token signed by another key through to the server, which refused it itself")
    edge_round(handler, 0, {"check": "forged-token", "status": "broken", "httpStatus": 401, "detail": detail})
    (alert,) = aws.alerts()
    assert alert["kind"] == "promise-broken" and "SECURITY" in alert["subject"]
    assert "the edge let a forged token" in alert["message"] and "HTTP 401" in alert["message"]
    assert "did not come from the edge" in alert["message"]
    assert (latest(aws)["promiseStatus"], latest(aws)["promiseHttpStatus"]) == ("broken", 401)
