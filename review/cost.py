"""What a stack costs per month, from its stack file alone: for code review.

    .venv/bin/python -m review.cost --stack prod               # table by part and region
    .venv/bin/python -m review.cost --stack prod --json        # the same figures as JSON
    .venv/bin/python -m review.cost --stack prod --compare     # origin options side by side, and the
                                                               # ways to name the serving region, priced
    .venv/bin/python -m review.cost --stack prod --write       # refresh plans/prod.cost.txt
    .venv/bin/python -m review.cost --stack prod --check       # exit 1 (with a diff) if stale

It runs the real program under Pulumi mocks (as ``review.plan`` does) and reads what
the stack deploys from the recorded resource graph: every function with its memory and
architecture, provisioned concurrency with its scaling bounds and target, the schedules
and what each one probes, event source mappings, table replicas and their backups,
alarms and the metrics they read, the operations dashboard, CloudFront's additional metrics,
the origins' active tracing, KMS keys, the secrets the probes read, log groups and their
retention, and any CloudFront KeyValueStore. It multiplies that by the list prices in
``review/prices.toml``. Traffic is the one thing a stack file cannot say: it is an
assumption with a flag and a default, and the output marks every assumed figure. The
probes' own traffic is not assumed: it follows from the schedules (one per target: the
edge pinned to every origin region and every origin directly, in every probe region),
so it grows with the square of the region count.

No network and no credentials: the prices are the committed table's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from components.probe_fleet import BATCH_SIZE, PROBE_HANDLER, RESULTS_HANDLER
from components.probe_rounds import EXPRESS_BILLED_MB, Invocation, interval_of, run_definition
from devkit.mock_program import ProgramRun, Resource, run_program
from edge.gate_package import GATE_HANDLER
from edge.regions import AWS_REGIONS
from functions.contract import ConsumerEnv
from review.errors import add_debug_flag, run_reporting_errors
from review.plan import committed_diff, write_or_check
from review.resources import GLOBAL, ResourceTree, placement, plain, snapstart_on
from stack_config.checks import build_stack_config
from stack_config.keys import PROJECT
from stack_config.loading import PROJECT_ROOT, load_from_stack_file, resolve_stack_file, stack_name_of
from stack_config.model import StackConfig

PRICES_FILE = Path(__file__).with_name("prices.toml")
PLANS_DIR = PROJECT_ROOT / "plans"
CURRENCY = "USD"
SAME_EVERYWHERE = "same everywhere"
# A regional price the table lists only for this region applies to the others too
# (and the estimate says which regions were priced that way).
REFERENCE_REGION = "us-east-1"

# AWS bills a month as 730 hours.
HOURS_PER_MONTH = 730
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
MINUTES_PER_MONTH = HOURS_PER_MONTH * 60
# What an execution runs past its last round's offset: the round's asynchronous invokes.
EXPRESS_INVOKE_S = 0.5
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
MB_PER_GB = 1024
KB_PER_GB = 1024 * 1024
STREAMING_FREE_KB = 6 * 1024  # Lambda charges streamed bytes beyond the first 6 MB of a response

# The one part of the bill every table and line falls in (the JSON's "monthly" keys).
PARTS = (
    "provisioned_concurrency",
    "origin_invocations",
    "edge_functions",
    "cloudfront",
    "firewall",
    "probes",
    "results_table",
    "alarms",
    "observability",
    "other",
)

# Component classes of the program (the resource graph's parents), matched by the
# type token's last part so that a package token (mcpedge:index:McpOrigin) and the
# module one (mcpedge:origin:McpOrigin) both count.
ORIGIN_COMPONENT = "McpOrigin"
FLEET_COMPONENT = "ProbeFleet"
EDGE_COMPONENT = "EdgeLayer"

# --- what the handlers do per event (not in the resource graph) --------------------
# These restate handler behaviour the graph cannot show; tests/review/test_cost.py
# checks each against the handler code (the probe's exchange, the consumer's store
# calls and metrics), so a change there fails a test until this follows.
#
# One probe exchange on the 2026-07-28 path: server/discover, then tools/list.
PROBE_REQUESTS_PER_EXCHANGE = 2
# Now and then (functions/probe/probe.py HANDSHAKE_CHECK_INTERVAL_S, per execution environment)
# a target that answered 2026-07-28 is asked the legacy handshake too, to tell a server that is
# stateful there: initialize, tools/list without the session, DELETE of the session.
HANDSHAKE_CHECK_REQUESTS = 3
HANDSHAKE_CHECK_INTERVAL_S = 600
# With every probe, one request the platform must refuse (functions/probe/promise.py): at the
# edge, a forged token, which CloudFront, the viewer function and the edge function handle and
# refuse before any origin; at a Function URL, an unsigned request, which IAM refuses before
# the function runs (not billed).
PROMISE_REQUESTS_PER_EDGE_PROBE = 1
# The results consumer, per probe outcome (functions/results/store.py): one transaction
# of two puts (idempotency marker and history item), one versioned put of the latest
# state, two strongly consistent gets (latest and skew state) and one query of the
# region's latest items. Both transaction items expire by TTL.
TRANSACTION_PUTS_PER_OUTCOME = 2
PLAIN_PUTS_PER_OUTCOME = 1
CONSISTENT_GETS_PER_OUTCOME = 2
EXPIRING_ITEMS_PER_OUTCOME = 2
# With region health on (a KeyValueStore in the stack), each outcome also moves its
# streak (a strongly consistent get and a versioned put of an item that never expires),
# reads the table's mirror of the published document (a strongly consistent get) and
# queries every probe region's streaks for the origin region, two targets each. (In the
# rounds where a change is due, the consumer whose vote would complete it also queries the
# other probe regions' own copies: a few reads per incident, not priced.)
HEALTH_PLAIN_PUTS_PER_OUTCOME = 1
HEALTH_CONSISTENT_GETS_PER_OUTCOME = 2
HEALTH_STREAKS_PER_PROBE_REGION = 2
# Metrics the consumer publishes in embedded metric format: per (probe region, target)
# Availability, Degraded and Latency; per probe region Outcomes.
METRICS_PER_TARGET = 3
METRICS_PER_PROBE_REGION = 1
# The edge function's EMF records (edge/gate/telemetry.py): Requests and GateMilliseconds by
# (ServerId, Decision); Requests alone by (ServerId, Method, Decision) and, for a tool call,
# (ServerId, Tool, Decision), and by (ServerId, Client, Decision); in every region the edge
# function runs in. Method values are MCP's methods (else "other"), Tool values the stack's
# named tools (else "other"), Client values "probe" and "other".
EDGE_METRICS_PER_DECISION = 2
EDGE_METRICS_PER_CALL_DIMENSION = 1
EDGE_CLIENT_VALUES = 2
# CloudFront's additional metrics for a distribution (a monitoring subscription): the 5
# error rates beside 4xx/5xx (401, 403, 404, 502, 503, 504), cache hit rate and origin
# latency, billed as CloudWatch custom metrics (CloudFront developer guide, "Additional
# CloudFront distribution metrics").
CLOUDFRONT_ADDITIONAL_METRICS = 8
# Lambda's active tracing samples with X-Ray's default rule: the first request each second,
# then 5% of the rest (Lambda developer guide, "Visualize Lambda function invocations using
# AWS X-Ray").
XRAY_RESERVOIR_PER_SECOND = 1
XRAY_FIXED_RATE = 0.05
# Lambda's SQS event source mapping keeps long-polling (20 s) an idle queue with five
# pollers, which are billed receives (Lambda developer guide, "Using Lambda with SQS").
ESM_IDLE_POLLERS = 5
SQS_LONG_POLL_S = 20
# SQS requests per delivered message: the destination's SendMessage; the mapping's
# ReceiveMessage and DeleteMessageBatch are per batch.
SQS_REQUESTS_PER_BATCH = 2

# What the JSON reports beside the assumptions (fixed by the handlers and by Lambda).
PER_EVENT = {
    "probe_requests_per_exchange": PROBE_REQUESTS_PER_EXCHANGE,
    "handshake_check_requests": HANDSHAKE_CHECK_REQUESTS,
    "handshake_check_interval_s": HANDSHAKE_CHECK_INTERVAL_S,
    "promise_requests_per_edge_probe": PROMISE_REQUESTS_PER_EDGE_PROBE,
    "consumer_transaction_puts_per_outcome": TRANSACTION_PUTS_PER_OUTCOME,
    "consumer_plain_puts_per_outcome": PLAIN_PUTS_PER_OUTCOME,
    "consumer_consistent_gets_per_outcome": CONSISTENT_GETS_PER_OUTCOME,
    "expiring_items_per_outcome": EXPIRING_ITEMS_PER_OUTCOME,
    "consumer_health_plain_puts_per_outcome": HEALTH_PLAIN_PUTS_PER_OUTCOME,
    "consumer_health_consistent_gets_per_outcome": HEALTH_CONSISTENT_GETS_PER_OUTCOME,
    "metrics_per_target": METRICS_PER_TARGET,
    "metrics_per_probe_region": METRICS_PER_PROBE_REGION,
    "event_source_mapping_idle_pollers": ESM_IDLE_POLLERS,
    "sqs_long_poll_seconds": SQS_LONG_POLL_S,
}

# --- the Fargate Spot option ----------------------------------------------------------
# The rule of thumb it prices: "a single Fargate Spot task at 0.5 vCPU / 1 GB ... handles
# hundreds of concurrent sessions through Node.js async I/O", for less than one
# provisioned Lambda instance.
FARGATE_VCPU = 0.5
FARGATE_MEMORY_GB = 1.0
# The rule of thumb's threshold: Fargate Spot once a region needs this many always-warm instances.
FARGATE_ALWAYS_WARM_THRESHOLD = 2

# --- CloudFront pricing geographies -------------------------------------------------------
# Where a viewer near each AWS region is served from, as the CloudFront pricing page
# groups its edge locations, and which geographies each price class serves from.
GEOGRAPHY_OF_REGION_PREFIX: tuple[tuple[str, str], ...] = (
    ("us-", "north_america"), ("ca-", "north_america"), ("mx-", "north_america"),
    ("eu-", "europe"), ("il-", "europe"),
    ("me-", "middle_east_africa"), ("af-", "middle_east_africa"),
    ("sa-", "south_america"),
    ("ap-northeast-1", "japan"), ("ap-northeast-3", "japan"),
    ("ap-southeast-2", "australia"), ("ap-southeast-4", "australia"), ("ap-southeast-6", "australia"),
    ("ap-south-", "india"),
    ("ap-", "asia"),
)
PRICE_CLASS_GEOGRAPHIES: Mapping[str, frozenset[str]] = {
    "PriceClass_100": frozenset({"north_america", "europe"}),
    "PriceClass_200": frozenset({"north_america", "europe", "middle_east_africa", "japan", "asia", "india"}),
    "PriceClass_All": frozenset({"north_america", "europe", "middle_east_africa", "south_america", "japan",
                                 "australia", "asia", "india"}),
}
# Viewers outside the price class are served from (and billed at) an edge it includes.
OUTSIDE_PRICE_CLASS = "north_america"
CLOUDFRONT_GEOGRAPHIES = PRICE_CLASS_GEOGRAPHIES["PriceClass_All"]
PRICE_REGIONS = frozenset(AWS_REGIONS) | CLOUDFRONT_GEOGRAPHIES | {SAME_EVERYWHERE}


class CostError(ValueError):
    """A stack or price table the estimate cannot price; says what and where."""


def geography(region: str) -> str:
    for prefix, geo in GEOGRAPHY_OF_REGION_PREFIX:
        if region.startswith(prefix):
            return geo
    raise CostError(f"region {region!r} has no CloudFront pricing geography in review/cost.py")


def billed_geography(region: str, price_class: str) -> str:
    """The geography whose CloudFront prices apply to viewers near ``region``."""
    if price_class not in PRICE_CLASS_GEOGRAPHIES:
        raise CostError(f"unknown CloudFront price class {price_class!r} (known: {', '.join(PRICE_CLASS_GEOGRAPHIES)})")
    geo = geography(region)
    return geo if geo in PRICE_CLASS_GEOGRAPHIES[price_class] else OUTSIDE_PRICE_CLASS


# --- the price table --------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    id: str
    usd: float
    per: float
    unit: str
    region: str
    as_of: str
    source: str
    note: str = ""

    @property
    def rate(self) -> float:
        """USD per one unit."""
        return self.usd / self.per


class PriceTable:
    def __init__(self, prices: Iterable[Price]):
        self._by_key: dict[tuple[str, str], Price] = {}
        for price in prices:
            key = (price.id, price.region)
            if key in self._by_key:
                raise CostError(f"review/prices.toml lists {price.id} for {price.region} twice")
            self._by_key[key] = price

    def __iter__(self):
        return iter(sorted(self._by_key.values(), key=lambda p: (p.id, p.region)))

    def lookup(self, price_id: str, region: str | None = None) -> tuple[Price, bool]:
        """(price, exact): the price for ``region``; for a regional price listed only
        for the reference region, that one, with exact False."""
        for key in ((price_id, SAME_EVERYWHERE), (price_id, region or "")):
            if key in self._by_key:
                return self._by_key[key], True
        if (price_id, REFERENCE_REGION) in self._by_key:
            return self._by_key[(price_id, REFERENCE_REGION)], region in (None, REFERENCE_REGION)
        raise CostError(f"review/prices.toml has no price {price_id!r} for {region or 'any region'}")

    def rate(self, price_id: str, region: str | None = None) -> float:
        return self.lookup(price_id, region)[0].rate


_PRICE_FIELDS = {f.name for f in dataclasses.fields(Price)}
_REQUIRED_PRICE_FIELDS = _PRICE_FIELDS - {"note"}


def load_prices(path: Path = PRICES_FILE) -> PriceTable:
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CostError(f"price table {path} cannot be read: {exc}") from None
    prices = []
    for i, entry in enumerate(doc.get("price", [])):
        where = f"{path.name} price #{i + 1} ({entry.get('id', '?')})"
        missing = sorted(_REQUIRED_PRICE_FIELDS - set(entry))
        unknown = sorted(set(entry) - _PRICE_FIELDS)
        if missing or unknown:
            raise CostError(f"{where}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        if not isinstance(entry["usd"], (int, float)) or entry["usd"] < 0:
            raise CostError(f"{where}: usd = {entry['usd']!r} must be a number >= 0")
        if not isinstance(entry["per"], (int, float)) or entry["per"] <= 0:
            raise CostError(f"{where}: per = {entry['per']!r} must be a number > 0")
        try:
            date.fromisoformat(str(entry["as_of"]))
        except ValueError:
            raise CostError(f"{where}: as_of = {entry['as_of']!r} must be a date, YYYY-MM-DD") from None
        if entry["region"] not in PRICE_REGIONS:
            raise CostError(f"{where}: region = {entry['region']!r} must be an AWS region, a CloudFront pricing "
                            f"geography ({', '.join(sorted(CLOUDFRONT_GEOGRAPHIES))}) or {SAME_EVERYWHERE!r}")
        if not str(entry["source"]).startswith("https://aws.amazon.com/"):
            raise CostError(f"{where}: source = {entry['source']!r} must be an AWS pricing page (https://aws.amazon.com/...)")
        prices.append(Price(**{**entry, "as_of": str(entry["as_of"]), "usd": float(entry["usd"]),
                               "per": float(entry["per"])}))
    return PriceTable(prices)


# --- what the stack deploys, from the resource graph ---------------------------------------


@dataclass(frozen=True)
class Function:
    region: str
    memory_mb: int
    architecture: str  # arm64 | x86_64


@dataclass(frozen=True)
class Origin:
    region: str
    function: Function
    provisioned_min: int  # 0: no provisioned concurrency
    provisioned_max: int
    utilization_target: float
    snapstart: bool = False  # SnapStart on published versions (originColdStart snapstart)
    image: bool = False  # a container image from ECR (mcp-edge:server image or imageDigest)
    tracing: bool = False  # Lambda active tracing (originTracing)


@dataclass(frozen=True)
class Schedule:
    """One target's probes: an asynchronous invocation every ``interval_s`` (a round)."""

    target: str  # edge | origin
    target_region: str
    interval_s: int

    @property
    def invocations_per_month(self) -> float:
        return SECONDS_PER_MONTH / self.interval_s


