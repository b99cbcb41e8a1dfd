"""Pure parts of the consumer: destination records into outcomes, and the state
transitions that decide drift, skew, down and recovered (property-based where the
rule is general)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.results.envelope import MalformedRecordError, ProbeOutcome, parse_record_body
from functions.results.state import evolve_latest, evolve_skew, is_newer, skew_view
from tests.functions.results.conftest import HASH_A, HASH_B, T0, Record, failure, probe_result

hashes = st.sampled_from(["a" * 64, "b" * 64, "c" * 64, "d" * 64])


def outcome(record: Record) -> ProbeOutcome:
    return parse_record_body(record.json(), "eu-west-1")


# --- envelope --------------------------------------------------------------------------


def test_success_record_parses_into_a_healthy_outcome_with_the_probe_region_from_the_function_arn():
    parsed = outcome(Record(response=probe_result(HASH_A, latency=12.5, tools=9), probe_region="ap-southeast-1"))
    assert parsed.condition == "Success" and parsed.status == "healthy" and parsed.succeeded
    assert parsed.probe_region == "ap-southeast-1"
    assert parsed.schema_hash == HASH_A and parsed.tool_count == 9 and parsed.latency_ms == 12.5
    assert parsed.target is not None and parsed.target.label == "origin@us-east-1"
    assert parsed.timestamp == T0


def test_a_degraded_success_keeps_its_reasons_bounded_and_the_latest_item_names_them():
    reasons = ["the server keeps sessions: set stateless_http=True", "x" * 5000, *[f"r{i}" for i in range(20)]]
    parsed = outcome(Record(response={**probe_result(HASH_A, status="degraded"), "degradedReasons": reasons}))
    assert parsed.status == "degraded" and parsed.degraded_reasons[0] == reasons[0]
    assert len(parsed.degraded_reasons) == 8 and len(parsed.degraded_reasons[1]) == 2000
    item, _ = evolve_latest(None, parsed, down_after=2)
    assert item["degradedReasons"][0] == reasons[0]
    healthy, _ = evolve_latest(item, outcome(Record(response=probe_result(HASH_A))), down_after=2)
    assert healthy["degradedReasons"] is None  # a healthy round clears them


def test_retries_exhausted_record_carries_the_probe_error():
    parsed = outcome(failure("ProbeAuthError", "tools/list: HTTP 401"))
    assert parsed.status == "failed" and parsed.error_type == "ProbeAuthError"
    assert parsed.error_message == "tools/list: HTTP 401"


def test_event_age_exceeded_record_has_no_response_and_says_so():
    parsed = outcome(Record(condition="EventAgeExceeded"))
    assert parsed.status == "failed" and parsed.error_type == "EventAgeExceeded"
    assert "did not run" in (parsed.error_message or "")


def test_lambda_runtime_failure_without_an_error_object_is_still_a_failure():
    record = Record(condition="RetriesExhausted", response="Task timed out after 30.00 seconds")
    parsed = outcome(record)
    assert parsed.error_type == "RetriesExhausted" and "timed out" in (parsed.error_message or "")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("requestContext"), "requestContext is missing"),
        (lambda d: d["requestContext"].update(requestId="has spaces"), "requestId"),
        (lambda d: d["requestContext"].update(condition="Success!"), "condition"),
        (lambda d: d.update(timestamp=12), "timestamp"),
        (lambda d: d.pop("responsePayload"), "without a responsePayload"),
        (lambda d: d["responsePayload"].update(toolCount=-1), "toolCount"),
        (lambda d: d["responsePayload"].update(toolCount=True), "toolCount"),
        (lambda d: d["responsePayload"].update(era=7), "era"),
        (lambda d: d.update(responsePayload={"errorType": "X", "errorMessage": "y"}), "is an error"),
        (lambda d: d["responsePayload"].update(degradedReasons="stateful"), "degradedReasons"),
        (lambda d: d["responsePayload"].update(degradedReasons=[1]), "degradedReasons"),
    ],
)
def test_malformed_records_are_rejected_with_what_is_wrong(mutate, message):
    doc = Record().body()
    mutate(doc)
    with pytest.raises(MalformedRecordError, match=message):
        parse_record_body(json.dumps(doc), "eu-west-1")


@given(st.text(max_size=200) | st.binary(max_size=100).map(lambda b: b.decode("latin-1")))
@settings(max_examples=200, deadline=None)
def test_arbitrary_text_is_either_an_outcome_or_a_malformed_record_error(body):
    with contextlib.suppress(MalformedRecordError):
        parse_record_body(body, "eu-west-1")


# --- latest state ------------------------------------------------------------------------


def run(sequence: list[Record], down_after: int = 2) -> tuple[dict | None, list]:
    latest, alerts = None, []
    for record in sequence:
        o = outcome(record)
        assert is_newer(o, latest)
        latest, raised = evolve_latest(latest, o, down_after=down_after)
        alerts.extend(raised)
    return latest, alerts


@given(st.lists(hashes, min_size=1, max_size=12))
@settings(max_examples=150, deadline=None)
def test_drift_alerts_exactly_at_each_change_of_hash(sequence):
    records = [Record(response=probe_result(h), at=T0 + dt.timedelta(minutes=i)) for i, h in enumerate(sequence)]
    latest, alerts = run(records)
    changes = [(a, b) for a, b in zip(sequence, sequence[1:], strict=False) if a != b]
    drift = [a for a in alerts if a.kind == "schema-drift"]
    assert [a.dedup_key for a in drift] == [f"schema-drift#{a}->{b}" for a, b in changes]
    assert latest is not None and latest["schemaHash"] == sequence[-1]


@given(st.lists(st.one_of(hashes, st.none()), min_size=1, max_size=15))
@settings(max_examples=150, deadline=None)
def test_failures_never_forget_the_last_hash_nor_count_as_drift(sequence):
    """None is a failed probe: drift compares successes only, across any failures."""
    records = [
        (Record(response=probe_result(h)) if h else failure()) for h in sequence
    ]
    for i, r in enumerate(records):
        r.at = T0 + dt.timedelta(minutes=i)
    latest, alerts = run(records)
    successes = [h for h in sequence if h]
    changes = sum(1 for a, b in zip(successes, successes[1:], strict=False) if a != b)
    assert len([a for a in alerts if a.kind == "schema-drift"]) == changes
    assert latest is not None and latest["schemaHash"] == (successes[-1] if successes else None)


@given(st.lists(st.booleans(), min_size=1, max_size=20), st.integers(min_value=1, max_value=4))
@settings(max_examples=150, deadline=None)
def test_down_and_recovered_alternate_and_down_needs_consecutive_failures(pattern, down_after):
    records = [Record(at=T0 + dt.timedelta(minutes=i)) if ok else failure(at=T0 + dt.timedelta(minutes=i))
               for i, ok in enumerate(pattern)]
    _, alerts = run(records, down_after=down_after)
    kinds = [a.kind for a in alerts if a.kind in ("target-down", "target-recovered")]
    assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False)), "down and recovered must alternate"
    if kinds:
        assert kinds[0] == "target-down"
    longest_run = max((len(r) for r in "".join("F" if not ok else "." for ok in pattern).split(".")), default=0)
    assert ("target-down" in kinds) == (longest_run >= down_after)


def test_order_of_outcomes_is_by_time_then_request_id():
    first = outcome(Record(at=T0, request_id="b"))
    latest, _ = evolve_latest(None, first)
    assert not is_newer(outcome(Record(at=T0 - dt.timedelta(seconds=1), request_id="z")), latest)
    assert not is_newer(outcome(Record(at=T0, request_id="a")), latest)
    assert is_newer(outcome(Record(at=T0, request_id="c")), latest)


# --- skew --------------------------------------------------------------------------------

NOW_MS = int(T0.timestamp() * 1000)


def item(label: str, schema_hash: str | None, age_min: float = 1) -> dict:
    return {"label": label, "schemaHash": schema_hash, "lastSuccessMs": NOW_MS - int(age_min * 60000)}


def test_skew_view_groups_fresh_successes_by_hash_and_ignores_silent_targets():
    view = skew_view([
        item("origin@us-east-1", HASH_A), item("edge@us-east-1", HASH_A), item("origin@eu-west-1", HASH_B),
        item("origin@ap-southeast-1", HASH_B, age_min=30), {"label": "origin@sa-east-1", "schemaHash": None},
    ], NOW_MS, fresh_ms=15 * 60000)
    assert view == {HASH_A: ["edge@us-east-1", "origin@us-east-1"], HASH_B: ["origin@eu-west-1"]}


@given(st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]), hashes, min_size=1))
@settings(max_examples=150, deadline=None)
def test_skew_is_more_than_one_hash_and_alerts_only_on_a_change_of_the_hash_set(assignment):
    view = skew_view([item(f"origin@{r}", h) for r, h in assignment.items()], NOW_MS, 900000)
    state, alerts = evolve_skew(None, view, server_id="s", probe_region="eu-west-1", request_id="r", at=T0)
    skewed = len(set(assignment.values())) > 1
    assert state is not None and state["skewed"] == skewed
    assert [a.kind for a in alerts] == (["schema-skew"] if skewed else [])
    # The same hash set again, whichever regions hold which hash: no alert.
    again, alerts_again = evolve_skew(state, view, server_id="s", probe_region="eu-west-1", request_id="r2", at=T0)
    assert again is None and alerts_again == []


def test_skew_resolution_alerts_once_and_no_evidence_changes_nothing():
    skewed = {HASH_A: ["origin@r1"], HASH_B: ["origin@r2"]}
    state, _ = evolve_skew(None, skewed, server_id="s", probe_region="p", request_id="1", at=T0)
    assert evolve_skew(state, {}, server_id="s", probe_region="p", request_id="2", at=T0) == (None, [])
    resolved, alerts = evolve_skew(state, {HASH_B: ["origin@r1", "origin@r2"]}, server_id="s", probe_region="p",
                                   request_id="3", at=T0)
    assert [a.kind for a in alerts] == ["schema-skew-resolved"]
    assert resolved is not None and not resolved["skewed"]
    _, again = evolve_skew(resolved, {HASH_B: ["origin@r1", "origin@r2"]}, server_id="s", probe_region="p",
                           request_id="4", at=T0)
    assert again == []
