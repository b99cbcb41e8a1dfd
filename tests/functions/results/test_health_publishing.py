"""The consumer publishing region health: streaks in the results table (moto), the
document in the local KeyValueStore (local/cloudfront/key_value_store.py, through boto3's SigV4A
client), alerts through the claim path; two consumers racing, conflicts, a store
that is down, and the handler's HEALTH_* environment."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import importlib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from functions.results.consumer import Consumer, HealthPublishing, Processed
from functions.results.envelope import parse_record_body
from functions.results.health import REGION_HEALTH_KEY, HealthSettings
from functions.results.kvs import HealthStore, Published, route_to
from functions.results.state import Alert
from functions.results.store import ResultsStore, deserialize, health_pk, streak_sk
from local.cloudfront.key_value_store import KvsServer, serving
from local.supervisor import free_ports
from tests.functions.results.conftest import SERVER, TABLE, Aws, Context, Record, failure, probe_event, sqs_event

ARN = "arn:aws:cloudfront::123456789012:key-value-store/0b1c2d3e-1111-2222-3333-444455556666"
PROBES = ("us-east-1", "eu-west-1", "ap-southeast-1")
ORIGINS = ("us-east-1", "eu-west-1")
START = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)
# What the component sets beside the probe regions (components/probe_fleet.py).
STORE = {"HEALTH_STORE_ARN": ARN, "HEALTH_ORIGIN_REGIONS": ",".join(ORIGINS)}
SETTINGS = HealthSettings(PROBES, quorum=2, failure_threshold=2, recovery_threshold=2, vote_max_age_ms=180_000)

Observe = Callable[[str, str, str], bool]  # (probe region, origin region, target) -> succeeded


def kvs_client(url: str) -> Any:
    client = boto3.client("cloudfront-keyvaluestore", region_name="eu-west-1")
    route_to(client, url)
    return client


@pytest.fixture
def kvs(aws: Aws, tmp_path: Path) -> Iterator[KvsServer]:
    with serving(tmp_path / "kvs.json", ARN) as server:
        yield server


@dataclass
class Clock:
    now: dt.datetime = START

    def __call__(self) -> float:
        return self.now.timestamp()


class CountingStore(HealthStore):
    """The real store client, counting the writes that landed and the conflicts."""

    def __init__(self, client: Any, before_put: Callable[[], None] | None = None):
        super().__init__(client, ARN)
        self.reads = 0
        self.writes = 0
        self.conflicts = 0
        self.before_put = before_put

    def read(self) -> Published:
        self.reads += 1
        return super().read()

    def put(self, value: str, etag: str) -> str | None:
        if self.before_put is not None:
            hook, self.before_put = self.before_put, None
            hook()
        result = super().put(value, etag)
        if result is None:
            self.conflicts += 1
        else:
            self.writes += 1
        return result


@dataclass
class Region:
    """One probe region's consumer (on AWS, in its own region, on its table replica)."""

    consumer: Consumer
    kvs: CountingStore
    sent: list[Alert] = field(default_factory=list)

    @property
    def alerts(self) -> list[Alert]:
        """The region-health alerts published (target-down and the others go there too)."""
        return [a for a in self.sent if a.kind.startswith("region-")]


def region_consumer(aws: Aws, kvs: KvsServer, clock: Clock, settings: HealthSettings = SETTINGS,
                    store: CountingStore | None = None) -> Region:
    health_store = store or CountingStore(kvs_client(kvs.url))
    alerts: list[Alert] = []
    consumer = Consumer(ResultsStore(TABLE, aws.dynamodb, history_ttl_s=86400), alerts.append,
                        health=HealthPublishing(settings, health_store), clock=clock)
    return Region(consumer, health_store, alerts)


def outcome_of(record: Record) -> Any:
    return parse_record_body(record.json(), record.probe_region)