@dataclass(frozen=True)
class Rounds:
    """A fleet's rounds workflow (Step Functions Express): started once a minute by its schedule,
    running until its last round's invocations are made."""

    interval_s: int
    last_offset_s: int

    @property
    def executions_per_month(self) -> float:
        return MINUTES_PER_MONTH

    @property
    def billed_seconds(self) -> float:
        """An execution's billed duration: to its last round's offset plus the invokes, in 100 ms steps."""
        return math.ceil((self.last_offset_s + EXPRESS_INVOKE_S) * 10) / 10


@dataclass(frozen=True)
class Fleet:
    region: str
    probe: Function
    consumer: Function
    schedules: tuple[Schedule, ...]
    event_source_mappings: int
    health_probe_regions: int = 0  # probe regions whose votes the consumer counts; 0: region health off
    rounds: Rounds | None = None

    @property
    def invocations_per_month(self) -> float:
        return sum(s.invocations_per_month for s in self.schedules)


@dataclass(frozen=True)
class Table:
    regions: tuple[str, ...]  # home region first, then the replicas
    pitr_regions: tuple[str, ...]


@dataclass(frozen=True)
class WebAcl:
    """An AWS WAF web ACL in front of the distribution: it inspects every edge request."""

    name: str
    rules: int  # each rule, managed rule groups included, is billed a month
    body_inspection_kb: int  # over 16 KB WAF bills each request once more per 16 KB


@dataclass(frozen=True)
class StackFacts:
    """Everything the estimate reads from a stack (from one mock run)."""

    stack: str
    origins: tuple[Origin, ...]
    router: Function
    viewer_functions: int  # CloudFront Functions (each runs on every viewer request)
    key_value_stores: int  # CloudFront KeyValueStores (one read per viewer request)
    price_class: str
    fleets: tuple[Fleet, ...]
    table: Table | None
    history_ttl_days: int
    log_retention_days: Mapping[str, int]  # region -> the longest retention of its log groups
    alarms: Mapping[str, int]
    kms_keys: Mapping[str, int]
    secrets: Mapping[str, int]
    queues: Mapping[str, int]
    web_acls: tuple[WebAcl, ...] = ()
    alarm_metrics: Mapping[str, int] = field(default_factory=dict)  # region -> metrics the alarms read (billed each)
    dashboards: Mapping[str, int] = field(default_factory=dict)
    cloudfront_metric_subscriptions: int = 0  # distributions with CloudFront's additional metrics on

    @property
    def origin_regions(self) -> tuple[str, ...]:
        return tuple(o.region for o in self.origins)

    @property
    def probe_invocations_per_month(self) -> float:
        return sum(f.invocations_per_month for f in self.fleets)


