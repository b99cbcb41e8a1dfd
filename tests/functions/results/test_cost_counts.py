"""review.cost prices the results consumer by what it does per probe outcome; these
tests hold those counts to the consumer itself (run against the emulated table)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from functions.results.consumer import Consumer
from functions.results.envelope import parse_record_body
from functions.results.store import ResultsStore
from review import cost
from tests.functions.results.conftest import NOW, REGION, T0, TABLE, Aws, Record, probe_event
from tests.functions.results.test_handler import emf_documents, handler, invoke  # noqa: F401 (handler: the fixture)
from tests.functions.results.test_health_publishing import (  # noqa: F401 (kvs: the fixture)
    PROBES,
    Clock,
    kvs,
    outcome_of,
    region_consumer,
)


def count_calls(client: Any) -> Counter[str]:
    calls: Counter[str] = Counter()
    client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.update([model.name]))
    return calls


def test_a_steady_outcome_costs_what_review_cost_prices(aws: Aws):
    # Given a target that has been probed before (its latest state exists)
    store = ResultsStore(TABLE, aws.dynamodb, history_ttl_s=30 * 86400)
    consumer = Consumer(store, publish=lambda alert: None, clock=NOW.timestamp)
    consumer.process(parse_record_body(Record(at=T0).json(), REGION), "results")
    calls = count_calls(aws.dynamodb)
    transactions: list[int] = []
    aws.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems",
        lambda params, **_: transactions.append(len(params["TransactItems"])))
    # When the next outcome for it arrives, unchanged
    done = consumer.process(parse_record_body(Record(at=T0 + dt.timedelta(minutes=1)).json(), REGION), "results")
    # Then the consumer makes exactly the calls the estimate prices
    assert done.new and done.applied and not done.published
    assert transactions == [cost.TRANSACTION_PUTS_PER_OUTCOME]
    assert calls == Counter({
        "TransactWriteItems": 1,
        "PutItem": cost.PLAIN_PUTS_PER_OUTCOME,
        "GetItem": cost.CONSISTENT_GETS_PER_OUTCOME,
        "Query": 1,
    })


def test_both_transaction_items_expire(aws: Aws):
    store = ResultsStore(TABLE, aws.dynamodb, history_ttl_s=30 * 86400)
    Consumer(store, publish=lambda alert: None, clock=NOW.timestamp).process(parse_record_body(Record(at=T0).json(), REGION), "results")
    transactional = [i for i in aws.items() if i["pk"].startswith(("REQUEST#", "HISTORY#"))]
    assert len(transactional) == cost.EXPIRING_ITEMS_PER_OUTCOME
    assert all("expiresAt" in i for i in transactional)


def metric_series(docs: list[dict[str, Any]]) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """(metric name, dimension values) of every EMF metric: what CloudWatch bills as one metric each."""
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"]:
                key = tuple((d, str(doc[d])) for d in dimensions)
                series.update((m["Name"], key) for m in directive["Metrics"])
    return series


def test_a_probe_region_publishes_the_metrics_review_cost_prices(handler, aws, capsys):  # noqa: F811
    # Given outcomes for two targets from one probe region, each seen twice
    targets = [("origin", "us-east-1"), ("edge", "eu-west-1")]
    for minute in (0, 1):
        bodies = [Record(event=probe_event(kind, region), at=T0 + dt.timedelta(minutes=minute)).json()
                  for kind, region in targets]
        assert invoke(handler, *bodies) == {"batchItemFailures": []}
    # Then the metric series are METRICS_PER_TARGET per target and METRICS_PER_PROBE_REGION more
    series = metric_series(emf_documents(capsys.readouterr().out))
    assert len(series) == cost.METRICS_PER_TARGET * len(targets) + cost.METRICS_PER_PROBE_REGION


def test_a_steady_outcome_with_region_health_costs_what_review_cost_prices(aws: Aws, kvs):  # noqa: F811
    # Given a consumer publishing region health, whose target and streak exist, and whose
    # mirror of the published document is fresh
    clock = Clock()
    region = region_consumer(aws, kvs, clock)
    first = Record(event=probe_event("origin", "us-east-1"), at=clock.now, probe_region=PROBES[0])
    region.consumer.process(outcome_of(first), "results")
    calls = count_calls(aws.dynamodb)
    # When the next outcome for it arrives, unchanged
    clock.now += dt.timedelta(minutes=1)
    later = Record(event=probe_event("origin", "us-east-1"), at=clock.now, probe_region=PROBES[0])
    done = region.consumer.process(outcome_of(later), "results")
    # Then it makes the plain calls plus exactly the health calls the estimate prices,
    # and reads the KeyValueStore not at all
    assert done.new and done.applied and done.health is None
    assert region.kvs.reads == 1 and region.kvs.writes == 0  # the first outcome's read only
    assert calls == Counter({
        "TransactWriteItems": 1,
        "PutItem": cost.PLAIN_PUTS_PER_OUTCOME + cost.HEALTH_PLAIN_PUTS_PER_OUTCOME,
        "GetItem": cost.CONSISTENT_GETS_PER_OUTCOME + cost.HEALTH_CONSISTENT_GETS_PER_OUTCOME,
        "Query": 2,  # the region's latest items, and the origin region's streaks
    })