def round_records(at: dt.datetime, ok: Observe, probes: tuple[str, ...] = PROBES,
                  origins: tuple[str, ...] = ORIGINS) -> list[Record]:
    records = []
    for p in probes:
        for origin in origins:
            for target in ("edge", "origin"):
                kw: dict[str, Any] = {"event": probe_event(target, origin), "at": at, "probe_region": p}
                records.append(Record(**kw) if ok(p, origin, target) else failure(**kw))
    return records


def play(region: Region, clock: Clock, ok: Observe, rounds: int) -> list[Processed]:
    done = []
    for _ in range(rounds):
        for record in round_records(clock.now, ok):
            done.append(region.consumer.process(outcome_of(record), "results"))
        clock.now += dt.timedelta(minutes=1)
    return done


def published(kvs: KvsServer) -> dict[str, Any] | None:
    client = kvs_client(kvs.url)
    try:
        return dict(json.loads(client.get_key(KvsARN=ARN, Key=REGION_HEALTH_KEY)["Value"]))
    except client.exceptions.ResourceNotFoundException:
        return None


def eu_down(p: str, origin: str, target: str) -> bool:
    return origin != "eu-west-1"


def test_a_region_failing_from_a_quorum_is_published_avoided_once_then_restored_once(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 1)
    assert published(kvs) is None and region.kvs.writes == 0  # one failed round: below the threshold

    play(region, clock, eu_down, 2)
    doc = published(kvs)
    assert doc is not None and doc["v"] == 1 and doc["avoid"] == ["eu-west-1"]
    assert region.kvs.writes == 1  # two more failing rounds, one write
    assert [a.kind for a in region.alerts] == ["region-avoided"]
    assert "eu-west-1" in region.alerts[0].subject and "quorum 2" in region.alerts[0].message

    play(region, clock, lambda p, o, t: True, 1)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]  # one good round: below the threshold
    play(region, clock, lambda p, o, t: True, 1)
    doc = published(kvs)
    assert doc is not None and doc["avoid"] == []
    assert region.kvs.writes == 2
    assert [a.kind for a in region.alerts] == ["region-avoided", "region-restored"]


def test_the_streak_items_hold_the_layout_store_py_documents(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 2)
    item = deserialize(aws.dynamodb.get_item(TableName=TABLE, Key={
        "pk": {"S": health_pk(SERVER, "eu-west-1")}, "sk": {"S": streak_sk("ap-southeast-1", "edge")}})["Item"])
    assert item["pk"] == f"HEALTH#{SERVER}#eu-west-1" and item["sk"] == "STREAK#ap-southeast-1#edge"
    assert (item["failures"], item["successes"], item["probeRegion"], item["originRegion"], item["target"]) == (
        2, 0, "ap-southeast-1", "eu-west-1", "edge")
    assert item["checkedAtMs"] == int((START + dt.timedelta(minutes=1)).timestamp() * 1000)
    streaks = [i for i in aws.items("HEALTH#") if i["sk"].startswith("STREAK#")]
    assert len(streaks) == len(PROBES) * len(ORIGINS) * 2
    (mirror,) = [i for i in aws.items("HEALTH#") if i["sk"] == "PUBLISHED"]
    assert mirror["pk"] == f"HEALTH#{SERVER}" and json.loads(mirror["value"])["avoid"] == ["eu-west-1"]
    assert mirror["etag"] == kvs_client(kvs.url).describe_key_value_store(KvsARN=ARN)["ETag"]


def test_a_steady_state_is_decided_on_the_tables_mirror_without_calling_the_store(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 2)
    assert region.kvs.writes == 1
    reads = region.kvs.reads
    play(region, clock, eu_down, 2)  # within the refresh interval: nothing changes, nothing is read
    assert (region.kvs.reads, region.kvs.writes) == (reads, 1)
    clock.now += dt.timedelta(minutes=5)
    play(region, clock, eu_down, 1)  # the mirror is old: one outcome reads the store, the rest use it
    assert (region.kvs.reads, region.kvs.writes) == (reads + 1, 1)