def _region(resource: Resource, stack: str) -> str:
    return placement(resource, stack)[0]


def _function(resource: Resource, stack: str) -> Function:
    architectures = plain(resource.inputs.get("architectures")) or ["x86_64"]
    return Function(_region(resource, stack), int(plain(resource.inputs.get("memorySize") or 128)), architectures[0])


def probe_rounds(run: ProgramRun, schedule: Resource) -> tuple[Rounds, list[Invocation]]:
    """A fleet's rounds and one round's invocations: its schedule's target, the rounds workflow,
    executed from its definition (never read back from a setting)."""
    target = plain(schedule.inputs["target"])
    try:
        machine = run.find("aws:sfn/stateMachine:StateMachine", "arn", target["arn"])
        definition = json.loads(str(plain(machine.inputs["definition"])))
        invocations = run_definition(definition, json.loads(target.get("input") or "{}"))
        interval = interval_of(definition)
    except (AssertionError, ValueError, KeyError, TypeError) as exc:
        raise CostError(f"stack {run.stack}: schedule {schedule.name} does not start a probe rounds workflow that "
                        f"runs ({exc}): cannot count the probes' runs") from None
    first = min(i.at_s for i in invocations)
    return Rounds(interval, max(i.at_s for i in invocations)), [i for i in invocations if i.at_s == first]


def _count_by_region(run: ProgramRun, typ: str) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for resource in run.of_type(typ):
        counts[_region(resource, run.stack)] += 1
    return dict(sorted(counts.items()))


_SECRET_ARN = re.compile(r"arn:aws:secretsmanager:([a-z0-9-]+):\d+:secret:(.+)")


def _alarm_metrics(run: ProgramRun) -> dict[str, int]:
    """Metrics the alarms read, by region: CloudWatch bills an alarm per metric it reads, so a
    metric-math alarm counts each metric of its expression."""
    counts: dict[str, int] = defaultdict(int)
    for alarm in run.of_type("aws:cloudwatch/metricAlarm:MetricAlarm"):
        queries = plain(alarm.inputs.get("metricQueries")) or []
        counts[_region(alarm, run.stack)] += sum(1 for q in queries if q.get("metric")) if queries else 1
    return dict(sorted(counts.items()))


def _secrets_read(run: ProgramRun) -> dict[str, int]:
    """Secrets the stack creates, plus those its roles may read (created outside the
    stack, like the probes' client secret), by region."""
    found: set[tuple[str, str]] = {
        (_region(r, run.stack), str(plain(r.inputs.get("name")) or r.name))
        for r in run.of_type("aws:secretsmanager/secret:Secret")
    }
    for policy in run.of_type("aws:iam/rolePolicy:RolePolicy"):
        try:
            document = json.loads(str(plain(policy.inputs.get("policy")) or "{}"))
        except ValueError:
            continue
        for statement in document.get("Statement", []):
            actions = statement.get("Action", [])
            actions = [actions] if isinstance(actions, str) else actions
            if "secretsmanager:GetSecretValue" not in actions:
                continue
            resources = statement.get("Resource", [])
            for arn in [resources] if isinstance(resources, str) else resources:
                match = _SECRET_ARN.fullmatch(arn)
                if match:
                    # A secret's ARN ends in "-" and 6 random characters (a policy may say "-??????").
                    found.add((match.group(1), re.sub(r"-(\?{6}|[A-Za-z0-9]{6})$", "", match.group(2))))
    counts: dict[str, int] = defaultdict(int)
    for region, _ in found:
        counts[region] += 1
    return dict(sorted(counts.items()))


def config_of(run: ProgramRun) -> StackConfig:
    """The stack config the run was given (the stack file with any overrides)."""
    return build_stack_config(lambda name: run.config.get(f"{PROJECT}:{name}"), run.stack)


def facts_from_run(run: ProgramRun) -> StackFacts:
    stack = run.stack
    tree = ResourceTree(run)
    config = config_of(run)

    def within(resource: Resource) -> set[str]:
        return {c.type.rsplit(":", 1)[-1] for c in tree.components(resource)}

    def one_per_region(typ: str) -> dict[str, Resource]:
        return {_region(r, stack): r for r in run.of_type(typ)}

    provisioned = one_per_region("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")
    scaling_targets = one_per_region("aws:appautoscaling/target:Target")
    scaling_policies = one_per_region("aws:appautoscaling/policy:Policy")
    origins: list[Origin] = []
    probes: dict[str, Function] = {}
    consumers: dict[str, Function] = {}
    health_regions: dict[str, int] = {}
    routers: list[Function] = []
    for fn in run.of_type("aws:lambda/function:Function"):
        components, handler, function = within(fn), plain(fn.inputs.get("handler")), _function(fn, stack)
        if ORIGIN_COMPONENT in components:
            region = function.region
            minimum = int(plain(provisioned[region].inputs["provisionedConcurrentExecutions"])) if region in provisioned else 0
            maximum = int(plain(scaling_targets[region].inputs["maxCapacity"])) if region in scaling_targets else minimum
            target = 1.0
            if region in scaling_policies:
                target = float(plain(scaling_policies[region].inputs["targetTrackingScalingPolicyConfiguration"])["targetValue"])
            snapstart = snapstart_on(fn)
            image = plain(fn.inputs.get("packageType")) == "Image"
            tracing = (plain(fn.inputs.get("tracingConfig")) or {}).get("mode") == "Active"
            origins.append(Origin(region, function, minimum, maximum, target, snapstart, image, tracing))
        elif FLEET_COMPONENT in components and handler == PROBE_HANDLER:
            probes[function.region] = function
        elif FLEET_COMPONENT in components and handler == RESULTS_HANDLER:
            consumers[function.region] = function
            variables = (plain(fn.inputs.get("environment")) or {}).get("variables") or {}
            voters = str(plain(variables.get(ConsumerEnv.HEALTH_PROBE_REGIONS)) or "")
            health_regions[function.region] = len([r for r in voters.split(",") if r.strip()])
        elif EDGE_COMPONENT in components and handler == GATE_HANDLER:
            routers.append(function)
    if len(routers) != 1:
        raise CostError(f"stack {stack}: expected one Lambda@Edge router, found {len(routers)}")
    if set(probes) != set(consumers):
        raise CostError(f"stack {stack}: probe functions in {sorted(probes)} but results consumers in {sorted(consumers)}")

    schedules: dict[str, list[Schedule]] = defaultdict(list)
    rounds: dict[str, Rounds] = {}
    for schedule in run.of_type("aws:scheduler/schedule:Schedule"):
        if plain(schedule.inputs.get("state")) == "DISABLED":
            continue
        region = _region(schedule, stack)
        rounds[region], invocations = probe_rounds(run, schedule)
        schedules[region].extend(Schedule(i.payload["target"], i.payload["targetRegion"], rounds[region].interval_s)
                                 for i in invocations)
    mappings = _count_by_region(run, "aws:lambda/eventSourceMapping:EventSourceMapping")
    fleets = tuple(
        Fleet(region, probes[region], consumers[region],
              tuple(sorted(schedules.get(region, []), key=lambda s: (s.target, s.target_region))),
              mappings.get(region, 0), health_regions.get(region, 0), rounds.get(region))
        for region in sorted(probes)
    )

    table = None
    tables = run.of_type("aws:dynamodb/table:Table")
    if len(tables) > 1:
        raise CostError(f"stack {stack}: expected at most one results table, found {len(tables)}")
    if tables:
        inputs = plain(tables[0].inputs)
        if inputs.get("billingMode") != "PAY_PER_REQUEST":
            raise CostError(f"table {tables[0].name}: billing mode {inputs.get('billingMode')!r}; the estimate prices on-demand only")
        home = _region(tables[0], stack)
        replicas = inputs.get("replicas") or []
        pitr = [home] if (inputs.get("pointInTimeRecovery") or {}).get("enabled") else []
        pitr += [r["regionName"] for r in replicas if r.get("pointInTimeRecovery")]
        table = Table((home, *(r["regionName"] for r in replicas)), tuple(pitr))

    retention: dict[str, int] = {}
    for group in run.of_type("aws:cloudwatch/logGroup:LogGroup"):
        region = _region(group, stack)
        days = int(plain(group.inputs.get("retentionInDays")) or 0) or 3653  # 0: never expire; price as ten years
        retention[region] = max(retention.get(region, 0), days)

    distribution = run.one("aws:cloudfront/distribution:Distribution")
    web_acls = []
    for acl in run.of_type("aws:wafv2/webAcl:WebAcl"):
        inputs = plain(acl.inputs)
        bodies = (inputs.get("associationConfig") or {}).get("requestBodies") or [{}]
        limit = str((bodies[0].get("cloudfront") or {}).get("defaultSizeInspectionLimit") or "KB_16")
        web_acls.append(WebAcl(str(inputs.get("name") or acl.name), len(inputs.get("rules") or []),
                               int(limit.removeprefix("KB_"))))
    return StackFacts(
        stack=stack,
        origins=tuple(sorted(origins, key=lambda o: o.region)),
        router=routers[0],
        viewer_functions=len(run.of_type("aws:cloudfront/function:Function")),
        key_value_stores=len(run.of_type("aws:cloudfront/keyValueStore:KeyValueStore")),
        price_class=str(plain(distribution.inputs.get("priceClass")) or "PriceClass_All"),
        fleets=fleets,
        table=table,
        history_ttl_days=config.probes.history_ttl_days,
        log_retention_days=dict(sorted(retention.items())),
        alarms=_count_by_region(run, "aws:cloudwatch/metricAlarm:MetricAlarm"),
        kms_keys=_count_by_region(run, "aws:kms/key:Key"),
        secrets=_secrets_read(run),
        queues=_count_by_region(run, "aws:sqs/queue:Queue"),
        web_acls=tuple(web_acls),
        alarm_metrics=_alarm_metrics(run),
        dashboards=_count_by_region(run, "aws:cloudwatch/dashboard:Dashboard"),
        cloudfront_metric_subscriptions=len(run.of_type(
            "aws:cloudfront/monitoringSubscription:MonitoringSubscription")),
    )


