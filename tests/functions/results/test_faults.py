"""Injected DynamoDB and SNS faults at every step of the consumer, and hostile numbers.

For records that exercise every step (history, latest state, skew read and write,
alerts: claim, publish, mark sent, remove pending, and the metrics claim; from the
results queue and from the dead-letter queue), each call in turn fails once: throttled before it happens, or (DynamoDB) after it happened
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
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.results.envelope import MAX_RESULT_DEPTH, MalformedRecordError, parse_record_body
from functions.results.store import history_item, serialize
from tests.functions.results import conftest as fixtures
from tests.functions.results.conftest import Aws, Record, failure, probe_event, probe_result, sqs_event
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
    monkeypatch.setenv("TABLE_NAME", fixtures.TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("DEAD_LETTER_QUEUE_ARN", fixtures.DLQ_ARN)
    sys.modules.pop("functions.results.handler", None)
    return fixtures.pin_clock(importlib.import_module("functions.results.handler"))


@dataclass(frozen=True)
class Scenario:
    """Records that set the stage, the record under test, and what it must end in."""

    stage: tuple[Record, ...]
    change: Record
    queue_arn: str
    alerts: tuple[str, ...]
    availability: float
    latency: float | None
    drift: bool


SCENARIOS = {
    # Two targets agreeing on fixtures.HASH_A, then one changes: drift and skew, every step used.
    "drift and skew": Scenario(
        stage=tuple(Record(event=probe_event("origin", r), response=probe_result(fixtures.HASH_A), at=fixtures.T0, request_id=f"base-{r}")
                    for r in ("us-east-1", "eu-west-1")),
        change=Record(event=probe_event("origin", "us-east-1"), response=probe_result(fixtures.HASH_B, latency=61.0),
                      at=fixtures.T0 + dt.timedelta(minutes=1), request_id="req-under-test"),
        queue_arn=fixtures.RESULTS_QUEUE_ARN, alerts=("schema-drift", "schema-skew"), availability=1.0, latency=61.0, drift=True),
    # A success then a failure, then the second failure from the dead-letter queue: down.
    "target down": Scenario(
        stage=(Record(at=fixtures.T0, request_id="base-ok"), failure(at=fixtures.T0 + dt.timedelta(minutes=1), request_id="base-failed")),
        change=failure(at=fixtures.T0 + dt.timedelta(minutes=2), request_id="req-down"),
        queue_arn=fixtures.DLQ_ARN, alerts=("target-down",), availability=0.0, latency=None, drift=False),
}


def stage(handler: ModuleType, scenario: Scenario) -> None:
    for record in scenario.stage:
        arn = fixtures.DLQ_ARN if record.condition != "Success" else fixtures.RESULTS_QUEUE_ARN
        assert handler.handler(sqs_event(record.json(), queue_arn=arn), Context()) == {"batchItemFailures": []}


def deliver(handler: ModuleType, scenario: Scenario, message_id: str = "m-1") -> dict[str, Any]:
    result: dict[str, Any] = handler.handler(
        sqs_event(scenario.change.json(), queue_arn=scenario.queue_arn, message_ids=[message_id]), Context())
    return result


def run_change(handler: ModuleType, scenario: Scenario, fail_at: int | None, when: str = "before") -> list[str]:
    """Deliver the record under test with one injected fault, then again if it failed; the calls made."""
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
        first = deliver(handler, scenario)
    finally:
        store.client, handler.consumer.publish = real_client, real_publish
    if first != {"batchItemFailures": []}:  # a fault the consumer could not absorb itself
        assert fail_at is not None and first == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
        assert deliver(handler, scenario) == {"batchItemFailures": []}
    return calls


def stored(aws: Aws) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in item.items() if k not in VOLATILE} for item in aws.items()),
                  key=lambda i: (i["pk"], i["sk"]))


def counted(output: str, request_id: str) -> list[dict[str, Any]]:
    return [d for d in emf_documents(output) if "Availability" in d and d.get("requestId") == request_id]


def fault_free(aws: Aws, handler: ModuleType, scenario: Scenario) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    stage(handler, scenario)
    aws.alerts()
    calls = run_change(handler, scenario, None)
    return calls, stored(aws), sorted(a["kind"] for a in aws.alerts())


# The calls a record makes, at most: every one of them gets its case.
STEP_COUNT = 16


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_fault_table_covers_every_call_of_the_consumer(aws: Aws, handler: ModuleType, name: str):
    calls, _, alerts = fault_free(aws, handler, SCENARIOS[name])
    assert tuple(alerts) == SCENARIOS[name].alerts
    assert len(calls) <= STEP_COUNT, f"the consumer makes {len(calls)} calls now: raise STEP_COUNT to cover them"
    assert {"transact_write_items", "get_item", "put_item", "query", "update_item", "sns.publish"} <= set(calls)


@pytest.mark.parametrize("when", ["before", "after"], ids=["throttled", "response lost"])
@pytest.mark.parametrize("fail_at", range(STEP_COUNT))
@pytest.mark.parametrize("name", SCENARIOS)
def test_a_fault_at_any_step_is_retried_to_the_same_state_one_alert_each_and_one_count(
        aws: Aws, handler: ModuleType, capsys: pytest.CaptureFixture[str], name: str, fail_at: int, when: str):
    scenario = SCENARIOS[name]
    # The fault-free run is the reference; then the table is emptied and staged again.
    calls, expected, expected_alerts = fault_free(aws, handler, scenario)
    if fail_at >= len(calls):
        pytest.skip(f"the consumer makes {len(calls)} calls")
    if when == "after" and calls[fail_at] == "sns.publish":
        pytest.skip("a publish whose response is lost may be sent twice: SNS is at-least-once")
    for table_item in aws.items():
        aws.dynamodb.delete_item(TableName=fixtures.TABLE, Key=serialize({"pk": table_item["pk"], "sk": table_item["sk"]}))
    stage(handler, scenario)
    aws.alerts()
    capsys.readouterr()

    run_change(handler, scenario, fail_at, when)

    assert stored(aws) == expected
    assert sorted(a["kind"] for a in aws.alerts()) == expected_alerts
    docs = counted(capsys.readouterr().out, scenario.change.request_id)
    assert len(docs) == 1, f"counted {len(docs)} times after a fault at {calls[fail_at]}"
    assert docs[0]["Availability"] == scenario.availability and docs[0].get("Latency") == scenario.latency
    assert docs[0].get("SchemaDrift") == (1.0 if scenario.drift else None)


def test_a_fully_processed_outcome_delivered_again_is_not_counted_again(aws: Aws, handler: ModuleType, capsys):
    scenario = SCENARIOS["drift and skew"]
    fault_free(aws, handler, scenario)
    capsys.readouterr()
    for message_id in ("m-1", "m-2"):
        assert deliver(handler, scenario, message_id) == {"batchItemFailures": []}
    output = capsys.readouterr().out
    assert counted(output, scenario.change.request_id) == []
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


def nested(depth: int) -> Any:
    """``depth`` arrays, one inside the other, as a parsed body holds them."""
    return json.loads("[" * depth + "]" * depth)


@pytest.mark.parametrize("depth", [2000, 40], ids=["past Python's recursion", "past DynamoDB's 32 levels"])
def test_a_result_nested_too_deep_to_store_keeps_its_outcome_without_its_copy(aws: Aws, handler: ModuleType,
                                                                               depth: int):
    record = Record(response={**probe_result(), "extra": nested(depth)})
    assert handler.handler(sqs_event(record.json(), message_ids=["m-deep"]), Context()) == {"batchItemFailures": []}
    (history,) = aws.items("HISTORY#")
    assert history["status"] == "healthy" and history["requestId"] == record.request_id
    assert history["result"] == {"omitted": f"responsePayload nested deeper than {MAX_RESULT_DEPTH} levels",
                                 "status": "healthy"}


def test_a_result_nested_to_dynamodbs_limit_is_stored_whole(aws: Aws, handler: ModuleType):
    # The result map is level 1; its extra member adds the rest.
    result = {**probe_result(), "extra": nested(MAX_RESULT_DEPTH - 1)}
    assert handler.handler(sqs_event(Record(response=result).json()), Context()) == {"batchItemFailures": []}
    (history,) = aws.items("HISTORY#")
    assert history["result"]["extra"] == result["extra"]


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