def test_a_mirror_left_behind_by_a_crash_after_the_write_is_corrected_and_the_alert_sent_once(aws, kvs, monkeypatch):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 1)
    store = region.consumer.store
    real = store.put_published
    crashes: list[str] = []

    def crash_once(server_id: str, etag: str, value: str | None, read_at_ms: int) -> None:
        if value is not None and "eu-west-1" in value and not crashes:
            crashes.append(etag)
            raise RuntimeError("Lambda timed out")
        real(server_id, etag, value, read_at_ms)

    monkeypatch.setattr(store, "put_published", crash_once)
    failed = None
    for record in round_records(clock.now, eu_down):
        try:
            region.consumer.process(outcome_of(record), "results")
        except RuntimeError:
            failed = record
            break
    assert failed is not None and crashes and (published(kvs) or {}).get("avoid") == ["eu-west-1"]
    assert json.loads((store.get_published(SERVER) or {}).get("value") or '{"avoid": []}')["avoid"] == []
    region.consumer.process(outcome_of(failed), "results")  # redelivered: the mirror is behind the store
    mirror = store.get_published(SERVER) or {}
    assert mirror["etag"] == crashes[0] and json.loads(mirror["value"])["avoid"] == ["eu-west-1"]
    assert region.kvs.writes == 1 and [a.kind for a in region.alerts] == ["region-avoided"]


def test_a_store_changed_behind_the_mirrors_back_is_corrected_at_the_next_refresh(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 2)
    operator = kvs_client(kvs.url)
    operator.delete_key(KvsARN=ARN, Key=REGION_HEALTH_KEY, IfMatch=operator.describe_key_value_store(KvsARN=ARN)["ETag"])
    play(region, clock, eu_down, 1)
    assert published(kvs) is None  # the mirror still says avoided: nothing to change
    clock.now += dt.timedelta(minutes=5)
    play(region, clock, eu_down, 1)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"] and region.kvs.writes == 2


def test_a_redelivered_outcome_writes_nothing_again_and_alerts_nothing_again(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 1)
    last = round_records(clock.now, eu_down)
    first_done = [region.consumer.process(outcome_of(r), "results") for r in last]
    assert sum(d.health == "avoid" for d in first_done) == 1
    again = [region.consumer.process(outcome_of(r), "results") for r in last]
    assert not any(d.new or d.health for d in again)
    assert region.kvs.writes == 1 and [a.kind for a in region.alerts] == ["region-avoided"]


def test_two_consumers_racing_write_once_and_the_loser_sees_the_winners_document(aws, kvs):
    clock = Clock()
    winner = region_consumer(aws, kvs, clock)
    play(winner, clock, eu_down, 1)
    records = round_records(clock.now, eu_down)
    by_probe = {p: [r for r in records if r.probe_region == p] for p in PROBES}

    # The loser (consuming ap-southeast-1's then eu-west-1's outcomes) reads the store and
    # decides; the winner (us-east-1's) publishes before the loser's PutKey lands.
    def winner_first() -> None:
        for r in by_probe["us-east-1"]:
            winner.consumer.process(outcome_of(r), "results")

    loser = region_consumer(aws, kvs, clock, store=CountingStore(kvs_client(kvs.url), before_put=winner_first))
    done = [loser.consumer.process(outcome_of(r), "results") for r in by_probe["ap-southeast-1"] + by_probe["eu-west-1"]]
    assert winner.kvs.writes == 1 and loser.kvs.writes == 0 and loser.kvs.conflicts == 1
    assert not any(d.health for d in done) and not any(d.health_error for d in done)
    doc = published(kvs)
    assert doc is not None and doc["avoid"] == ["eu-west-1"]
    assert [a.kind for a in winner.alerts] == ["region-avoided"] and loser.alerts == []