# --- the assumptions ---------------------------------------------------------------------


def _assumption(default: float, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Traffic:
    """What the stack file cannot say. Every field is a flag of the command."""

    requests_per_month: float = _assumption(1_000_000, "MCP requests from clients a month, over all regions (split evenly between the origin regions)")
    mean_duration_ms: float = _assumption(200, "mean origin duration of a non-streaming request, ms")
    response_kb: float = _assumption(8, "mean response size, KB")
    streaming_share: float = _assumption(0.1, "share of requests answered as an SSE stream (progress, long tools), 0-1")
    streaming_duration_ms: float = _assumption(5_000, "mean origin duration of a streaming request, ms")
    probe_duration_ms: float = _assumption(1_000, "mean duration of one probe invocation, ms")
    probe_origin_duration_ms: float = _assumption(50, "origin duration of one probe request (discover, tools/list), ms")
    router_duration_ms: float = _assumption(2, "Lambda@Edge router duration per request, ms")
    consumer_duration_ms: float = _assumption(150, "results consumer duration per batch, ms")
    consumer_batch: float = _assumption(1, f"probe outcomes per consumer batch, 1-{BATCH_SIZE} (1: every outcome alone, an upper bound)")
    log_kb_per_invocation: float = _assumption(1, "CloudWatch Logs written per function invocation, KB")
    item_kb: float = _assumption(1, "size of one results-table item, KB")
    cold_start_share: float = _assumption(0.01, "share of origin invocations that start an execution environment (SnapStart restores, --compare)")
    edge_decisions_seen: float = _assumption(2, "distinct edge decisions (allowed, 401, 403_scope, ...) an hour, each a metric per dimension set")
    mcp_methods_seen: float = _assumption(5, "distinct MCP methods clients call an hour (initialize, tools/list, tools/call, ...)")
    tools_called: float = _assumption(3, "distinct Tool values in the edge's metrics an hour: the tools the stack "
                                         "names (toolScopes, wafToolLimits) that are called, plus 'other'")

    def __post_init__(self) -> None:
        problems = [f"--{flag_name(f.name)} = {getattr(self, f.name)!r} must be a finite number >= 0"
                    for f in dataclasses.fields(self)
                    if not (math.isfinite(getattr(self, f.name)) and getattr(self, f.name) >= 0)]
        for name in ("streaming_share", "cold_start_share"):
            if not getattr(self, name) <= 1:
                problems.append(f"--{flag_name(name)} = {getattr(self, name)!r} must be between 0 and 1")
        if not 1 <= self.consumer_batch <= BATCH_SIZE:
            problems.append(f"--consumer-batch = {self.consumer_batch!r} must be between 1 and {BATCH_SIZE} (the mapping's batch size)")
        if problems:
            raise CostError("; ".join(problems))

    @property
    def origin_seconds_per_request(self) -> float:
        s = self.streaming_share
        return ((1 - s) * self.mean_duration_ms + s * self.streaming_duration_ms) / 1000


def flag_name(field_name: str) -> str:
    return field_name.replace("_", "-")


# --- the estimate ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    part: str
    item: str
    region: str  # an AWS region, a CloudFront geography, or "global"
    quantity: float
    unit: str
    usd: float
    price_ids: tuple[str, ...]


@dataclass
class Estimate:
    facts: StackFacts
    traffic: Traffic
    lines: list[Line]
    derived: dict[str, Any]
    reference_priced: dict[str, set[str]]  # region -> price ids taken from the reference region

    @property
    def monthly(self) -> dict[str, float]:
        totals = dict.fromkeys(PARTS, 0.0)
        for line in self.lines:
            totals[line.part] += line.usd
        return totals

    @property
    def total(self) -> float:
        return sum(self.monthly.values())

    def part(self, name: str, region: str | None = None) -> float:
        return sum(line.usd for line in self.lines if line.part == name and (region is None or line.region == region))

    def item(self, prefix: str) -> float:
        return sum(line.usd for line in self.lines if line.item.startswith(prefix))


class _Pricer:
    """Collects lines, remembering which regions a reference-region price stood in for."""

    def __init__(self, prices: PriceTable):
        self.prices = prices
        self.lines: list[Line] = []
        self.reference_priced: dict[str, set[str]] = defaultdict(set)

    def rate(self, price_id: str, region: str) -> float:
        price, exact = self.prices.lookup(price_id, region)
        if not exact:
            self.reference_priced[region].add(price_id)
        return price.rate

    def add(self, part: str, item: str, region: str, quantity: float, unit: str, price_id: str,
            price_region: str | None = None) -> None:
        if quantity == 0:
            return  # nothing to bill: no line (a zero line would only pad the table)
        usd = quantity * self.rate(price_id, price_region or region)
        self.lines.append(Line(part, item, region, quantity, unit, usd, (price_id,)))


def gb_seconds(seconds: float, memory_mb: int) -> float:
    return seconds * memory_mb / MB_PER_GB


def provisioned_instances(origin: Origin, busy_seconds: float) -> int:
    """Instances auto scaling keeps: enough for the mean concurrency at the utilization
    target, within [minimum, maximum]; 0 without provisioned concurrency."""
    if origin.provisioned_min <= 0:
        return 0
    needed = math.ceil(busy_seconds / SECONDS_PER_MONTH / origin.utilization_target)
    return max(origin.provisioned_min, min(origin.provisioned_max, needed))


def probe_requests_to(facts: StackFacts, origin_region: str) -> tuple[float, float]:
    """(requests through the edge, requests direct) a month that the probes send to one origin."""
    edge = direct = 0.0
    for fleet in facts.fleets:
        for schedule in fleet.schedules:
            if schedule.target_region != origin_region:
                continue
            requests = schedule.invocations_per_month * PROBE_REQUESTS_PER_EXCHANGE + handshake_checks_per_month()
            if schedule.target == "edge":
                edge += requests
            else:
                direct += requests
    return edge, direct


def handshake_checks_per_month() -> float:
    """Requests a month of one target's handshake checks, for one probe execution environment
    per probe region (each further warm environment checks on its own: a few more)."""
    return SECONDS_PER_MONTH / HANDSHAKE_CHECK_INTERVAL_S * HANDSHAKE_CHECK_REQUESTS


def viewer_requests_per_origin(facts: StackFacts, traffic: Traffic) -> float:
    return traffic.requests_per_month / len(facts.origins) if facts.origins else 0.0


def origin_load(facts: StackFacts, traffic: Traffic, region: str) -> tuple[float, float, float]:
    """(requests, of which from probes, busy seconds) a month of one origin."""
    viewers = viewer_requests_per_origin(facts, traffic)
    probes = sum(probe_requests_to(facts, region))
    busy = viewers * traffic.origin_seconds_per_request + probes * traffic.probe_origin_duration_ms / 1000
    return viewers + probes, probes, busy


def estimate(facts: StackFacts, traffic: Traffic, prices: PriceTable) -> Estimate:
    p = _Pricer(prices)
    regions = facts.origin_regions
    viewer_requests = viewer_requests_per_origin(facts, traffic)
    derived: dict[str, Any] = {}

    # --- origins: provisioned concurrency and invocations ----------------------------
    origin_requests: dict[str, float] = {}
    for origin in facts.origins:
        region, fn = origin.region, origin.function
        requests, probe_requests, busy = origin_load(facts, traffic, region)
        origin_requests[region] = requests
        instances = provisioned_instances(origin, busy)
        derived.setdefault("origins", {})[region] = {
            "memory_mb": fn.memory_mb, "architecture": fn.architecture, "provisioned_min": origin.provisioned_min,
            "provisioned_max": origin.provisioned_max, "provisioned_instances": instances,
            "requests": round(requests), "probe_requests": round(probe_requests),
            "mean_concurrency": round(busy / SECONDS_PER_MONTH, 4),
        }
        if instances:
            p.add("provisioned_concurrency", f"provisioned instances ({instances} x {fn.memory_mb} MB {fn.architecture}, {HOURS_PER_MONTH} h)",
                  region, gb_seconds(instances * SECONDS_PER_MONTH, fn.memory_mb), "GB-s", f"lambda.provisioned.{fn.architecture}")
        p.add("origin_invocations", "requests (clients and probes)", region, requests, "requests", "lambda.requests")
        capacity = instances * SECONDS_PER_MONTH  # busy seconds the provisioned instances can serve
        on_provisioned = min(busy, capacity)
        if on_provisioned:
            p.add("origin_invocations", "duration on provisioned instances", region,
                  gb_seconds(on_provisioned, fn.memory_mb), "GB-s", f"lambda.provisioned_duration.{fn.architecture}")
        p.add("origin_invocations", "duration on demand" + (" (spillover)" if instances else ""), region,
              gb_seconds(busy - on_provisioned, fn.memory_mb), "GB-s", f"lambda.duration.{fn.architecture}")
        if origin.snapstart:
            # The snapshot cache (the live version's, around the clock) and one restore per
            # new environment (the cold-start share of the requests).
            p.add("origin_invocations", f"SnapStart snapshot cache ({fn.memory_mb} MB, {HOURS_PER_MONTH} h)", region,
                  gb_seconds(SECONDS_PER_MONTH, fn.memory_mb), "GB-s", "lambda.snapstart_cache")
            p.add("origin_invocations", f"SnapStart restores ({traffic.cold_start_share:g} of the requests)", region,
                  requests * traffic.cold_start_share * fn.memory_mb / MB_PER_GB, "GB", "lambda.snapstart_restore")
        streamed_gb = viewer_requests * traffic.streaming_share * max(0.0, traffic.response_kb - STREAMING_FREE_KB) / KB_PER_GB
        p.add("origin_invocations", "streamed bytes beyond 6 MB a response", region, streamed_gb, "GB", "lambda.streamed_bytes")

    # --- the edge: every viewer request, the probes' edge requests too ---------------
    edge_requests_by_geo: dict[str, float] = defaultdict(float)
    for region in regions:
        edge_requests_by_geo[billed_geography(region, facts.price_class)] += viewer_requests
    for fleet in facts.fleets:
        edge_probe_requests = sum(s.invocations_per_month * (PROBE_REQUESTS_PER_EXCHANGE + PROMISE_REQUESTS_PER_EDGE_PROBE)
                                  + handshake_checks_per_month() for s in fleet.schedules if s.target == "edge")
        edge_requests_by_geo[billed_geography(fleet.region, facts.price_class)] += edge_probe_requests
    edge_requests = sum(edge_requests_by_geo.values())
    derived["edge_requests"] = round(edge_requests)
    for n in range(facts.viewer_functions):
        p.add("edge_functions", "CloudFront Function invocations (viewer-request)" + (f" #{n + 1}" if n else ""),
              GLOBAL, edge_requests, "invocations", "cloudfront.function_invocations")
    if facts.key_value_stores:
        p.add("edge_functions", "KeyValueStore reads (one per viewer request)", GLOBAL,
              edge_requests, "reads", "cloudfront.kvs_reads")
    p.add("edge_functions", "Lambda@Edge router requests", GLOBAL, edge_requests, "requests", "lambda_edge.requests")
    p.add("edge_functions", f"Lambda@Edge router duration ({facts.router.memory_mb} MB)", GLOBAL,
          gb_seconds(edge_requests * traffic.router_duration_ms / 1000, facts.router.memory_mb), "GB-s",
          "lambda_edge.duration")
    for geo, requests in sorted(edge_requests_by_geo.items()):
        p.add("cloudfront", "HTTPS requests", geo, requests, "requests", "cloudfront.https_requests")
        p.add("cloudfront", "data transfer out", geo, requests * traffic.response_kb / KB_PER_GB, "GB",
              "cloudfront.data_out")

    # --- the web ACL: a monthly fee, one per rule, and every edge request inspected ----
    for acl in facts.web_acls:
        p.add("firewall", f"WAF web ACL ({acl.name})", GLOBAL, 1, "web ACLs", "waf.web_acl")
        p.add("firewall", "WAF rules (rate limits and managed rule groups)", GLOBAL, acl.rules, "rules", "waf.rule")
        p.add("firewall", "WAF requests inspected (every edge request)", GLOBAL, edge_requests, "requests",
              "waf.requests")
        extra = max(0, math.ceil(acl.body_inspection_kb / 16) - 1)
        p.add("firewall", f"WAF body inspection beyond 16 KB ({acl.body_inspection_kb} KB)", GLOBAL,
              edge_requests * extra, "requests x 16 KB", "waf.body_inspection_extra")

    # --- the probes -------------------------------------------------------------------
    derived["probe_regions"] = len(facts.fleets)
    derived["probe_targets_per_region"] = {f.region: len(f.schedules) for f in facts.fleets}
    derived["probe_invocations"] = round(facts.probe_invocations_per_month)
    for fleet in facts.fleets:
        region, invocations = fleet.region, fleet.invocations_per_month
        batches = invocations / traffic.consumer_batch
        if fleet.rounds is not None:
            # One schedule a minute starts one Express execution, which invokes every target each round.
            executions = fleet.rounds.executions_per_month
            p.add("probes", "rounds schedule (one start a minute)", region, executions, "invocations",
                  "scheduler.invocations")
            p.add("probes", f"rounds workflow starts (Express, rounds every {fleet.rounds.interval_s} s)",
                  region, executions, "requests", "stepfunctions.express.requests")
            p.add("probes", f"rounds workflow duration ({fleet.rounds.billed_seconds:g} s at {EXPRESS_BILLED_MB} MB)",
                  region, gb_seconds(executions * fleet.rounds.billed_seconds, EXPRESS_BILLED_MB), "GB-s",
                  "stepfunctions.express.duration")
        p.add("probes", "probe requests", region, invocations, "requests", "lambda.requests")
        p.add("probes", f"probe duration ({fleet.probe.memory_mb} MB {fleet.probe.architecture})", region,
              gb_seconds(invocations * traffic.probe_duration_ms / 1000, fleet.probe.memory_mb), "GB-s",
              f"lambda.duration.{fleet.probe.architecture}")
        p.add("probes", "queue requests (destination send, receive and delete)", region,
              invocations + batches * SQS_REQUESTS_PER_BATCH, "requests", "sqs.requests")
        idle_receives = fleet.event_source_mappings * ESM_IDLE_POLLERS * SECONDS_PER_MONTH / SQS_LONG_POLL_S
        p.add("probes", f"queue polling ({fleet.event_source_mappings} mappings x {ESM_IDLE_POLLERS} pollers)", region,
              idle_receives, "requests", "sqs.requests")
        p.add("probes", "consumer requests", region, batches, "requests", "lambda.requests")
        p.add("probes", f"consumer duration ({fleet.consumer.memory_mb} MB {fleet.consumer.architecture})", region,
              gb_seconds(batches * traffic.consumer_duration_ms / 1000, fleet.consumer.memory_mb), "GB-s",
              f"lambda.duration.{fleet.consumer.architecture}")
        p.add("probes", "consumer metrics (per target and region)", region,
              METRICS_PER_TARGET * len(fleet.schedules) + METRICS_PER_PROBE_REGION, "metrics",
              "cloudwatch.custom_metric")

    # --- the results table: every write lands in every replica ------------------------
    if facts.table and facts.fleets:
        replicas = facts.table.regions
        units_per_item = math.ceil(traffic.item_kb)
        derived["table_replicas"] = list(replicas)
        written: dict[str, float] = defaultdict(float)  # region -> write units billed there
        for fleet in facts.fleets:
            outcomes = fleet.invocations_per_month
            plain_puts = PLAIN_PUTS_PER_OUTCOME + (HEALTH_PLAIN_PUTS_PER_OUTCOME if fleet.health_probe_regions else 0)
            # Items one outcome writes (each replicated to every other replica).
            items_per_outcome = TRANSACTION_PUTS_PER_OUTCOME + plain_puts
            # The consumer writes to its own region's replica: transactional puts are two units.
            written[fleet.region] += outcomes * units_per_item * (2 * TRANSACTION_PUTS_PER_OUTCOME + plain_puts)
            for replica in replicas:
                if replica != fleet.region:
                    # Each other replica is billed for the replicated write, and later for
                    # the replicated TTL delete of each expiring item (free only where it expires).
                    written[replica] += outcomes * units_per_item * (
                        items_per_outcome + EXPIRING_ITEMS_PER_OUTCOME)
            reads = CONSISTENT_GETS_PER_OUTCOME + math.ceil(len(fleet.schedules) * traffic.item_kb / 4)
            p.add("results_table", "reads (latest and skew state)", fleet.region, outcomes * reads, "read units",
                  "dynamodb.read_units")
            if fleet.health_probe_regions:
                streaks = fleet.health_probe_regions * HEALTH_STREAKS_PER_PROBE_REGION
                health_reads = HEALTH_CONSISTENT_GETS_PER_OUTCOME + math.ceil(streaks * traffic.item_kb / 4)
                p.add("results_table", "reads (region health: streaks, document)", fleet.region,
                      outcomes * health_reads, "read units", "dynamodb.read_units")
            replicated_gb = outcomes * items_per_outcome * traffic.item_kb * (len(replicas) - 1) / KB_PER_GB
            p.add("results_table", "replication transfer to the other replicas", fleet.region, replicated_gb, "GB",
                  "data_transfer.inter_region")
        for region in replicas:
            p.add("results_table", "writes, local and replicated", region, written[region], "write units",
                  "dynamodb.write_units")
        # Items alive at any time: the month's expiring items for the TTL's share of a month.
        stored_gb = (facts.probe_invocations_per_month * EXPIRING_ITEMS_PER_OUTCOME * traffic.item_kb
                     * facts.history_ttl_days / DAYS_PER_MONTH / KB_PER_GB)
        derived["table_gb_per_replica"] = round(stored_gb, 3)
        for region in replicas:
            p.add("results_table", "storage", region, stored_gb, "GB-month", "dynamodb.storage")
            if region in facts.table.pitr_regions:
                p.add("results_table", "point-in-time recovery", region, stored_gb, "GB-month", "dynamodb.pitr")

    # --- alarms, the dashboard, the operators' metrics and traces ------------------------
    for region, count in facts.alarm_metrics.items():
        alarms = facts.alarms.get(region, 0)
        p.add("alarms", f"metric alarms ({alarms}), per metric read", region, count,
              "alarm metrics", "cloudwatch.alarm")
    for region, count in facts.dashboards.items():
        p.add("observability", "CloudWatch dashboard", region, count, "dashboards", "cloudwatch.dashboard")
    if facts.cloudfront_metric_subscriptions:
        p.add("observability", "CloudFront additional metrics (monitoring subscription)", REFERENCE_REGION,
              facts.cloudfront_metric_subscriptions * CLOUDFRONT_ADDITIONAL_METRICS, "metrics",
              "cloudwatch.custom_metric")
    # The edge function's metrics, in every region it runs in (taken as the origin regions:
    # viewers are assumed near them, each served by its own regional edge cache).
    edge_metrics = traffic.edge_decisions_seen * (
        EDGE_METRICS_PER_DECISION
        + EDGE_METRICS_PER_CALL_DIMENSION * (traffic.mcp_methods_seen + traffic.tools_called + EDGE_CLIENT_VALUES))
    derived["edge_metrics_per_region"] = round(edge_metrics)
    for region in regions:
        p.add("observability", "edge EMF metrics (per decision, method and tool)", region, edge_metrics, "metrics",
              "cloudwatch.custom_metric")
    for origin in facts.origins:
        if origin.tracing:
            requests = origin_requests[origin.region]
            reservoir = min(requests, XRAY_RESERVOIR_PER_SECOND * SECONDS_PER_MONTH)
            traced = reservoir + XRAY_FIXED_RATE * (requests - reservoir)
            p.add("observability", "X-Ray traces recorded (origin active tracing)", origin.region, traced, "traces",
                  "xray.traces_recorded")

    # --- keys, secrets, logs -------------------------------------------------------------
    for region, count in facts.kms_keys.items():
        p.add("other", "KMS keys", region, count, "keys", "kms.key")
    for region, count in facts.secrets.items():
        p.add("other", "Secrets Manager secrets", region, count, "secrets", "secretsmanager.secret")
    invocations_by_region: dict[str, float] = defaultdict(float)
    for region, requests in origin_requests.items():
        invocations_by_region[region] += requests
    for fleet in facts.fleets:
        invocations_by_region[fleet.region] += fleet.invocations_per_month * (1 + 1 / traffic.consumer_batch)
    # Router replicas log where they ran; priced in the router's region.
    invocations_by_region[facts.router.region] += edge_requests
    # WAF logs every request it inspects to its log group in us-east-1.
    invocations_by_region[REFERENCE_REGION] += edge_requests * len(facts.web_acls)
    for region, invocations in sorted(invocations_by_region.items()):
        ingested = invocations * traffic.log_kb_per_invocation / KB_PER_GB
        retention = facts.log_retention_days.get(region, max(facts.log_retention_days.values(), default=30))
        p.add("other", "logs ingested", region, ingested, "GB", "cloudwatch.logs_ingested")
        p.add("other", f"logs stored ({retention} days retention)", region, ingested * retention / DAYS_PER_MONTH,
              "GB-month", "cloudwatch.logs_stored")

    return Estimate(facts, traffic, p.lines, derived, dict(p.reference_priced))


# --- the Fargate Spot rule of thumb, as monthly figures ---------------------------------------


@dataclass(frozen=True)
class Option:
    name: str
    origin_monthly: float  # what the origins' compute costs a month
    stack_monthly: float  # the whole stack with this option in place of today's origins
    reasoning: str


def _origin_compute(facts: StackFacts, traffic: Traffic, prices: PriceTable) -> float:
    e = estimate(facts, traffic, prices)
    return e.part("provisioned_concurrency") + e.part("origin_invocations")


COMPARE_PRICES = ("lambda.snapstart_cache", "lambda.snapstart_restore", "fargate_spot.vcpu", "fargate_spot.memory",
                  "vpc.public_ipv4")


def in_mode(facts: StackFacts, mode: str) -> StackFacts:
    """The stack's origins as originColdStart ``mode`` deploys them: snapstart and none
    without provisioned concurrency, snapstart with its snapshot."""
    if mode == "provisioned":
        return facts
    return dataclasses.replace(facts, origins=tuple(
        dataclasses.replace(o, provisioned_min=0, provisioned_max=0, snapstart=mode == "snapstart")
        for o in facts.origins))


def compare(facts: StackFacts, traffic: Traffic, prices: PriceTable) -> list[Option]:
    """Provisioned concurrency (today), SnapStart, on-demand only and one Fargate Spot
    task per region, for the stack's origin settings and the same traffic."""
    today = estimate(facts, traffic, prices)
    today_origins = _origin_compute(facts, traffic, prices)
    rest = today.total - today_origins
    # The other modes priced by the estimate itself, as a stack in that mode is priced.
    on_demand = _origin_compute(in_mode(facts, "none"), traffic, prices)
    snapstart = _origin_compute(in_mode(facts, "snapstart"), traffic, prices)

    fargate = 0.0
    for region in facts.origin_regions:
        vcpu, memory, address = (prices.rate(pid, region) for pid in COMPARE_PRICES[2:])
        per_hour = FARGATE_VCPU * vcpu + FARGATE_MEMORY_GB * memory + address
        fargate += HOURS_PER_MONTH * per_hour

    return [
        Option("provisioned concurrency (today)" if any(o.provisioned_min for o in facts.origins)
               else "today (SnapStart)" if any(o.snapstart for o in facts.origins)
               else "today (no provisioned concurrency)", today_origins, today.total,
               "Provisioned concurrency keeps N environments initialised so the first N concurrent sessions never cold-start; "
               "they are billed every second, traffic or not, so it costs more than on-demand at low traffic "
               "and about the same under sustained load."),
        Option("SnapStart, no provisioned concurrency", snapstart, rest + snapstart,
               "The cold-start fix that restores a snapshot instead of re-running init (Java, and Python 3.12+; "
               "never together with provisioned concurrency): "
               "on-demand prices plus the snapshot cache and one restore per new environment."),
        Option("on-demand only", on_demand, rest + on_demand,
               "The baseline: pay per request and per millisecond, nothing while idle, and accept a "
               "cold start whenever a burst needs a new environment."),
        Option(f"Fargate Spot, one {FARGATE_VCPU:g} vCPU / {FARGATE_MEMORY_GB:g} GB task per region", fargate,
               rest + fargate,
               f"The rule of thumb: switch to ECS Fargate Spot once you need >= {FARGATE_ALWAYS_WARM_THRESHOLD} always-warm "
               "instances 24/7, because one small task serves hundreds of concurrent sessions through async I/O "
               "for less than one provisioned Lambda instance (priced here with a public IPv4 address and no "
               "load balancer, and Spot tasks can be interrupted)."),
    ]


# --- naming the serving region for any server (issue 39): the mechanisms, priced ----------------
#
# x-mcp-edge-served-region is the demo server's own header; for any other server no answer
# names the region. What could add it to every origin answer, and what it would cost:
# Lambda@Edge bills an origin-response trigger per request like the router, at its smallest
# memory, for about a millisecond of header copying.
SERVED_REGION_TRIGGER_MB = 128
SERVED_REGION_TRIGGER_MS = 1.0


@dataclass(frozen=True)
class ServedRegionOption:
    name: str
    true_on_aws: bool
    monthly: float  # what it adds to the stack a month (0 for one that cannot work)
    reasoning: str


def served_region_options(e: Estimate, prices: PriceTable) -> list[ServedRegionOption]:
    """Each way to make every answer name its serving region, whether AWS makes it true, and
    what it adds a month for this stack's edge requests (every client and edge-probe request)."""
    requests = float(e.derived.get("edge_requests", 0))
    trigger = requests * prices.rate("lambda_edge.requests") + gb_seconds(
        requests * SERVED_REGION_TRIGGER_MS / 1000, SERVED_REGION_TRIGGER_MB) * prices.rate("lambda_edge.duration")
    per_million = 1_000_000 * trigger / requests if requests else 0.0
    return [
        ServedRegionOption(
            "Lambda@Edge origin-response trigger", True, trigger,
            f"The only mechanism that is true on AWS: its event carries the request the router sent, whose Host "
            f"(<url-id>.lambda-url.<region>.on.aws) and SigV4 scope name the region, and it may add response "
            f"headers. Billed per request like the router: {_usd(per_million)} a million edge requests "
            f"({SERVED_REGION_TRIGGER_MB} MB, {SERVED_REGION_TRIGGER_MS:g} ms), "
            f"{100 * trigger / e.part('edge_functions') if e.part('edge_functions') else 0:.0f}% more than the edge "
            f"functions cost today, {100 * trigger / e.total if e.total else 0:.1f}% of the stack; plus a function "
            "run (and its cold starts) on every answer's path, and AWS does not document whether it holds a "
            "streamed (SSE) answer until its end. Not deployed."),
        ServedRegionOption(
            "CloudFront Function on viewer-response", False, 0.0,
            "Cannot know the origin: its event's request is the one CloudFront received from the viewer "
            "(CloudFront Functions event structure), not the one the router changed; recomputing the route there "
            "would guess (the pin is honoured only for a verified probe token, health changes between the two)."),
        ServedRegionOption(
            "response headers policy", False, 0.0,
            "Static values per cache behaviour: one behaviour serves every region the router picks per request."),
        ServedRegionOption(
            "Lambda Web Adapter setting", False, 0.0,
            "The adapter has no response-header setting (its environment variables: port, readiness, base path, "
            "compression, invoke mode, pass-through path, authorization source, error statuses, runtime API proxy)."),
        ServedRegionOption(
            "headers Lambda adds to a Function URL answer", False, 0.0,
            "x-amzn-RequestId and X-Amzn-Trace-Id carry no region."),
    ]


def served_region_verdict(options: Sequence[ServedRegionOption]) -> str:
    true = [o for o in options if o.true_on_aws]
    cheapest = min(true, key=lambda o: o.monthly)
    return (f"Verdict: the one mechanism true on AWS, the {cheapest.name}, would add {_usd(cheapest.monthly)} "
            f"{CURRENCY} a month to this stack; it is not deployed, so only a server that sets "
            "x-mcp-edge-served-region itself (the demo) names its region, and the probes' served-by check "
            "fires only for such a server.")


def fargate_rule_verdict(facts: StackFacts) -> str:
    warm = [f"{o.region} ({o.provisioned_min})" for o in facts.origins if o.provisioned_min >= FARGATE_ALWAYS_WARM_THRESHOLD]
    if not warm:
        return (f"The rule of thumb applied to this stack: no region keeps {FARGATE_ALWAYS_WARM_THRESHOLD} or more "
                "always-warm instances, so it keeps Lambda (provisioned concurrency for bursts, or on-demand).")
    return (f"The rule of thumb applied to this stack: {', '.join(warm)} keep{'s' if len(warm) == 1 else ''} "
            f">= {FARGATE_ALWAYS_WARM_THRESHOLD} always-warm instances, where it switches to Fargate Spot.")


# The figures the rule of thumb was made with, quoted beside this table's.
RULE_FARGATE_TASK_MONTHLY = 7.35
RULE_PROVISIONED_INSTANCE_MONTHLY = 19.44


def fargate_unit_prices(facts: StackFacts, prices: PriceTable) -> str:
    """One Fargate Spot task and one provisioned instance of each origin size, a month."""
    region = facts.origins[0].region if facts.origins else REFERENCE_REGION
    vcpu, memory, address = (prices.rate(pid, region) for pid in COMPARE_PRICES[2:])
    task = HOURS_PER_MONTH * (FARGATE_VCPU * vcpu + FARGATE_MEMORY_GB * memory + address)
    sizes = sorted({(o.function.memory_mb, o.function.architecture) for o in facts.origins})
    instances = ", ".join(
        f"{mb} MB {arch} {_usd(gb_seconds(SECONDS_PER_MONTH, mb) * prices.rate(f'lambda.provisioned.{arch}', region))}"
        for mb, arch in sizes)
    return (f"One unit a month at these prices: a Fargate Spot task {_usd(task)} (with its public IPv4 address); "
            f"a provisioned instance {instances or '-'} (the rule of thumb was made with {RULE_FARGATE_TASK_MONTHLY:.2f} and "
            f"{RULE_PROVISIONED_INSTANCE_MONTHLY:.2f}).")


# --- rendering -----------------------------------------------------------------------------------


def _usd(value: float) -> str:
    return f"{value:,.2f}"


def _quantity(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.4g}" if abs(value) < 1 else f"{value:,.2f}"


def assumptions(traffic: Traffic) -> dict[str, float]:
    return {f.name: getattr(traffic, f.name) for f in dataclasses.fields(traffic)}


def derived_notes(e: Estimate) -> list[str]:
    facts, d = e.facts, e.derived
    fleets = facts.fleets
    intervals = sorted({s.interval_s for f in fleets for s in f.schedules})
    interval_text = "/".join(f"{i} s" for i in intervals) or "-"
    notes = [
        f"origin regions: {len(facts.origins)} ({', '.join(facts.origin_regions)}); CloudFront {facts.price_class}",
        f"probe regions: {len(fleets)}; targets per probe region: "
        + ", ".join(f"{f.region} {len(f.schedules)}" for f in fleets),
        f"probe invocations a month: {d['probe_invocations']:,} = sum over probe regions of targets x "
        f"{SECONDS_PER_MONTH:,} s / a round every {interval_text} (probe regions x 2 x origin regions: grows with "
        "the square of the region count; Step Functions Express runs a minute's rounds, one execution a minute "
        "per probe region)",
        f"edge requests a month: {d['edge_requests']:,} (clients and edge probes; each runs the viewer function "
        f"and the router{', and reads the KeyValueStore' if facts.key_value_stores else ''})",
    ]
    for region, o in d.get("origins", {}).items():
        notes.append(
            f"origin {region}: {o['memory_mb']} MB {o['architecture']}, provisioned min {o['provisioned_min']} max "
            f"{o['provisioned_max']} -> {o['provisioned_instances']} provisioned for a mean concurrency of "
            f"{o['mean_concurrency']:g}; {o['requests']:,} requests ({o['probe_requests']:,} from probes)")
    if facts.table:
        notes.append(f"results table replicas: {', '.join(facts.table.regions)} (every write is billed in each); "
                     f"{d.get('table_gb_per_replica', 0):g} GB each with {facts.history_ttl_days}-day history")
    notes.append("alarms: " + ", ".join(f"{r} {n}" for r, n in facts.alarms.items())
                 + "; KMS keys: " + ", ".join(f"{r} {n}" for r, n in facts.kms_keys.items())
                 + "; secrets: " + ", ".join(f"{r} {n}" for r, n in facts.secrets.items())
                 + "; queues: " + ", ".join(f"{r} {n}" for r, n in facts.queues.items()))
    return notes


NOT_ESTIMATED = (
    "free tiers (per account, not per stack)",
    "SNS alert notifications, KMS and Secrets Manager API calls, CloudWatch API calls",
    "data transfer from CloudFront to the origins (request bodies) and the probes' direct calls to other regions",
    "volume discounts beyond the first pricing tier, taxes, Savings Plans",
)


def not_estimated(facts: StackFacts) -> tuple[str, ...]:
    images = [o.region for o in facts.origins if o.image]
    if not images:
        return NOT_ESTIMATED
    return (*NOT_ESTIMATED, f"ECR storage and scans of the origin images ({', '.join(images)}: one repository "
                            "each, the 20 newest images kept)")


def render(e: Estimate, prices: PriceTable, options: Sequence[Option] | None = None) -> str:
    stack = e.facts.stack
    lines = [
        f"# Monthly cost estimate: stack {stack} of {PROJECT}",
        "#",
        "# The program (__main__.py) run under Pulumi mocks with this stack's file; what it deploys",
        "# times the list prices in review/prices.toml. Figures marked (assumption) are flags of",
        "# `python -m review.cost`; everything else comes from the stack. Regenerate after changing",
        "# the program, the stack file or the price table:",
        f"#   .venv/bin/python -m review.cost --stack {stack} --write",
        "",
        f"## Total: {_usd(e.total)} {CURRENCY} a month",
        "",
        f"{'part':<26}{CURRENCY + ' a month':>14}",
    ]
    for part, usd in e.monthly.items():
        lines.append(f"{part:<26}{_usd(usd):>14}")
    lines += [f"{'total':<26}{_usd(e.total):>14}", "", "## Lines, by part and region", ""]
    header = f"{'item':<58}{'region':<20}{'quantity':>16}  {'unit':<12}{CURRENCY:>10}"
    lines.append(header)
    for part in PARTS:
        part_lines = [line for line in e.lines if line.part == part]
        lines.append(f"{part} ({_usd(sum(line.usd for line in part_lines))})")
        for line in sorted(part_lines, key=lambda x: (x.region != GLOBAL, x.region, x.item)):
            lines.append(f"  {line.item:<56}{line.region:<20}{_quantity(line.quantity):>16}  {line.unit:<12}"
                         f"{_usd(line.usd):>10}")
    lines += ["", "## From the stack", ""] + [f"- {note}" for note in derived_notes(e)]
    lines += ["", "## Assumptions (flags of python -m review.cost)", ""]
    for f in dataclasses.fields(e.traffic):
        lines.append(f"- --{flag_name(f.name)} {_quantity(getattr(e.traffic, f.name))} (assumption): {f.metadata['help']}")
    lines.append(f"- probe requests per exchange {PROBE_REQUESTS_PER_EXCHANGE} (+ {PROMISE_REQUESTS_PER_EDGE_PROBE} "
                 "refused at the edge by an edge probe's promise check; + "
                 f"{HANDSHAKE_CHECK_REQUESTS} every {HANDSHAKE_CHECK_INTERVAL_S} s per target, the handshake check, "
                 "for one probe execution environment per region), consumer writes per outcome "
                 f"{TRANSACTION_PUTS_PER_OUTCOME} in a transaction + {PLAIN_PUTS_PER_OUTCOME} "
                 f"(+ {HEALTH_PLAIN_PUTS_PER_OUTCOME} health streak with region health), idle queue pollers "
                 f"{ESM_IDLE_POLLERS} per mapping: the handlers' and Lambda's behaviour")
    if e.reference_priced:
        lines += ["", f"## Priced at {REFERENCE_REGION} rates (no regional entry in review/prices.toml)", ""]
        for region, ids in sorted(e.reference_priced.items()):
            lines.append(f"- {region}: {', '.join(sorted(ids))}")
    lines += ["", "## Not estimated", ""] + [f"- {item}" for item in not_estimated(e.facts)]
    if options is not None:
        lines += ["", "## Origin options (--compare)", "",
                  f"{'option':<58}{'origins ' + CURRENCY:>14}{'stack ' + CURRENCY:>14}"]
        for option in options:
            lines.append(f"{option.name:<58}{_usd(option.origin_monthly):>14}{_usd(option.stack_monthly):>14}")
        lines.append("")
        for option in options:
            lines.append(f"- {option.name}: {option.reasoning}")
        lines += ["", fargate_unit_prices(e.facts, prices), fargate_rule_verdict(e.facts)]
        served = served_region_options(e, prices)
        lines += ["", "## Naming the serving region for any server (--compare; none deployed)", "",
                  f"{'mechanism':<58}{'true on AWS':>14}{CURRENCY + ' a month':>14}"]
        for choice in served:
            lines.append(f"{choice.name:<58}{'yes' if choice.true_on_aws else 'no':>14}{_usd(choice.monthly):>14}")
        lines.append("")
        lines += [f"- {choice.name}: {choice.reasoning}" for choice in served]
        lines += ["", served_region_verdict(served)]
    lines += ["", "## Prices used", ""]
    used = {(pid, line.region) for line in e.lines for pid in line.price_ids}
    if options is not None:
        used |= {(pid, region) for pid in COMPARE_PRICES for region in e.facts.origin_regions}
    seen: set[tuple[str, str]] = set()
    for pid, region in sorted(used):
        price, _ = prices.lookup(pid, region)
        key = (price.id, price.region)
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"- {price.id} [{price.region}]: {price.usd:g} {CURRENCY} per {price.per:,.0f} {price.unit} "
                     f"(as of {price.as_of}, {price.source})")
    return "\n".join(lines) + "\n"


