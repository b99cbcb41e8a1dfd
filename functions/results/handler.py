"""Lambda entry point of the results consumer (``results.handler.handler``).

Both queues (OnSuccess results, OnFailure dead letters) feed this handler through
SQS event source mappings with ``ReportBatchItemFailures``. Powertools'
``BatchProcessor`` runs ``record_handler`` per message and reports the ones that
raised, so one bad message never holds back the rest of the batch.

Environment:
    TABLE_NAME           the results table (this region's replica)
    ALERT_TOPIC_ARN      SNS topic for drift, skew, down, recovered and promise-broken alerts
    HISTORY_TTL_DAYS     how long history items live
    PROBE_INTERVAL_S     seconds between probe rounds; skew ignores targets silent for 5 rounds (15 min at
                         least), region health evidence older than 3 rounds (a minute at least)
    ALERT_AFTER_FAILURES consecutive failures before a down alert (default 2)
    ALERT_DEDUP_WINDOW_S one alert per change across probe regions within this window (default 3600)
    DEAD_LETTER_QUEUE_ARN the OnFailure queue (only to flag records that arrive on the wrong queue)
    ALERT_CLAIM_REGION   the results table's home region, where every probe region's consumer claims
                         its alerts (one page per change); unset or this region: the local replica
  Region health (health.py; off when HEALTH_STORE_ARN is unset or empty):
    HEALTH_STORE_ARN          the stack's CloudFront KeyValueStore (arn:aws:cloudfront::ACCOUNT:key-value-store/ID)
    HEALTH_PROBE_REGIONS      comma-separated probe regions whose votes count (required with the store)
    HEALTH_ORIGIN_REGIONS     comma-separated origin regions the stack deploys (required with the store): only
                              they are voted on and published
    HEALTH_QUORUM             probe regions that must agree to avoid or restore a region; 0 or unset: a majority
    HEALTH_FAILURE_THRESHOLD  consecutive failed rounds before a probe region votes a region down (default 2)
    HEALTH_RECOVERY_THRESHOLD consecutive successful rounds before it votes it up again (default 3)
    HEALTH_VOTE_MAX_AGE_S     evidence older than this has no vote (default 3 probe rounds, 60 s at least)
    HEALTH_STORE_REFRESH_S    the table's mirror of the document is read from the store again after this (default 300)
    HEALTH_STORE_ENDPOINT_URL local topology and tests only: send the KeyValueStore API requests there
    POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE   Powertools' own settings
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
from collections.abc import Callable
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from .consumer import Consumer, HealthPublishing, Processed
from .contract import PROBE_INTERVAL_S_DEFAULT, ConsumerEnv, majority
from .envelope import MalformedRecordError, parse_record_body
from .health import HealthSettings, vote_max_age_s
from .kvs import HealthStore, route_to
from .state import Alert, skew_fresh_s
from .store import ResultsStore

# CloudWatch drops EMF data points older than 14 days; older outcomes are timed now.
EMF_MAX_AGE = dt.timedelta(days=13)
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "McpEdge/Probes")
REGION = os.environ.get("AWS_REGION", "unknown")

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "probe-results"))
metrics = Metrics(namespace=NAMESPACE)
metrics.set_default_dimensions(ProbeRegion=REGION)
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

_dynamodb = boto3.client("dynamodb")
_sns = boto3.client("sns")


def _env_int(name: str, default: int, minimum: int = 1) -> int:
    raw = os.environ.get(name) or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise RuntimeError(f"{name}={raw!r} must be an integer") from None
    if value < minimum:
        raise RuntimeError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _env_str(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise RuntimeError(f"{name} is not set: the consumer cannot run without it (set by components/probes.py)")
    return value


def sns_publisher(topic_arn: str) -> Callable[[Alert], None]:
    def publish(alert: Alert) -> None:
        _sns.publish(
            TopicArn=topic_arn,
            Subject=alert.subject,
            Message=alert.message,
            MessageAttributes={
                "alertType": {"DataType": "String", "StringValue": alert.kind},
                "serverId": {"DataType": "String", "StringValue": alert.server_id},
            },
        )

    return publish


_KVS_ARN = re.compile(r"arn:aws[a-z-]*:cloudfront::\d{12}:key-value-store/[A-Za-z0-9_-]+")
_REGION = re.compile(r"[a-z0-9-]{1,32}")


def build_health(interval_s: int) -> HealthPublishing | None:
    """Region health publishing from the environment; None when HEALTH_STORE_ARN is unset."""
    arn = os.environ.get(ConsumerEnv.HEALTH_STORE_ARN, "").strip()
    if not arn:
        return None
    if not _KVS_ARN.fullmatch(arn):
        raise RuntimeError(f"HEALTH_STORE_ARN={arn!r} is not a CloudFront KeyValueStore ARN "
                           "(arn:aws:cloudfront::ACCOUNT:key-value-store/ID)")
    raw_regions = os.environ.get(ConsumerEnv.HEALTH_PROBE_REGIONS, "")
    regions = tuple(r.strip() for r in raw_regions.split(",") if r.strip())
    bad = [r for r in regions if not _REGION.fullmatch(r)]
    if not regions or bad:
        raise RuntimeError(f"HEALTH_PROBE_REGIONS={raw_regions!r} must list the probe regions, comma-separated "
                           "(e.g. us-east-1,eu-west-1), when HEALTH_STORE_ARN is set")
    raw_origins = os.environ.get(ConsumerEnv.HEALTH_ORIGIN_REGIONS, "")
    origins = tuple(r.strip() for r in raw_origins.split(",") if r.strip())
    if not origins or not all(_REGION.fullmatch(r) for r in origins):
        raise RuntimeError(f"HEALTH_ORIGIN_REGIONS={raw_origins!r} must list the origin regions the stack deploys, "
                           "comma-separated (e.g. us-east-1,eu-west-1), when HEALTH_STORE_ARN is set")
    quorum = _env_int(ConsumerEnv.HEALTH_QUORUM, 0, minimum=0) or majority(len(regions))
    if quorum > len(regions):
        raise RuntimeError(f"HEALTH_QUORUM={quorum} is more than the {len(regions)} probe regions of "
                           f"HEALTH_PROBE_REGIONS ({', '.join(regions)}): at most {len(regions)}, or 0 for a majority")
    try:
        settings = HealthSettings(
            probe_regions=regions,
            quorum=quorum,
            failure_threshold=_env_int(ConsumerEnv.HEALTH_FAILURE_THRESHOLD, HealthSettings.failure_threshold),
            recovery_threshold=_env_int(ConsumerEnv.HEALTH_RECOVERY_THRESHOLD, HealthSettings.recovery_threshold),
            vote_max_age_ms=_env_int("HEALTH_VOTE_MAX_AGE_S", vote_max_age_s(interval_s)) * 1000,
            origin_regions=origins,
        )
    except ValueError as exc:
        raise RuntimeError(f"HEALTH_PROBE_REGIONS={raw_regions!r}: {exc}") from None
    # Short timeouts: a slow store must not eat the consumer's whole timeout.
    client = boto3.client("cloudfront-keyvaluestore", config=Config(
        connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 2}))
    endpoint = os.environ.get("HEALTH_STORE_ENDPOINT_URL", "").strip()
    if endpoint:
        try:
            route_to(client, endpoint)
        except ValueError as exc:
            raise RuntimeError(f"HEALTH_STORE_ENDPOINT_URL: {exc}") from None
    refresh_s = _env_int("HEALTH_STORE_REFRESH_S", HealthPublishing.refresh_ms // 1000)
    return HealthPublishing(settings, HealthStore(client, arn), refresh_ms=refresh_s * 1000)


def claims_client() -> Any:
    """The DynamoDB client alert claims go through: the table's home region's, or None
    when this consumer runs there (its own client is the home region's)."""
    name = ConsumerEnv.ALERT_CLAIM_REGION
    home = os.environ.get(name, "").strip()
    if not home or home == REGION:
        return None
    if not _REGION.fullmatch(home):
        raise RuntimeError(f"{name}={home!r} is not an AWS region (the results table's home region, "
                           "set by components/probes.py)")
    return boto3.client("dynamodb", region_name=home)


@functools.cache
def region_client(region: str) -> Any:
    """The client of the results table's copy in ``region`` (made on first use): where that
    probe region's consumer writes its region-health streaks. Short timeouts: a region that
    does not answer costs little, and its replicated streaks count instead."""
    if region == REGION:
        return _dynamodb
    return boto3.client("dynamodb", region_name=region, config=Config(
        connect_timeout=1, read_timeout=2, retries={"mode": "standard", "max_attempts": 2}))


def build_consumer() -> Consumer:
    interval_s = _env_int(ConsumerEnv.PROBE_INTERVAL_S, PROBE_INTERVAL_S_DEFAULT)
    store = ResultsStore(
        _env_str(ConsumerEnv.TABLE_NAME),
        _dynamodb,
        history_ttl_s=_env_int(ConsumerEnv.HISTORY_TTL_DAYS, 30) * 86400,
        dedup_window_s=_env_int("ALERT_DEDUP_WINDOW_S", 3600),
        claims_client=claims_client(),
        region_client=region_client,
    )
    return Consumer(
        store,
        sns_publisher(_env_str(ConsumerEnv.ALERT_TOPIC_ARN)),
        down_after=_env_int("ALERT_AFTER_FAILURES", 2),
        fresh_ms=skew_fresh_s(interval_s) * 1000,
        health=build_health(interval_s),
    )


consumer = build_consumer()


def _queue_name(record: SQSRecord) -> str:
    return record.event_source_arn.rsplit(":", 1)[-1] if record.event_source_arn else "unknown"


def _emit_outcome_metrics(done: Processed) -> None:
    """Per-target metrics, one EMF document per outcome, timed at the probe's time."""
    outcome = done.outcome
    if outcome.target is None:
        return
    target_metrics = EphemeralMetrics(namespace=NAMESPACE)
    if dt.datetime.now(dt.UTC) - outcome.timestamp < EMF_MAX_AGE:
        target_metrics.set_timestamp(outcome.timestamp)  # a backlog is plotted when it happened
    target_metrics.add_dimension("ServerId", outcome.target.server_id)
    target_metrics.add_dimension("ProbeRegion", outcome.probe_region)
    target_metrics.add_dimension("Target", outcome.target.target)
    target_metrics.add_dimension("TargetRegion", outcome.target.target_region)
    target_metrics.add_metric("Availability", MetricUnit.Count, 1 if outcome.succeeded else 0)
    target_metrics.add_metric("Degraded", MetricUnit.Count, 1 if outcome.status == "degraded" else 0)
    if outcome.latency_ms is not None:
        target_metrics.add_metric("Latency", MetricUnit.Milliseconds, outcome.latency_ms)
    if done.drift:
        target_metrics.add_metric("SchemaDrift", MetricUnit.Count, 1)
    target_metrics.add_metadata("requestId", outcome.request_id)
    target_metrics.add_metadata("errorType", outcome.error_type)
    target_metrics.flush_metrics()


def record_handler(record: SQSRecord) -> dict[str, Any]:
    queue = _queue_name(record)
    try:
        outcome = parse_record_body(record.body, REGION)
    except MalformedRecordError as exc:
        metrics.add_metric("MalformedMessages", MetricUnit.Count, 1)
        logger.error("malformed message", extra={"messageId": record.message_id, "queue": queue,
                                                 "reason": str(exc), "body": record.body[:500]})
        raise
    # Both queues feed this handler; the condition decides what a record means, the
    # source queue only tells whether the destinations are wired the right way round.
    dlq_arn = os.environ.get(ConsumerEnv.DEAD_LETTER_QUEUE_ARN)
    if dlq_arn and (record.event_source_arn == dlq_arn) != (outcome.condition != "Success"):
        logger.warning("outcome on an unexpected queue", extra={"queue": queue, "condition": outcome.condition})
    done = consumer.process(outcome, queue)
    # Claimed and emitted with nothing in between: once per outcome, whichever delivery
    # got every step through (a retry after a throttle counts it, a duplicate does not).
    if consumer.count_once(done):
        metrics.add_metric("Outcomes", MetricUnit.Count, 1)
        _emit_outcome_metrics(done)
    else:
        metrics.add_metric("DuplicateOutcomes", MetricUnit.Count, 1)
    if outcome.target is None:
        metrics.add_metric("InvalidProbeEvents", MetricUnit.Count, 1)
        logger.error("probe outcome for an invalid probe event", extra={"requestId": outcome.request_id,
                     "errorType": outcome.error_type, "error": outcome.error_message})
    if done.stale:
        metrics.add_metric("StaleOutcomes", MetricUnit.Count, 1)
    if done.health is not None:
        metrics.add_metric("RegionHealthChanges", MetricUnit.Count, 1)
        assert outcome.target is not None and done.votes is not None
        logger.warning("region health published", extra={"change": done.health, "region": outcome.target.target_region,
                                                         "down": done.votes.down, "up": done.votes.up})
    if done.health_error is not None:
        metrics.add_metric("RegionHealthPublishErrors", MetricUnit.Count, 1)
        logger.error("region health not published", extra={"requestId": outcome.request_id,
                                                            "error": done.health_error})
    if done.owner_read_errors:
        metrics.add_metric("RegionHealthStreakReadErrors", MetricUnit.Count, len(done.owner_read_errors))
        logger.warning("replicated streaks counted instead of their probe regions' own copies",
                       extra={"requestId": outcome.request_id, "errors": done.owner_read_errors})
    for alert in done.published:
        metrics.add_metric("AlertsPublished", MetricUnit.Count, 1)
        logger.info("alert published", extra={"kind": alert.kind, "subject": alert.subject, "dedupKey": alert.dedup_key})
    summary = {
        "requestId": outcome.request_id, "queue": queue, "condition": outcome.condition, "status": outcome.status,
        "target": outcome.target.label if outcome.target else None, "new": done.new, "applied": done.applied,
        "stale": done.stale, "drift": done.drift, "skewed": done.skewed,
        "alerts": [a.kind for a in done.published], "suppressed": [a.kind for a in done.suppressed],
        "health": done.health, "healthError": done.health_error,
    }
    logger.info("probe outcome", extra=summary)
    return summary


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    return dict(response)