def test_a_conflict_with_an_unrelated_change_is_retried_and_both_changes_are_kept(aws, kvs):
    clock = Clock()
    other = kvs_client(kvs.url)

    def someone_avoids_sa_east_1() -> None:
        etag = other.describe_key_value_store(KvsARN=ARN)["ETag"]
        value = json.dumps({"v": 1, "avoid": ["sa-east-1"], "at": "2026-11-29T09:00:00.000Z"})
        other.put_key(KvsARN=ARN, Key=REGION_HEALTH_KEY, Value=value, IfMatch=etag)

    region = region_consumer(aws, kvs, clock, store=CountingStore(kvs_client(kvs.url),
                                                                  before_put=someone_avoids_sa_east_1))
    play(region, clock, eu_down, 2)
    doc = published(kvs)
    assert doc is not None and doc["avoid"] == ["eu-west-1", "sa-east-1"]
    assert region.kvs.conflicts == 1 and region.kvs.writes == 1


class AlwaysConflicting(CountingStore):
    def put(self, value: str, etag: str) -> str | None:
        self.conflicts += 1
        return None


def test_a_store_that_keeps_conflicting_is_reported_and_the_next_outcome_publishes(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock, store=AlwaysConflicting(kvs_client(kvs.url)))
    done = play(region, clock, eu_down, 2)
    failed = [d for d in done if d.health_error]
    assert failed and "kept changing" in (failed[0].health_error or "")
    assert region.kvs.conflicts == 5 * len(failed) and published(kvs) is None and region.alerts == []
    # The decision is re-taken from the table by the next outcome, with a store that works.
    region.consumer.health = HealthPublishing(SETTINGS, CountingStore(kvs_client(kvs.url)))
    play(region, clock, eu_down, 1)
    doc = published(kvs)
    assert doc is not None and doc["avoid"] == ["eu-west-1"] and [a.kind for a in region.alerts] == ["region-avoided"]


def test_an_unreachable_store_loses_no_outcome_and_publishes_once_it_is_back(aws, kvs):
    clock = Clock()
    closed = f"http://127.0.0.1:{free_ports(1)[0]}"
    region = region_consumer(aws, kvs, clock, store=CountingStore(kvs_client(closed)))
    done = play(region, clock, eu_down, 2)
    assert all(d.new for d in done) and all(d.health_error for d in done)
    assert "reading 'region-health'" in (done[0].health_error or "")
    assert "paused for 30 s" in (done[1].health_error or "")
    assert region.kvs.reads == 2  # one try per round: after an error the process leaves the store alone 30 s
    assert len(aws.items("HISTORY#")) == len(done)
    region.consumer.health = HealthPublishing(SETTINGS, CountingStore(kvs_client(kvs.url)))
    play(region, clock, eu_down, 1)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]


def test_an_old_mirror_still_serves_while_the_store_cannot_be_read(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 2)
    assert region.kvs.writes == 1
    # The store becomes unreachable and the mirror passes its refresh age: outcomes that
    # need no change are still decided (against the mirror), the failed refresh reported.
    region.consumer.health = HealthPublishing(
        SETTINGS, CountingStore(kvs_client(f"http://127.0.0.1:{free_ports(1)[0]}")))
    clock.now += dt.timedelta(minutes=6)
    done = play(region, clock, eu_down, 1)
    assert all(d.health is None for d in done) and done[0].health_error
    assert all(d.votes is not None for d in done)  # every outcome was decided


def test_an_alert_whose_publish_failed_is_published_by_the_redelivery(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 1)
    sent: list[Alert] = []

    def sns_down(alert: Alert) -> None:
        if alert.kind.startswith("region-"):
            raise RuntimeError("SNS unavailable")
        sent.append(alert)

    region.consumer.publish = sns_down
    records = round_records(clock.now, eu_down)
    failing = None
    for r in records:
        try:
            region.consumer.process(outcome_of(r), "results")
        except RuntimeError:
            failing = r
            break
    assert failing is not None and (published(kvs) or {}).get("avoid") == ["eu-west-1"]
    region.consumer.publish = sent.append
    region.consumer.process(outcome_of(failing), "results")  # SQS delivers the message again
    region.consumer.process(outcome_of(failing), "results")
    assert [a.kind for a in sent if a.kind.startswith("region-")] == ["region-avoided"] and region.kvs.writes == 1
    assert not any(i.get("pendingAlerts") for i in aws.items("HEALTH#"))