def to_json(e: Estimate, options: Sequence[Option] | None = None, prices: PriceTable | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "currency": CURRENCY,
        "monthly": {part: round(usd, 2) for part, usd in e.monthly.items()},
        "total": round(e.total, 2),
        "assumptions": assumptions(e.traffic),
        "per_event": PER_EVENT,
        "derived": e.derived,
        "lines": [{"part": line.part, "item": line.item, "region": line.region, "quantity": round(line.quantity, 6),
                   "unit": line.unit, "usd": round(line.usd, 4), "prices": list(line.price_ids)} for line in e.lines],
        "priced_at_reference_region": {r: sorted(ids) for r, ids in sorted(e.reference_priced.items())},
    }
    if options is not None:
        doc["compare"] = [{"option": o.name, "origins_monthly": round(o.origin_monthly, 2),
                           "stack_monthly": round(o.stack_monthly, 2), "reasoning": o.reasoning} for o in options]
        doc["fargate_rule"] = fargate_rule_verdict(e.facts)
        served = served_region_options(e, prices or load_prices())
        doc["served_region"] = [{"mechanism": o.name, "true_on_aws": o.true_on_aws, "monthly": round(o.monthly, 2),
                                 "reasoning": o.reasoning} for o in served]
        doc["served_region_verdict"] = served_region_verdict(served)
    return doc


