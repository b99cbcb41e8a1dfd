"""Region health with each probe region's consumer on its own copy of the results table
(moto: one table per region, replication played by hand), as on AWS: a copy learns the
other probe regions' streaks by global-table replication, about a second later.

When every probe region's outcome of the round that completes a quorum reaches its
consumer before the others' streaks have replicated (probes of every region fire on the
same schedule), no consumer sees the quorum in its own copy. The decision must still be
taken in that round, not one round late: the consumer whose vote would complete a change
reads the other probe regions' streaks where their consumers write them."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError, NoRegionError

from functions.results.consumer import Consumer, HealthPublishing, Processed
from functions.results.health import HealthSettings
from functions.results.state import Alert
from functions.results.store import HEALTH_PK_PREFIX, ResultsStore, StreakReadError
from local.cloudfront.key_value_store import KvsServer, serving
from tests.functions.results.conftest import TABLE, Aws, Record, create_results_table, failure, probe_event
from tests.functions.results.test_health_publishing import ARN, Clock, CountingStore, kvs_client, outcome_of, published

PROBES = ("us-east-1", "eu-west-1", "ap-southeast-1")
VICTIM = "ap-northeast-1"
SETTINGS = HealthSettings(PROBES, quorum=2, failure_threshold=2, recovery_threshold=2, vote_max_age_ms=180_000)


@dataclass
class RegionalConsumer:
    region: str
    table: Any  # this region's copy of the results table
    consumer: Consumer
    kvs: CountingStore
    sent: list[Alert]


@pytest.fixture
def kvs(aws: Aws, tmp_path: Path) -> Iterator[KvsServer]:
    with serving(tmp_path / "kvs.json", ARN) as server:
        yield server


def copies(aws: Aws) -> dict[str, Any]:
    """Each probe region's copy of the table (the aws fixture's region already has one)."""
    clients = {}
    for region in PROBES:
        clients[region] = boto3.client("dynamodb", region_name=region)
        if region != aws.region:
            create_results_table(clients[region])
    return clients


def consumers(aws: Aws, kvs: KvsServer, clock: Clock, *, read_owners: bool = True) -> dict[str, RegionalConsumer]:
    tables = copies(aws)
    out = {}
    for region, table in tables.items():
        sent: list[Alert] = []
        store = ResultsStore(TABLE, table, history_ttl_s=86400, region_client=tables.get if read_owners else None)
        health = CountingStore(kvs_client(kvs.url))
        out[region] = RegionalConsumer(region, table, Consumer(store, sent.append, health=HealthPublishing(
            SETTINGS, health), clock=clock), health, sent)
    return out


def replicate(regions: dict[str, RegionalConsumer]) -> None:
    """Global-table replication, caught up: every region-health item copied from its copy to the others."""
    for source in regions.values():
        items = [i for i in source.table.scan(TableName=TABLE)["Items"] if i["pk"]["S"].startswith(HEALTH_PK_PREFIX)
                 and i["sk"]["S"].startswith(f"STREAK#{source.region}#")]
        for target in regions.values():
            if target is not source:
                for item in items:
                    target.table.put_item(TableName=TABLE, Item=item)


def round_of(regions: dict[str, RegionalConsumer], at: dt.datetime, ok: bool,
             order: tuple[str, ...] = PROBES) -> list[Processed]:
    """One probe round: each probe region's consumer takes its own outcomes for VICTIM, one region
    after the other (in ``order``), before anything replicates (they arrive within the replication lag)."""
    done = []
    for region in (regions[r] for r in order):
        for target in ("edge", "origin"):
            kw: dict[str, Any] = {"event": probe_event(target, VICTIM), "at": at, "probe_region": region.region}
            record = Record(**kw) if ok else failure(**kw)
            done.append(region.consumer.process(outcome_of(record), "results"))
    return done


class Unreachable:
    """A region's DynamoDB endpoint that does not answer."""

    def __init__(self) -> None:
        self.calls = 0

    def query(self, **_: Any) -> Any:
        self.calls += 1
        raise EndpointConnectionError(endpoint_url="https://dynamodb.ap-southeast-1.amazonaws.com")


def region_alerts(regions: dict[str, RegionalConsumer]) -> list[str]:
    return [a.kind for r in regions.values() for a in r.sent if a.kind.startswith("region-")]