def test_a_single_probe_region_is_its_own_quorum(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock, HealthSettings(("eu-west-1",), 1, 2, 2, 180_000))
    for _ in range(2):
        for r in round_records(clock.now, eu_down, probes=("eu-west-1",)):
            region.consumer.process(outcome_of(r), "results")
        clock.now += dt.timedelta(minutes=1)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]


def test_a_damaged_document_is_replaced_by_a_well_formed_one_on_the_next_change(aws, kvs):
    client = kvs_client(kvs.url)
    client.put_key(KvsARN=ARN, Key=REGION_HEALTH_KEY, Value="{oops",
                   IfMatch=client.describe_key_value_store(KvsARN=ARN)["ETag"])
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 2)
    doc = published(kvs)
    assert doc is not None and doc["avoid"] == ["eu-west-1"] and doc["at"].endswith("Z")


def test_the_store_reads_a_missing_key_as_no_value(kvs):
    store = HealthStore(kvs_client(kvs.url), ARN)
    read = store.read()
    assert isinstance(read, Published) and read.value is None and read.etag


# --- the handler's environment ------------------------------------------------------------


def load_handler(monkeypatch: pytest.MonkeyPatch, aws: Aws, env: dict[str, str]) -> ModuleType:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ALERT_TOPIC_ARN", aws.topic_arn)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    sys.modules.pop("functions.results.handler", None)
    return importlib.import_module("functions.results.handler")


@contextlib.contextmanager
def consumer_log() -> Iterator[list[str]]:
    """The consumer's log messages. Powertools loggers are process-wide per service and
    keep the stream of the first import, so they are read from the logger itself, not
    from stdout."""
    lines: list[str] = []
    sink = logging.Handler()
    sink.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("probe-results").addHandler(sink)
    try:
        yield lines
    finally:
        logging.getLogger("probe-results").removeHandler(sink)


def test_the_handler_publishes_with_the_environment_the_component_sets(aws, kvs, monkeypatch, capsys):
    handler = load_handler(monkeypatch, aws, {
        **STORE, "HEALTH_PROBE_REGIONS": ",".join(PROBES), "HEALTH_FAILURE_THRESHOLD": "1",
        "HEALTH_STORE_ENDPOINT_URL": kvs.url, "PROBE_INTERVAL_S": "30",
    })
    health = handler.consumer.health
    assert health is not None and health.settings.quorum == 2 and health.settings.recovery_threshold == 3
    # The windows follow the probe interval: votes 3 rounds, skew 5 rounds (at least 15 minutes).
    assert health.settings.vote_max_age_ms == 90_000
    assert handler.consumer.fresh_ms == 15 * 60_000
    now = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    bodies = [r.json() for r in round_records(now, eu_down)]
    with consumer_log() as lines:
        assert handler.handler(sqs_event(*bodies), Context()) == {"batchItemFailures": []}
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]
    assert [a["kind"] for a in aws.alerts() if a["kind"].startswith("region-")] == ["region-avoided"]
    assert '"RegionHealthChanges"' in capsys.readouterr().out
    assert "region health published" in lines


def test_the_handler_keeps_consuming_when_the_store_is_down_and_says_so(aws, monkeypatch, capsys):
    handler = load_handler(monkeypatch, aws, {
        **STORE, "HEALTH_PROBE_REGIONS": "eu-west-1", "HEALTH_FAILURE_THRESHOLD": "1",
        "HEALTH_STORE_ENDPOINT_URL": f"http://127.0.0.1:{free_ports(1)[0]}",
    })
    now = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    record = failure(event=probe_event("edge", "eu-west-1"), at=now)
    with consumer_log() as lines:
        assert handler.handler(sqs_event(record.json()), Context()) == {"batchItemFailures": []}
    assert len(aws.items("HISTORY#")) == 1
    assert '"RegionHealthPublishErrors"' in capsys.readouterr().out
    assert "region health not published" in lines