# --- the prod estimate in docs/architecture.md ----------------------------------------------------

DOC_FILE = PROJECT_ROOT / "docs" / "architecture.md"
DOC_STACK = "prod"
DOC_BEGIN = "<!-- prod-cost:begin (generated by python -m review.cost --stack prod --write) -->"
DOC_END = "<!-- prod-cost:end -->"
PART_DRIVERS = {
    "provisioned_concurrency": "provisioned instances x memory x 730 h, per origin region (auto scaling's minimum unless traffic needs more)",
    "origin_invocations": "client and probe requests x duration x memory, at the provisioned rate while instances suffice",
    "edge_functions": "every edge request runs the viewer CloudFront Function and the Lambda@Edge router (and a KeyValueStore read once there is one)",
    "cloudfront": "edge requests and bytes out, at the pricing geography of each origin region and probe region",
    "firewall": "the WAF web ACL ($5 a month), its rules ($1 each a month) and every edge request it inspects "
                "($0.60 per million)",
    "probes": f"probe regions x 2 x origin regions schedules: invocations, queues, consumer, and {METRICS_PER_TARGET} metrics per target",
    "results_table": "every outcome's writes land in every replica: outcomes grow with regions squared, their replicated writes with regions cubed",
    "alarms": "metric alarms in the resource graph, each billed per metric it reads (a metric-math alarm reads several)",
    "observability": f"the operations dashboard, CloudFront's {CLOUDFRONT_ADDITIONAL_METRICS} additional metrics, the edge "
                     f"function's EMF metrics per decision x ({EDGE_METRICS_PER_DECISION} + methods + named tools + "
                     f"{EDGE_CLIENT_VALUES} client classes) in "
                     "every region it runs in, and X-Ray traces of the origins' sampled invocations",
    "other": "KMS keys, Secrets Manager secrets (the probes' client secret), CloudWatch Logs ingestion and storage",
}


