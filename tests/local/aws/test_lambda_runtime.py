"""Lambda's shapes and rules as the local runner applies them, checked against the real consumer's parser."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.results.envelope import parse_record_body
from local.aws.lambda_runtime import (
    Invocation,
    LambdaContext,
    destination_record,
    failed_message_ids,
    invoke,
    sqs_event,
)

ARN = "arn:aws:lambda:eu-west-1:123456789012:function:acme-mcp-probe"
EVENT = {"endpoint": "http://127.0.0.1:8400/mcp", "serverId": "acme-mcp", "target": "edge",
         "targetRegion": "eu-west-1", "pinRegion": "eu-west-1", "signed": False}
RESULT = {"status": "healthy", "latencyMs": 12.5, "toolCount": 3, "schemaHash": "a" * 64, "servedRegion": "eu-west-1"}


def _context(timeout_s: float = 3.0) -> LambdaContext:
    return LambdaContext(function_name="f", region="eu-west-1", memory_limit_in_mb=256, timeout_s=timeout_s,
                         aws_request_id="11111111-2222-3333-4444-555555555555")


class ProbeTimeoutError(Exception):
    pass


def test_a_returned_result_becomes_a_success_record_the_consumer_reads() -> None:
    invocation = invoke(lambda event, ctx: RESULT, EVENT, _context())
    record = destination_record(function_arn=ARN, request_id=invocation.request_id, condition="Success",
                                invoke_count=1, request_payload=EVENT, invocation=invocation)
    outcome = parse_record_body(json.dumps(record), "us-east-1")
    assert (outcome.condition, outcome.status, outcome.probe_region) == ("Success", "healthy", "eu-west-1")
    assert outcome.target is not None and outcome.target.label == "edge@eu-west-1"
    assert record["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST"}


def test_a_raised_error_becomes_a_retries_exhausted_record_with_the_runtimes_error_object() -> None:
    def handler(event: Any, ctx: Any) -> Any:
        raise ProbeTimeoutError("server/discover: no answer in 20 s")

    invocation = invoke(handler, EVENT, _context())
    assert invocation.error is not None
    assert invocation.error["errorType"] == "ProbeTimeoutError"
    assert invocation.error["errorMessage"] == "server/discover: no answer in 20 s"
    assert any("in handler" in line for line in invocation.error["stackTrace"])
    record = destination_record(function_arn=ARN, request_id=invocation.request_id, condition="RetriesExhausted",
                                invoke_count=3, request_payload=EVENT, invocation=invocation)
    assert record["responseContext"]["functionError"] == "Unhandled"
    outcome = parse_record_body(json.dumps(record), "us-east-1")
    assert (outcome.status, outcome.error_type, outcome.invoke_count) == ("failed", "ProbeTimeoutError", 3)


def test_an_expired_event_has_no_response_and_still_parses() -> None:
    record = destination_record(function_arn=ARN, request_id="r-1", condition="EventAgeExceeded", invoke_count=0,
                                request_payload=EVENT, invocation=None)
    assert "responsePayload" not in record and "responseContext" not in record
    assert parse_record_body(json.dumps(record), "us-east-1").error_type == "EventAgeExceeded"


def test_the_function_timeout_stops_a_handler_that_runs_over() -> None:
    started = time.monotonic()
    invocation = invoke(lambda event, ctx: time.sleep(5), {}, _context(timeout_s=0.3))
    assert invocation.error is not None and invocation.error["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 0.30 seconds" in invocation.error["errorMessage"]
    assert time.monotonic() - started < 4  # stopped, not waited out


def test_sqs_events_carry_what_powertools_reads() -> None:
    message = {"MessageId": "m1", "ReceiptHandle": "h1", "Body": "{}", "MD5OfBody": "x",
               "Attributes": {"ApproximateReceiveCount": "2"},
               "MessageAttributes": {"kind": {"StringValue": "a", "DataType": "String"}}}
    (record,) = sqs_event([message], "arn:aws:sqs:eu-west-1:123456789012:q", "eu-west-1")["Records"]
    assert record["messageId"] == "m1" and record["eventSource"] == "aws:sqs"
    assert record["messageAttributes"]["kind"]["stringValue"] == "a"
    assert record["attributes"]["ApproximateReceiveCount"] == "2"


IDS = ["a", "b", "c"]


@pytest.mark.parametrize(("result", "failed"), [
    (None, set()),
    ({}, set()),
    ({"batchItemFailures": []}, set()),
    ({"batchItemFailures": [{"itemIdentifier": "b"}]}, {"b"}),
    ({"batchItemFailures": [{"itemIdentifier": "b"}, {"itemIdentifier": "c"}]}, {"b", "c"}),
    ({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, set(IDS)),  # not in the batch
    ({"batchItemFailures": [{"itemIdentifier": ""}]}, set(IDS)),
    ({"batchItemFailures": [{}]}, set(IDS)),
    ({"batchItemFailures": "b"}, set(IDS)),
    ("not an object", set(IDS)),
])
def test_report_batch_item_failures_rules(result: Any, failed: set[str]) -> None:
    assert failed_message_ids(Invocation("r", result=result), IDS, True) == failed


def test_a_raised_error_fails_the_whole_batch_and_without_item_reporting_a_return_is_success() -> None:
    assert failed_message_ids(Invocation("r", error={"errorType": "X"}), IDS, True) == set(IDS)
    assert failed_message_ids(Invocation("r", error={"errorType": "X"}), IDS, False) == set(IDS)
    assert failed_message_ids(Invocation("r", result={"batchItemFailures": [{"itemIdentifier": "a"}]}), IDS,
                              False) == set()


@given(ids=st.lists(st.uuids().map(str), min_size=1, max_size=10, unique=True), data=st.data())
def test_failed_items_are_always_a_subset_of_the_batch(ids: list[str], data: st.DataObject) -> None:
    listed = data.draw(st.lists(st.one_of(st.sampled_from(ids), st.text(max_size=5)), max_size=12))
    result = {"batchItemFailures": [{"itemIdentifier": i} for i in listed]}
    failed = failed_message_ids(Invocation("r", result=result), ids, True)
    assert failed <= set(ids)
    # Either exactly the listed ones, or (something invalid listed) the whole batch.
    assert failed == set(listed) or failed == set(ids)