def test_without_a_store_arn_health_publishing_is_off(aws, monkeypatch):
    monkeypatch.delenv("HEALTH_STORE_ARN", raising=False)
    assert load_handler(monkeypatch, aws, {}).consumer.health is None


@pytest.mark.parametrize(("env", "message"), [
    ({"HEALTH_STORE_ARN": "arn:aws:s3:::bucket"}, "HEALTH_STORE_ARN='arn:aws:s3:::bucket' is not a CloudFront"),
    ({"HEALTH_STORE_ARN": ARN}, "HEALTH_PROBE_REGIONS='' must list the probe regions"),
    ({"HEALTH_STORE_ARN": ARN, "HEALTH_PROBE_REGIONS": "us-east-1"}, "HEALTH_ORIGIN_REGIONS='' must list the origin"),
    ({**STORE, "HEALTH_PROBE_REGIONS": "us-east-1,eu-west-1", "HEALTH_QUORUM": "3"},
     "HEALTH_QUORUM=3 is more than the 2 probe regions"),
    ({**STORE, "HEALTH_PROBE_REGIONS": "us-east-1,us-east-1"}, "list a region twice"),
    ({**STORE, "HEALTH_PROBE_REGIONS": "us-east-1", "HEALTH_FAILURE_THRESHOLD": "0"},
     "HEALTH_FAILURE_THRESHOLD='0' must be at least 1"),
    ({**STORE, "HEALTH_PROBE_REGIONS": "us-east-1", "HEALTH_QUORUM": "x"},
     "HEALTH_QUORUM='x' must be an integer"),
    ({**STORE, "HEALTH_PROBE_REGIONS": "us-east-1", "HEALTH_STORE_ENDPOINT_URL": "localhost:1"},
     "HEALTH_STORE_ENDPOINT_URL"),
])
def test_bad_health_settings_stop_the_consumer_at_init_naming_the_variable(aws, monkeypatch, env, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(")):
        load_handler(monkeypatch, aws, env)


def test_consumers_on_two_lagging_replicas_publish_each_change_once(aws, kvs):
    # On AWS each probe region's consumer reads its own replica of the global table. Here
    # us-east-1's consumer (probes of us-east-1 and ap-southeast-1) and eu-west-1's (probes
    # of eu-west-1) each have a table, copied to the other only at the end of each round:
    # within a round each decides on the other's streaks of the round before.
    from tests.functions.results.conftest import create_results_table

    # A failure threshold of 1: a replica one round behind still holds the healthy streaks of
    # the round before the failure, which would vote the region straight back up.
    settings = dataclasses.replace(SETTINGS, failure_threshold=1)
    us_ddb = boto3.client("dynamodb", region_name="us-east-1")
    create_results_table(us_ddb)
    clock = Clock()
    eu = region_consumer(aws, kvs, clock, settings)
    us = region_consumer(dataclasses.replace(aws, dynamodb=us_ddb), kvs, clock, settings)

    def replicate() -> None:
        for source, target in ((us_ddb, aws.dynamodb), (aws.dynamodb, us_ddb)):
            for item in source.scan(TableName=TABLE)["Items"]:
                if item["pk"]["S"].startswith("HEALTH#"):
                    target.put_item(TableName=TABLE, Item=item)

    history = []
    healthy: Observe = lambda p, o, t: True  # noqa: E731
    for ok in [healthy] * 2 + [eu_down] * 2 + [healthy] * 3:
        # us-east-1's consumer first: eu-west-1's then decides right after the change
        records = round_records(clock.now, ok, origins=("eu-west-1",))
        for record in sorted(records, key=lambda r: r.probe_region == "eu-west-1"):
            consumer = eu if record.probe_region == "eu-west-1" else us
            consumer.consumer.process(outcome_of(record), "results")
        replicate()
        history.append(tuple((published(kvs) or {"avoid": []})["avoid"]))
        clock.now += dt.timedelta(minutes=1)
    changes = [h for i, h in enumerate(history) if i == 0 or h != history[i - 1]]
    assert changes == [(), ("eu-west-1",), ()]
    assert eu.kvs.writes + us.kvs.writes == 2
    assert sorted(a.kind for a in eu.alerts + us.alerts) == ["region-avoided", "region-restored"]


# --- evidence that cannot be true ----------------------------------------------------------


def test_an_outcome_stamped_in_the_future_does_not_freeze_a_streak_and_a_quorum_restores_the_region(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    play(region, clock, eu_down, 2)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]
    # Two probe regions each deliver one failure stamped a day ahead (a wrong clock, a forged envelope).
    for p in ("us-east-1", "ap-southeast-1"):
        record = failure(event=probe_event("edge", "eu-west-1"), at=clock.now + dt.timedelta(days=1), probe_region=p)
        region.consumer.process(outcome_of(record), "results")
    play(region, clock, lambda p, o, t: True, SETTINGS.recovery_threshold + 1)
    assert (published(kvs) or {}).get("avoid") == []
    assert [a.kind for a in region.alerts] == ["region-avoided", "region-restored"]


def test_a_streak_stored_with_a_future_stamp_gives_its_silent_probe_region_no_vote(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    item = {"pk": health_pk(SERVER, "eu-west-1"), "sk": streak_sk("ap-southeast-1", "edge"), "serverId": SERVER,
            "probeRegion": "ap-southeast-1", "originRegion": "eu-west-1", "target": "edge", "failures": 9,
            "successes": 0, "checkedAtMs": int((START + dt.timedelta(days=1)).timestamp() * 1000),
            "checkedAt": "2026-11-30T10:00:00.000Z", "lastRequestId": "forged", "pendingAlerts": {}, "version": 1}
    assert region.consumer.store.put_versioned(item, None)
    # us-east-1 alone sees eu-west-1 fail; the silent region's day-ahead streak must not make a quorum.
    play(region, clock, lambda p, o, t: not (p == "us-east-1" and o == "eu-west-1"), 3)
    assert (published(kvs) or {}).get("avoid", []) == []


def test_outcomes_for_regions_the_stack_does_not_deploy_are_never_published_and_a_real_failover_is(aws, kvs):
    clock = Clock()
    settings = dataclasses.replace(SETTINGS, origin_regions=ORIGINS)
    region = region_consumer(aws, kvs, clock, settings)
    undeployed = tuple(f"xx-fake{i:02d}-1" for i in range(6))  # any number: voting on one would publish it
    for _ in range(SETTINGS.failure_threshold):
        for record in round_records(clock.now, lambda p, o, t: False, origins=undeployed):
            region.consumer.process(outcome_of(record), "results")
        clock.now += dt.timedelta(minutes=1)
    assert published(kvs) is None and region.kvs.writes == 0
    play(region, clock, eu_down, SETTINGS.failure_threshold)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]


def test_a_change_drops_regions_the_stack_does_not_deploy_from_a_document_written_before(aws, kvs):
    clock = Clock()
    region = region_consumer(aws, kvs, clock, dataclasses.replace(SETTINGS, origin_regions=ORIGINS))
    client = kvs_client(kvs.url)
    etag = client.describe_key_value_store(KvsARN=ARN)["ETag"]
    client.put_key(KvsARN=ARN, Key=REGION_HEALTH_KEY, IfMatch=etag,
                   Value=json.dumps({"v": 1, "avoid": ["xx-gone-1"], "at": "2026-11-29T09:00:00.000Z"}))
    play(region, clock, eu_down, SETTINGS.failure_threshold)
    assert (published(kvs) or {}).get("avoid") == ["eu-west-1"]
