"""Alerts exactly once across probe regions: every consumer claims its alerts in the
results table's home region (moto, one table per region, as replicas that have not
caught up yet), so consumers of two regions racing on the same outage page once.

Given two probe regions' consumers, each on its own region's copy of the table,
when both see the same target go down at the same moment,
then exactly one of them pages, and the claim sits in the home region's copy."""

from __future__ import annotations

import datetime as dt
import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from functions.results.consumer import Consumer, HealthPublishing
from functions.results.envelope import parse_record_body
from functions.results.state import Alert
from functions.results.store import ResultsStore, alert_pk
from tests.functions.results.conftest import REGION, SERVER, T0, TABLE, Aws, create_results_table, failure, probe_event

HOME = "us-east-1"
OTHER = REGION  # eu-west-1: the aws fixture's region


class Serialized:
    """A DynamoDB client whose conditional writes race: every caller waits at the
    barrier first, then DynamoDB serializes writes to one item within a region (moto
    does not lock, so the lock stands in for that)."""

    def __init__(self, real: Any, barrier: threading.Barrier, lock: threading.Lock):
        self._real, self._barrier, self._lock = real, barrier, lock

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)
        if name != "put_item":
            return method

        def call(**kwargs: Any) -> Any:
            if kwargs["Item"]["pk"]["S"].startswith("ALERT#"):
                self._barrier.wait(timeout=10)
            with self._lock:
                return method(**kwargs)

        return call


def consumer_in(local: Any, claims: Any, sent: list[Alert], lock: threading.Lock) -> Consumer:
    def publish(alert: Alert) -> None:
        with lock:
            sent.append(alert)

    return Consumer(ResultsStore(TABLE, local, history_ttl_s=86400, claims_client=claims), publish)


def race(*jobs: Callable[[], Any]) -> None:
    errors: list[BaseException] = []

    def run(job: Callable[[], Any]) -> None:
        try:
            job()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors


def down_outcomes(probe_region: str) -> list[Any]:
    event = probe_event("origin", "ap-southeast-1")
    return [parse_record_body(failure(event=event, at=T0 + dt.timedelta(minutes=i), probe_region=probe_region,
                                      request_id=f"{probe_region}-{i}").json(), probe_region) for i in range(2)]


@pytest.fixture
def home(aws: Aws) -> Any:
    client = boto3.client("dynamodb", region_name=HOME)
    create_results_table(client)
    return client


def claims_in(client: Any) -> list[str]:
    items = client.query(TableName=TABLE, KeyConditionExpression="pk = :pk",
                         ExpressionAttributeValues={":pk": {"S": alert_pk(SERVER)}})["Items"]
    return [i["sk"]["S"] for i in items]


def test_consumers_of_two_regions_racing_on_one_outage_page_once(aws: Aws, home: Any):
    barrier, lock, sent = threading.Barrier(2), threading.Lock(), list[Alert]()
    consumers = {
        HOME: consumer_in(home, Serialized(home, barrier, lock), sent, lock),
        OTHER: consumer_in(aws.dynamodb, Serialized(home, barrier, lock), sent, lock),
    }
    first = {region: down_outcomes(region) for region in consumers}
    for region, consumer in consumers.items():
        consumer.process(first[region][0], "dlq")  # one failure each: below down_after

    race(*(lambda c=c, o=first[r][1]: c.process(o, "dlq") for r, c in consumers.items()))

    assert [a.kind for a in sent] == ["target-down"]
    assert claims_in(home) == ["target-down#origin@ap-southeast-1"]
    assert claims_in(aws.dynamodb) == []  # nothing claimed in the other region's copy


