"""The consumer's Lambda handler (Powertools batch processing) against moto: what each
destination record writes, what it alerts, and what it reports as failed."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.functions.results.conftest import (
    DLQ_ARN,
    HASH_A,
    HASH_B,
    HASH_C,
    SERVER,
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


@pytest.fixture
def handler(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("HISTORY_TTL_DAYS", "30")
    monkeypatch.setenv("DEAD_LETTER_QUEUE_ARN", DLQ_ARN)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "McpEdge/Probes")
    sys.modules.pop("functions.results.handler", None)
    # Imported inside the moto mock: its module-level clients talk to moto.
    return pin_clock(importlib.import_module("functions.results.handler"))


def invoke(handler: ModuleType, *bodies: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = handler.handler(sqs_event(*bodies, **kw), Context())
    return result


def emf_documents(output: str) -> list[dict[str, Any]]:
    """EMF documents printed to stdout, each metric value summed (Powertools emits lists)."""
    docs = []
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            names = {m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
            docs.append({k: (sum(v) if isinstance(v, list) else v) if k in names else v for k, v in doc.items()})
    return docs


def test_success_writes_history_and_latest_and_emits_availability_and_latency(handler, aws, capsys):
    record = Record(response=probe_result(HASH_A, latency=87.5, tools=4))
    assert invoke(handler, record.json()) == {"batchItemFailures": []}

    history = aws.items("HISTORY#")
    assert len(history) == 1
    assert history[0]["pk"] == f"HISTORY#{SERVER}#eu-west-1#origin@us-east-1"
    assert history[0]["requestId"] == record.request_id
    assert history[0]["status"] == "healthy"
    assert history[0]["schemaHash"] == HASH_A
    assert history[0]["latencyMs"] == 87.5
    assert history[0]["expiresAt"] == int(T0.timestamp()) + 30 * 86400
    latest = aws.items(f"LATEST#{SERVER}")
    targets = [i for i in latest if i["sk"].startswith("TARGET#")]
    assert [t["sk"] for t in targets] == ["TARGET#eu-west-1#origin@us-east-1"]
    assert targets[0]["schemaHash"] == HASH_A and targets[0]["toolCount"] == 4 and targets[0]["status"] == "healthy"

    docs = emf_documents(capsys.readouterr().out)
    per_target = [d for d in docs if "Availability" in d]
    assert len(per_target) == 1
    doc = per_target[0]
    assert doc["Availability"] == 1.0 and doc["Latency"] == 87.5
    assert doc["TargetRegion"] == "us-east-1" and doc["Target"] == "origin" and doc["ProbeRegion"] == "eu-west-1"
    assert doc["_aws"]["Timestamp"] == int(T0.timestamp() * 1000)
    assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "McpEdge/Probes"
    assert aws.alerts() == []


@pytest.mark.parametrize(
    ("record", "error_type"),
    [
        (failure("ProbeTimeoutError", "tools/list: no response within the 20 s deadline"), "ProbeTimeoutError"),
        (failure("ProbeHttpError", "tools/list: HTTP 500"), "ProbeHttpError"),
        (Record(condition="EventAgeExceeded", response=None), "EventAgeExceeded"),
    ],
    ids=["RetriesExhausted-timeout", "RetriesExhausted-http", "EventAgeExceeded"],
)
def test_failure_conditions_are_recorded_as_failed_with_their_error(handler, aws, capsys, record, error_type):
    assert invoke(handler, record.json(), queue_arn=DLQ_ARN) == {"batchItemFailures": []}
    (history,) = aws.items("HISTORY#")
    assert history["status"] == "failed"
    assert history["condition"] == record.condition
    assert history["errorType"] == error_type
    assert history["queue"] == DLQ_ARN.rsplit(":", 1)[-1]
    (latest,) = [i for i in aws.items("LATEST#") if i["sk"].startswith("TARGET#")]
    assert latest["status"] == "failed" and latest["consecutiveFailures"] == 1 and latest["lastErrorType"] == error_type
    (doc,) = [d for d in emf_documents(capsys.readouterr().out) if "Availability" in d]
    assert doc["Availability"] == 0.0 and "Latency" not in doc


def test_redelivered_message_writes_one_item_and_counts_once(handler, aws, capsys):
    record = Record()
    body = record.json()
    invoke(handler, body)
    capsys.readouterr()
    # The same message again (visibility timeout passed), and the same outcome as a
    # second message (Lambda delivered the destination record twice).
    assert invoke(handler, body) == {"batchItemFailures": []}
    assert invoke(handler, body, message_ids=["another-message-id"]) == {"batchItemFailures": []}
    assert len(aws.items("HISTORY#")) == 1
    assert len(aws.items("REQUEST#")) == 1
    docs = emf_documents(capsys.readouterr().out)
    assert not [d for d in docs if "Availability" in d], "a duplicate must not count twice in availability"
    assert sum(d.get("DuplicateOutcomes", 0) for d in docs) == 2


def test_same_invocation_completed_twice_is_one_history_item(handler, aws):
    """Lambda may run one async invocation twice: same request id, different timestamps."""
    first = Record(at=T0)
    again = dataclasses.replace(first, at=T0 + dt.timedelta(seconds=3))
    invoke(handler, first.json(), again.json())
    assert len(aws.items("HISTORY#")) == 1


@pytest.mark.parametrize(
    "poison",
    [
        "not json at all",
        json.dumps({"hello": "world"}),
        json.dumps({"requestContext": {"requestId": "r-1", "condition": "Maybe"}, "timestamp": "2026-11-29T10:00:00Z"}),
        Record(response={**probe_result(), "schemaHash": "not-a-hash"}).json(),
        Record(response={**probe_result(), "status": "great"}).json(),
        Record(response={**probe_result(), "latencyMs": "fast"}).json(),
        json.dumps({**Record().body(), "timestamp": "yesterday"}),
    ],
    ids=["not-json", "not-a-destination-record", "unknown-condition", "bad-hash", "bad-status", "bad-latency", "bad-time"],
)
def test_poison_message_is_reported_and_the_rest_of_the_batch_commits(handler, aws, capsys, caplog, poison):
    good1, good2 = Record(event=probe_event("origin", "us-east-1")), Record(event=probe_event("edge", "eu-west-1"))
    result = invoke(handler, good1.json(), poison, good2.json(), message_ids=["m-good-1", "m-poison", "m-good-2"])
    assert result == {"batchItemFailures": [{"itemIdentifier": "m-poison"}]}
    assert {h["requestId"] for h in aws.items("HISTORY#")} == {good1.request_id, good2.request_id}
    logged = [r for r in caplog.records if r.getMessage() == "malformed message"]
    assert len(logged) == 1
    assert logged[0].levelname == "ERROR" and logged[0].messageId == "m-poison" and logged[0].reason  # type: ignore[attr-defined]
    assert sum(d.get("MalformedMessages", 0) for d in emf_documents(capsys.readouterr().out)) == 1


def test_batch_of_only_poison_is_reported_not_raised(handler, aws):
    assert invoke(handler, "{", message_ids=["m-1"]) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


def test_invalid_probe_event_failure_is_kept_in_history_not_lost(handler, aws, capsys):
    record = failure("ProbeInputError", "invalid probe event: missing required key(s): endpoint",
                     event={"serverId": SERVER, "target": "origin"})
    assert invoke(handler, record.json(), queue_arn=DLQ_ARN) == {"batchItemFailures": []}
    (history,) = aws.items("HISTORY#")
    assert history["pk"] == "HISTORY#INVALID-EVENT#eu-west-1"
    assert history["errorType"] == "ProbeInputError"
    assert not aws.items("LATEST#")
    assert sum(d.get("InvalidProbeEvents", 0) for d in emf_documents(capsys.readouterr().out)) == 1


def test_drift_alert_is_published_once(handler, aws):
    first = Record(response=probe_result(HASH_A, tools=3), at=T0)
    changed = Record(response=probe_result(HASH_B, tools=4), at=T0 + dt.timedelta(minutes=1))
    later = Record(response=probe_result(HASH_B, tools=4), at=T0 + dt.timedelta(minutes=2))
    invoke(handler, first.json())
    assert aws.alerts() == []
    invoke(handler, changed.json())
    invoke(handler, changed.json())  # redelivered
    invoke(handler, later.json())  # same schema, no change
    alerts = aws.alerts()
    assert [a["kind"] for a in alerts] == ["schema-drift"]
    assert alerts[0]["subject"] == "[acme-mcp] schema drift: tools changed at origin@us-east-1"
    assert HASH_A[:12] in alerts[0]["message"] and HASH_B[:12] in alerts[0]["message"]
    assert "tool count 3 -> 4" in alerts[0]["message"]
    (latest,) = [i for i in aws.items("LATEST#") if i["sk"].startswith("TARGET#")]
    assert latest["schemaHash"] == HASH_B and latest["previousSchemaHash"] == HASH_A
    assert not latest.get("pendingAlerts")


def test_the_same_change_seen_from_another_probe_region_does_not_alert_again(handler, aws):
    for probe_region in ("eu-west-1", "ap-southeast-1"):
        invoke(handler, Record(response=probe_result(HASH_A), at=T0, probe_region=probe_region).json())
    invoke(handler, Record(response=probe_result(HASH_B), at=T0 + dt.timedelta(minutes=1), probe_region="eu-west-1").json())
    invoke(handler, Record(response=probe_result(HASH_B), at=T0 + dt.timedelta(minutes=1, seconds=20),
                           probe_region="ap-southeast-1").json())
    assert [a["kind"] for a in aws.alerts()] == ["schema-drift"]
    # ... but both regions' latest state knows about the change.
    targets = [i for i in aws.items("LATEST#") if i["sk"].startswith("TARGET#")]
    assert {t["probeRegion"]: t["previousSchemaHash"] for t in targets} == {"eu-west-1": HASH_A, "ap-southeast-1": HASH_A}


def test_out_of_order_outcome_adds_history_but_does_not_move_latest_or_alert(handler, aws):
    newer = Record(response=probe_result(HASH_B), at=T0 + dt.timedelta(minutes=2))
    older = Record(response=probe_result(HASH_A), at=T0 + dt.timedelta(minutes=1))
    invoke(handler, newer.json(), older.json())
    assert len(aws.items("HISTORY#")) == 2
    (latest,) = [i for i in aws.items("LATEST#") if i["sk"].startswith("TARGET#")]
    assert latest["schemaHash"] == HASH_B and latest["lastRequestId"] == newer.request_id
    assert aws.alerts() == []


def test_skew_alert_once_while_regions_differ_and_resolution_once(handler, aws):
    regions = ("us-east-1", "eu-west-1", "ap-southeast-1")
    minute = 0

    def round_of(hashes: dict[str, str]) -> None:
        nonlocal minute
        minute += 1
        bodies = [Record(event=probe_event("origin", r), response=probe_result(h), at=T0 + dt.timedelta(minutes=minute)).json()
                  for r, h in hashes.items()]
        invoke(handler, *bodies)

    round_of(dict.fromkeys(regions, HASH_A))
    assert aws.alerts() == []
    # A release reaches one region first: skew.
    round_of({"us-east-1": HASH_B, "eu-west-1": HASH_A, "ap-southeast-1": HASH_A})
    alerts = aws.alerts()
    assert sorted(a["kind"] for a in alerts) == ["schema-drift", "schema-skew"]
    skew = next(a for a in alerts if a["kind"] == "schema-skew")
    assert "origin@us-east-1" in skew["message"] and "origin@ap-southeast-1, origin@eu-west-1" in skew["message"]
    # Unchanged, and a second region catching up: same two tool sets, and the same
    # change (A -> B) already alerted: nothing new.
    round_of({"us-east-1": HASH_B, "eu-west-1": HASH_A, "ap-southeast-1": HASH_A})
    round_of({"us-east-1": HASH_B, "eu-west-1": HASH_B, "ap-southeast-1": HASH_A})
    assert aws.alerts() == []
    # A third tool set appears (a new change, A -> C): the skew changed, alert again.
    round_of({"us-east-1": HASH_B, "eu-west-1": HASH_B, "ap-southeast-1": HASH_C})
    assert sorted(a["kind"] for a in aws.alerts()) == ["schema-drift", "schema-skew"]
    # Everyone on the release (C -> B is one more change): resolved, once.
    round_of(dict.fromkeys(regions, HASH_B))
    round_of(dict.fromkeys(regions, HASH_B))
    assert sorted(a["kind"] for a in aws.alerts()) == ["schema-drift", "schema-skew-resolved"]


def test_target_down_after_two_failures_and_recovered_once(handler, aws):
    invoke(handler, Record(at=T0).json())
    invoke(handler, failure(at=T0 + dt.timedelta(minutes=1)).json(), queue_arn=DLQ_ARN)
    assert aws.alerts() == []  # one failure is a blip
    invoke(handler, failure(at=T0 + dt.timedelta(minutes=2)).json(), queue_arn=DLQ_ARN)
    invoke(handler, failure(at=T0 + dt.timedelta(minutes=3)).json(), queue_arn=DLQ_ARN)
    alerts = aws.alerts()
    assert [a["kind"] for a in alerts] == ["target-down"]
    assert "ProbeHttpError: tools/list: HTTP 500" in alerts[0]["message"]
    invoke(handler, Record(at=T0 + dt.timedelta(minutes=4)).json())
    invoke(handler, Record(at=T0 + dt.timedelta(minutes=5)).json())
    assert [a["kind"] for a in aws.alerts()] == ["target-recovered"]


def test_publish_failure_keeps_the_alert_for_the_retry(handler, aws, monkeypatch):
    invoke(handler, Record(response=probe_result(HASH_A), at=T0).json())
    changed = Record(response=probe_result(HASH_B), at=T0 + dt.timedelta(minutes=1))
    real_publish = handler.consumer.publish

    def broken(alert: Any) -> None:
        raise RuntimeError("SNS is down")

    monkeypatch.setattr(handler.consumer, "publish", broken)
    assert invoke(handler, changed.json(), message_ids=["m-1"]) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert aws.alerts() == []
    (latest,) = [i for i in aws.items("LATEST#") if i["sk"].startswith("TARGET#")]
    assert len(latest["pendingAlerts"]) == 1  # stored with the state change, not lost
    monkeypatch.setattr(handler.consumer, "publish", real_publish)
    assert invoke(handler, changed.json(), message_ids=["m-1"]) == {"batchItemFailures": []}
    assert [a["kind"] for a in aws.alerts()] == ["schema-drift"]
    invoke(handler, changed.json(), message_ids=["m-1"])
    assert aws.alerts() == []


def test_degraded_outcome_counts_as_available_and_degraded(handler, aws, capsys):
    invoke(handler, Record(response=probe_result(status="degraded", latency=2000.0)).json())
    (doc,) = [d for d in emf_documents(capsys.readouterr().out) if "Availability" in d]
    assert doc["Availability"] == 1.0 and doc["Degraded"] == 1.0 and doc["Latency"] == 2000.0