@pytest.mark.parametrize("order", list(itertools.permutations(PROBES)))
def test_a_quorum_completed_before_replication_is_published_in_that_round_once(aws: Aws, kvs: KvsServer,
                                                                              order: tuple[str, ...]) -> None:
    clock = Clock()
    regions = consumers(aws, kvs, clock)
    start = clock.now
    # Given a round in which every probe region saw VICTIM fail once, replicated everywhere
    round_of(regions, start, ok=False)
    replicate(regions)
    assert published(kvs) is None
    # When the second failed round reaches every consumer before any replication, in any order
    clock.now = start + dt.timedelta(minutes=1, seconds=2)
    done = round_of(regions, start + dt.timedelta(minutes=1), ok=False, order=order)
    # Then the consumer whose vote completes the quorum publishes the avoid in this round, and only once
    assert (published(kvs) or {}).get("avoid") == [VICTIM]
    assert [d.health for d in done if d.health] == ["avoid"]
    assert sum(r.kvs.writes for r in regions.values()) == 1 and region_alerts(regions) == ["region-avoided"]
    # And the restore is not a round late either
    replicate(regions)
    for minute in (2, 3):
        clock.now = start + dt.timedelta(minutes=minute, seconds=2)
        done = round_of(regions, start + dt.timedelta(minutes=minute), ok=True, order=order)
        if minute == 2:
            replicate(regions)
    assert (published(kvs) or {}).get("avoid") == []
    assert [d.health for d in done if d.health] == ["restore"]
    assert region_alerts(regions) == ["region-avoided", "region-restored"]


def test_deciding_on_the_own_copy_only_publishes_a_round_late(aws: Aws, kvs: KvsServer) -> None:
    """What reading the owners' streaks prevents (the e2e flake: the avoid landed after the region came back)."""
    clock = Clock()
    regions = consumers(aws, kvs, clock, read_owners=False)
    start = clock.now
    round_of(regions, start, ok=False)
    replicate(regions)
    clock.now = start + dt.timedelta(minutes=1, seconds=2)
    round_of(regions, start + dt.timedelta(minutes=1), ok=False)
    assert published(kvs) is None  # a quorum of probe regions saw it fail twice, and nobody knows
    replicate(regions)
    clock.now = start + dt.timedelta(minutes=2, seconds=2)
    round_of(regions, start + dt.timedelta(minutes=2), ok=True)  # it is back: the avoid lands now
    assert (published(kvs) or {}).get("avoid") == [VICTIM]


def test_an_owner_copy_that_cannot_be_read_falls_back_to_the_replicated_streak(aws: Aws, kvs: KvsServer) -> None:
    clock = Clock()
    regions = consumers(aws, kvs, clock)
    unreachable = Unreachable()
    tables = {r.region: r.table for r in regions.values()} | {"ap-southeast-1": unreachable}
    for region in regions.values():
        region.consumer.store.region_client = tables.get
    start = clock.now
    round_of(regions, start, ok=False)
    replicate(regions)
    clock.now = start + dt.timedelta(minutes=1, seconds=2)
    done = round_of(regions, start + dt.timedelta(minutes=1), ok=False)
    # us-east-1's and eu-west-1's votes meet through the readable copies; ap-southeast-1's is read
    # from the replica, and its failed read is reported, not raised
    assert (published(kvs) or {}).get("avoid") == [VICTIM]
    assert any("ap-southeast-1" in " ".join(d.owner_read_errors) for d in done)
    assert all(d.new for d in done)
    # A copy that did not answer is left alone for a while: one try per consumer, not one per outcome
    # (us-east-1's consumer tried at its first outcome and skipped it at its second; eu-west-1's
    # tried once and decided)
    assert unreachable.calls == 2
    assert sum(bool(d.owner_read_errors) for d in done) == 2


def test_the_handler_reads_each_probe_regions_copy_through_that_regions_client(aws: Aws,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    sys.modules.pop("functions.results.handler", None)
    handler = importlib.import_module("functions.results.handler")
    region_client = handler.consumer.store.region_client
    assert region_client(aws.region) is handler._dynamodb  # its own copy: the consumer's client
    other = region_client("ap-southeast-1")
    assert other.meta.region_name == "ap-southeast-1" and region_client("ap-southeast-1") is other  # made once
    assert other.meta.config.connect_timeout == 1 and other.meta.config.read_timeout == 2


def test_a_region_whose_client_cannot_be_made_is_a_streak_read_error_not_a_failed_message(aws: Aws) -> None:
    def no_client(region: str) -> Any:
        raise NoRegionError()

    store = ResultsStore(TABLE, aws.dynamodb, history_ttl_s=86400, region_client=no_client)
    with pytest.raises(StreakReadError, match="ap-southeast-1's streaks for ap-northeast-1: NoRegionError"):
        store.owned_streaks("acme-mcp", VICTIM, "ap-southeast-1")
    assert ResultsStore(TABLE, aws.dynamodb, history_ttl_s=86400).owned_streaks("acme-mcp", VICTIM, "eu-west-1") is None