def test_each_region_claiming_in_its_own_copy_pages_twice(aws: Aws, home: Any):
    """What the home-region claim prevents: claims in each region's own replica race
    unseen by each other (replication is later, last writer wins)."""
    barrier, lock, sent = threading.Barrier(2), threading.Lock(), list[Alert]()
    consumers = [consumer_in(home, Serialized(home, barrier, lock), sent, lock),
                 consumer_in(aws.dynamodb, Serialized(aws.dynamodb, barrier, lock), sent, lock)]
    outcomes = [down_outcomes(HOME), down_outcomes(OTHER)]
    for consumer, mine in zip(consumers, outcomes, strict=True):
        consumer.process(mine[0], "dlq")
    race(*(lambda c=c, o=mine[1]: c.process(o, "dlq") for c, mine in zip(consumers, outcomes, strict=True)))
    assert [a.kind for a in sent] == ["target-down", "target-down"]


def test_a_region_health_alert_from_another_region_is_claimed_in_the_home_region(aws: Aws, home: Any, tmp_path):
    from functions.results.health import HealthSettings
    from local.cloudfront.key_value_store import serving
    from tests.functions.results.test_health_publishing import ARN, CountingStore, kvs_client

    settings = HealthSettings((OTHER,), quorum=1, failure_threshold=2, recovery_threshold=2,
                              vote_max_age_ms=10**12)
    sent: list[Alert] = []
    with serving(tmp_path / "kvs.json", ARN) as kvs:
        consumer = Consumer(ResultsStore(TABLE, aws.dynamodb, history_ttl_s=86400, claims_client=home), sent.append,
                            health=HealthPublishing(settings, CountingStore(kvs_client(kvs.url))))
        for outcome in down_outcomes(OTHER):
            consumer.process(outcome, "dlq")
    kinds = sorted(a.kind for a in sent)
    assert kinds == ["region-avoided", "target-down"]
    assert sorted(sk.split("#", 1)[0] for sk in claims_in(home)) == ["region-avoided", "target-down"]
    assert claims_in(aws.dynamodb) == []


def test_the_handler_claims_in_alert_claim_region(aws: Aws, home: Any, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("ALERT_CLAIM_REGION", HOME)
    sys.modules.pop("functions.results.handler", None)
    handler = importlib.import_module("functions.results.handler")
    assert handler.consumer.store.claims.meta.region_name == HOME
    assert handler.consumer.store.client.meta.region_name == OTHER
    monkeypatch.setenv("ALERT_CLAIM_REGION", OTHER)
    assert handler.claims_client() is None  # the home region's consumer claims in its own copy
    monkeypatch.setenv("ALERT_CLAIM_REGION", "not a region!")
    with pytest.raises(RuntimeError, match="ALERT_CLAIM_REGION"):
        handler.claims_client()


def test_a_failed_publish_releases_the_claim_in_the_home_region_so_the_retry_pages_once(aws: Aws, home: Any):
    # Given a consumer in another region whose first publish fails
    attempts: list[Alert] = []
    sent: list[Alert] = []

    def publish(alert: Alert) -> None:
        attempts.append(alert)
        if len(attempts) == 1:
            raise RuntimeError("SNS unavailable")
        sent.append(alert)

    consumer = Consumer(ResultsStore(TABLE, aws.dynamodb, history_ttl_s=86400, claims_client=home), publish)
    outcomes = down_outcomes(OTHER)
    consumer.process(outcomes[0], "dlq")
    # When the alert's publish fails, the claim is released in the home region (nothing left to suppress it) ...
    with pytest.raises(RuntimeError, match="SNS unavailable"):
        consumer.process(outcomes[1], "dlq")
    assert claims_in(home) == [] and sent == []
    # ... and the redelivery claims it again there, pages once and marks it sent there
    consumer.process(outcomes[1], "dlq")
    assert [a.kind for a in sent] == ["target-down"]
    item = home.get_item(TableName=TABLE, Key={"pk": {"S": alert_pk(SERVER)}, "sk": {"S": claims_in(home)[0]}})["Item"]
    assert item["state"]["S"] == "sent" and claims_in(aws.dynamodb) == []