def doc_summary(e: Estimate, options: Sequence[Option]) -> str:
    """The block of docs/architecture.md that shows the prod estimate."""
    lines = [DOC_BEGIN, "", f"| Part | {CURRENCY} a month | What drives it |", "|---|---:|---|"]
    for part, usd in e.monthly.items():
        lines.append(f"| `{part}` | {_usd(usd)} | {PART_DRIVERS[part]} |")
    lines += [f"| **total** | **{_usd(e.total)}** | |", "",
              f"| Origin option (`--compare`) | Origins, {CURRENCY} a month | Whole stack |", "|---|---:|---:|"]
    lines += [f"| {o.name} | {_usd(o.origin_monthly)} | {_usd(o.stack_monthly)} |" for o in options]
    lines += ["", fargate_rule_verdict(e.facts), "", DOC_END]
    return "\n".join(lines)


def replace_doc_block(doc: str, block: str) -> str:
    start, end = doc.find(DOC_BEGIN), doc.find(DOC_END)
    if start < 0 or end < start:
        raise CostError(f"{DOC_FILE.name} has no {DOC_BEGIN} ... {DOC_END} block to refresh")
    return doc[:start] + block + doc[end + len(DOC_END):]


# --- the command -------------------------------------------------------------------------------------


def cost_path(stack: str, plans_dir: Path = PLANS_DIR) -> Path:
    return plans_dir / f"{stack}.cost.txt"


