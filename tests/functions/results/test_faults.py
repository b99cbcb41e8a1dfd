"""Injected DynamoDB and SNS faults at every step of the consumer, and hostile numbers.

For a record that exercises every step (history, latest state, skew read and write,
two alerts: claim, publish, mark sent, remove pending, and the metrics claim), each
call in turn fails once: throttled before it happens, or (DynamoDB) after it happened
with the response lost. The message is reported as failed, the redelivery succeeds,
and then the table holds what a fault-free run leaves, each alert went out once and
the outcome was counted once in the metrics: no matter which step failed.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import math
import sys
from types import ModuleType
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.results.envelope import MalformedRecordError, parse_record_body
from functions.results.store import history_item, serialize
from tests.functions.results.conftest import (
    DLQ_ARN,
    HASH_A,
    HASH_B,
    T0,
    TABLE,
    Aws,
    Record,
    probe_event,
    probe_result,
    sqs_event,
)
from tests.functions.results.test_handler import Context, emf_documents

VOLATILE = ("expiresAt", "claimedAt", "countedBy")  # clock- or delivery-dependent


def throttled(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation)


class Faulty:
    """Wraps a client; the ``fail_at``-th call (0-based, counted across wrapped clients)
    raises, before the call (``when="before"``) or after it took effect (``"after"``)."""

    def __init__(self, real: Any, calls: list[str], fail_at: int | None, when: str):
        self._real, self._calls, self._fail_at, self._when = real, calls, fail_at, when

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if name.startswith("_") or not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            n = len(self._calls)
            self._calls.append(name)
            if n != self._fail_at:
                return method(*args, **kwargs)
            if self._when == "before":
                raise throttled(name)
            method(*args, **kwargs)
            raise throttled(name)  # it happened; the caller cannot know

        return call


@pytest.fixture
def handler(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("DEAD_LETTER_QUEUE_ARN", DLQ_ARN)
    sys.modules.pop("functions.results.handler", None)
    return importlib.import_module("functions.results.handler")


def baseline(handler: ModuleType) -> None:
    """Two targets agreeing on HASH_A: the next change raises drift and skew."""
    for region in ("us-east-1", "eu-west-1"):
        body = Record(event=probe_event("origin", region), response=probe_result(HASH_A), at=T0,
                      request_id=f"base-{region}").json()
        assert handler.handler(sqs_event(body), Context()) == {"batchItemFailures": []}


CHANGE = Record(event=probe_event("origin", "us-east-1"), response=probe_result(HASH_B, latency=61.0),
                at=T0 + dt.timedelta(minutes=1), request_id="req-under-test")


def run_change(handler: ModuleType, fail_at: int | None, when: str = "before") -> list[str]:
    """Deliver CHANGE with one injected fault, then again without; the calls made."""
    calls: list[str] = []
    store = handler.consumer.store
    real_client, real_publish = store.client, handler.consumer.publish
    store.client = Faulty(real_client, calls, fail_at, when)

    def publish(alert: Any) -> None:
        n = len(calls)
        calls.append("sns.publish")
        if n == fail_at:
            raise throttled("Publish")  # SNS refused it: nothing was published
        real_publish(alert)

    handler.consumer.publish = publish
    try:
        first = handler.handler(sqs_event(CHANGE.json(), message_ids=["m-1"]), Context())
    finally:
        store.client, handler.consumer.publish = real_client, real_publish
    if first != {"batchItemFailures": []}:  # a fault the consumer could not absorb itself
        assert fail_at is not None and first == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
        assert handler.handler(sqs_event(CHANGE.json(), message_ids=["m-1"]), Context()) == {"batchItemFailures": []}
    return calls


def stored(aws: Aws) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in item.items() if k not in VOLATILE} for item in aws.items()),
                  key=lambda i: (i["pk"], i["sk"]))


def counted(output: str, request_id: str) -> list[dict[str, Any]]:
    return [d for d in emf_documents(output) if "Availability" in d and d.get("requestId") == request_id]


def steps_of_a_fault_free_run(aws: Aws, handler: ModuleType) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    baseline(handler)
    aws.alerts()
    calls = run_change(handler, None)
    return calls, stored(aws), sorted(a["kind"] for a in aws.alerts())


# The calls CHANGE makes, counted once here so that every one of them gets its case.
STEP_COUNT = 16


def test_the_fault_table_covers_every_call_of_the_consumer(aws: Aws, handler: ModuleType):
    calls, _, alerts = steps_of_a_fault_free_run(aws, handler)
    assert alerts == ["schema-drift", "schema-skew"]
    assert len(calls) <= STEP_COUNT, f"the consumer makes {len(calls)} calls now: raise STEP_COUNT to cover them"
    assert {"transact_write_items", "get_item", "put_item", "query", "update_item", "sns.publish"} <= set(calls)


@pytest.mark.parametrize("when", ["before", "after"], ids=["throttled", "response lost"])
@pytest.mark.parametrize("fail_at", range(STEP_COUNT))
def test_a_fault_at_any_step_is_retried_to_the_same_state_one_alert_each_and_one_count(
        aws: Aws, handler: ModuleType, capsys: pytest.CaptureFixture[str], fail_at: int, when: str):
    # The fault-free run, in its own table, is the reference.
    calls, expected, expected_alerts = steps_of_a_fault_free_run(aws, handler)
    if fail_at >= len(calls):
        pytest.skip(f"the consumer makes {len(calls)} calls")
    if when == "after" and calls[fail_at] == "sns.publish":
        pytest.skip("a publish whose response is lost may be sent twice: SNS is at-least-once")
    capsys.readouterr()
    for table_item in aws.items():  # start again from the baseline alone
        aws.dynamodb.delete_item(TableName=TABLE, Key=serialize({"pk": table_item["pk"], "sk": table_item["sk"]}))
    baseline(handler)
    aws.alerts()
    capsys.readouterr()

    run_change(handler, fail_at, when)

    assert stored(aws) == expected
    assert sorted(a["kind"] for a in aws.alerts()) == expected_alerts
    docs = counted(capsys.readouterr().out, CHANGE.request_id)
    assert len(docs) == 1, f"counted {len(docs)} times after a fault at {calls[fail_at]}"
    assert docs[0]["Availability"] == 1.0 and docs[0]["Latency"] == 61.0 and docs[0].get("SchemaDrift") == 1.0


def test_a_fully_processed_outcome_delivered_again_is_not_counted_again(aws: Aws, handler: ModuleType, capsys):
    baseline(handler)
    run_change(handler, None)
    capsys.readouterr()
    for message_id in ("m-1", "m-2"):
        assert handler.handler(sqs_event(CHANGE.json(), message_ids=[message_id]), Context()) == {"batchItemFailures": []}
    output = capsys.readouterr().out
    assert counted(output, CHANGE.request_id) == []
    assert sum(d.get("DuplicateOutcomes", 0) for d in emf_documents(output)) == 2


# --- numbers DynamoDB cannot store are malformed messages, not transient failures ----------

UNSTORABLE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e200", "1e-200", "1" * 39]


@pytest.mark.parametrize("number", UNSTORABLE)
@pytest.mark.parametrize("where", ["latencyMs", "phases.connectMs", "steps.0.ms", "extra"])
def test_an_unstorable_number_anywhere_is_a_malformed_message(number: str, where: str):
    marker = "__N__"
    result = probe_result()
    if where == "latencyMs":
        result["latencyMs"] = marker
    elif where == "phases.connectMs":
        result["phases"]["connectMs"] = marker
    elif where == "steps.0.ms":
        result["steps"][0]["ms"] = marker
    else:
        result["extra"] = [1, {"deep": marker}]
    body = Record(response=result).json().replace(f'"{marker}"', number)
    with pytest.raises(MalformedRecordError, match="NaN|Infinity|cannot store"):
        parse_record_body(body, "eu-west-1")


def test_an_unstorable_latency_is_quarantined_at_once_not_retried_as_transient(aws: Aws, handler: ModuleType, caplog):
    body = Record().json().replace('"latencyMs": 42.5', '"latencyMs": NaN')
    assert handler.handler(sqs_event(body, message_ids=["m-nan"]), Context()) == {
        "batchItemFailures": [{"itemIdentifier": "m-nan"}]}
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == ["malformed message"]
    assert aws.items() == []


JSON_NUMBERS = st.one_of(
    st.integers(min_value=-(10**45), max_value=10**45),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "1e-400", "1e126", "9.99e125", "1e-130"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(JSON_NUMBERS, min_size=1, max_size=5))
def test_whatever_numbers_a_record_carries_it_is_refused_or_it_can_be_stored(numbers: list[Any]):
    marker = "__N__"
    result = {**probe_result(), "extra": [marker] * len(numbers)}
    body = Record(response=result).json()
    for number in numbers:
        text = number if isinstance(number, str) else json.dumps(number)
        body = body.replace(f'"{marker}"', text, 1)
    try:
        outcome = parse_record_body(body, "eu-west-1")
    except MalformedRecordError:
        return
    item = serialize(history_item(outcome, "q", 0))  # what DynamoDB will be sent: must not raise
    assert outcome.latency_ms is not None and math.isfinite(outcome.latency_ms)
    assert len(json.dumps(item)) < 400 * 1024


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(["contentType", "era", "protocolVersion", "servedRegion", "steps", "degradedReasons"]),
       size=st.integers(min_value=1, max_value=300_000))
def test_whatever_sizes_a_record_carries_its_history_item_fits_in_dynamodb(field: str, size: int):
    result = probe_result()
    result[field] = "x" * size if field not in ("steps", "degradedReasons") else ["x" * 100] * (size // 100 + 1)
    outcome = parse_record_body(Record(response=result).json(), "eu-west-1")
    item = serialize(history_item(outcome, "q", 0))
    assert len(json.dumps(item)) < 400 * 1024  # DynamoDB's item limit (an upper bound of its own measure)