def refresh_command(stack: str) -> str:
    return f".venv/bin/python -m review.cost --stack {stack} --write"


def committed_figures(run: ProgramRun, prices: PriceTable | None = None) -> tuple[Estimate, list[Option], PriceTable]:
    """The estimate at the default assumptions, with the --compare options."""
    prices = prices or load_prices()
    facts = facts_from_run(run)
    return estimate(facts, Traffic(), prices), compare(facts, Traffic(), prices), prices


def committed_estimate(run: ProgramRun, prices: PriceTable | None = None) -> str:
    """What plans/<stack>.cost.txt holds."""
    e, options, prices = committed_figures(run, prices)
    return render(e, prices, options)


def estimate_diff(committed: str, current: str, stack: str) -> str:
    return committed_diff(committed, current, f"plans/{stack}.cost.txt")


def _run_for(stack_or_path: str) -> ProgramRun:
    path = resolve_stack_file(stack_or_path)
    load_from_stack_file(path)  # a bad stack file is reported by key before the program runs
    return run_program(stack_name_of(path), stack_file=path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m review.cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod", help="stack name (Pulumi.<stack>.yaml) or a stack file's path")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the estimate as JSON")
    output.add_argument("--write", action="store_true", help="write plans/<stack>.cost.txt (default assumptions)")
    output.add_argument("--check", action="store_true", help="exit 1 with a diff if plans/<stack>.cost.txt is stale")
    parser.add_argument("--compare", action="store_true",
                        help="origin options side by side: provisioned concurrency, SnapStart, on-demand, Fargate Spot")
    parser.add_argument("--plans-dir", type=Path, default=PLANS_DIR, help=argparse.SUPPRESS)
    group = parser.add_argument_group("traffic assumptions")
    for f in dataclasses.fields(Traffic):
        group.add_argument(f"--{flag_name(f.name)}", type=float, default=f.default,
                           help=f"{f.metadata['help']} (default {f.default:g})")
    add_debug_flag(parser)
    args = parser.parse_args(argv)

    def work() -> int:
        traffic = Traffic(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Traffic)})
        prices = load_prices()
        run = _run_for(args.stack)
        if args.write or args.check:
            status = write_or_check(cost_path(run.stack, args.plans_dir), committed_estimate(run, prices),
                                    write=args.write, label=f"plans/{run.stack}.cost.txt",
                                    refresh=refresh_command(run.stack))
            if args.write and run.stack == DOC_STACK and args.plans_dir == PLANS_DIR:
                doc_estimate, doc_options, _ = committed_figures(run, prices)
                DOC_FILE.write_text(replace_doc_block(DOC_FILE.read_text(), doc_summary(doc_estimate, doc_options)))
                print(f"refreshed the prod estimate in {DOC_FILE}", file=sys.stderr)
            return status
        facts = facts_from_run(run)
        e = estimate(facts, traffic, prices)
        options = compare(facts, traffic, prices) if args.compare else None
        if args.json:
            print(json.dumps(to_json(e, options, prices), indent=2, sort_keys=False))
        else:
            print(render(e, prices, options), end="")
        return 0

    return run_reporting_errors("review.cost", work, debug=args.debug, expected=(CostError,))


if __name__ == "__main__":
    sys.exit(main())
