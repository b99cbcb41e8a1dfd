"""ProbeFleet: one region's probes of the edge and the origins, and what their outcomes flow through.

A fleet, in its region:

- the probe Lambda (python3.13, arm64, httpx only), invoked asynchronously once per target
  and round by a Step Functions Express workflow (``components/probe_rounds.py``: why Express),
  which one EventBridge Scheduler schedule starts every minute (Scheduler's finest rate) and
  which runs the minute's rounds every ``interval_seconds``; each invocation's event names the
  target: the public
  edge URL pinned to each origin region (region-pin header) and every regional
  Function URL directly (``AuthType AWS_IAM``: SigV4-signed with the probe role, which may
  invoke exactly the stack's origin functions and their alias, nothing else of Lambda's);
  with each probe, a request the platform must refuse (a forged token at the edge, an
  unsigned request at a Function URL), whose 2xx the consumer alerts on;
- its async invoke config: 0 retries, 300 s maximum event age, OnSuccess to the
  results queue, OnFailure to the dead-letter queue (its role may send to those two
  queues, read its client secret, invoke the origins and write its own logs, nothing else);
- the two queues (SSE-SQS; results kept 7 days, dead letters 14) and a quarantine
  queue both redrive to, so a message the consumer can never parse stops cycling
  but is kept (14 days) and alarmed on;
- the results consumer (Powertools batch processing) with an event source mapping
  on each queue (``ReportBatchItemFailures``, 1 s batching window, maximum
  concurrency 2), writing to this region's replica of the results table, and
  claiming its alerts in the table's home region (``table_home_region``), where
  conditional writes serialize, so one change pages once across probe regions;
- alarms to the region's alert topic: dead-letter queue depth, quarantine depth,
  consumer errors, dropped schedule invocations, failed rounds workflows.

The results table the consumer writes is ``ProbeResults`` (``components/probe_results.py``).
"""

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

import functions
from components import naming
from components.alerts import topic_alarm
from components.iam import Statement, allow_policy, trust_policy
from components.lambda_package import PackageSpec
from components.naming import physical_name
from components.origin import invoke_origins_policy
from components.probe_results import replica_arns
from components.probe_rounds import rounds_definition
from components.regional_function import regional_function, zip_code
from components.settings import (
    CONSUMER_TIMEOUT_S,
    HEALTH_FAILURE_THRESHOLD,
    HEALTH_RECOVERY_THRESHOLD,
    LOG_RETENTION_DAYS,
    MCP_PATH,
    PROBE_DEADLINE_S,
    PROBE_DEGRADED_LATENCY_MS,
    PROBE_HISTORY_TTL_DAYS,
    PROBE_INTERVAL_S,
    PROBE_TIMEOUT_S,
)
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks, is_known, with_integers
from functions.contract import (
    HEALTH_FAILURE_ROUNDS_DEFAULT,
    HEALTH_RECOVERY_ROUNDS_DEFAULT,
    TARGET_EDGE,
    TARGET_ORIGIN,
    ConsumerEnv,
    ProbeEnv,
    ProbeEvent,
)

# What reading the probes' client secret takes (its only Secrets Manager use).
SECRET_READ_ACTIONS = ("secretsmanager:GetSecretValue",)
# A secret encrypted with a customer managed KMS key is decrypted with the caller's own
# permission, through Secrets Manager (the AWS managed aws/secretsmanager key needs none).
SECRET_DECRYPT_ACTIONS = ("kms:Decrypt",)

# The function packages, found from the installed ``functions`` package.
FUNCTIONS = Path(functions.__file__).resolve().parent
PROBE_PACKAGE = PackageSpec(
    name="probe",
    sources=((FUNCTIONS / "probe", "probe/"),),
    requirements=FUNCTIONS / "probe" / "requirements.txt",
    architecture="arm64",
    python_version="3.13",
    link_root=FUNCTIONS,  # probe/ links the modules it shares with functions/
)
RESULTS_PACKAGE = PackageSpec(
    name="probe-results",
    sources=((FUNCTIONS / "results", "results/"),),
    requirements=FUNCTIONS / "results" / "requirements.txt",
    architecture="arm64",
    python_version="3.13",
    link_root=FUNCTIONS,  # results/ links the modules it shares with functions/
)
PROBE_HANDLER = "probe.handler.handler"
RESULTS_HANDLER = "results.handler.handler"
PROBE_MEMORY_MB = 256  # I/O bound; 256 MB buys enough CPU for TLS handshakes
CONSUMER_MEMORY_MB = 256
METRICS_NAMESPACE = "McpEdge/Probes"

# Destination records and queues: a probe outcome is worth a few minutes, a failure two weeks of
# investigation; and AWS's rule for a queue's visibility timeout (visibility_timeout_s).
MAX_EVENT_AGE_S = 300
RESULTS_RETENTION_S = 7 * 86400
DEAD_LETTER_RETENTION_S = 14 * 86400
QUARANTINE_RETENTION_S = 14 * 86400
BATCH_SIZE = 10
BATCHING_WINDOW_S = 1
CONSUMER_MAX_CONCURRENCY = 2  # the lowest SQS maximum concurrency allowed
QUARANTINE_AFTER_RECEIVES = 10
# The DLQ is drained continuously, so a visible message for this many minutes in a
# row means the consumer is not keeping up (or failing).
DLQ_ALARM_MINUTES = 5


def queue_name(server_id: str, kind: str, region: str, stack: str | None = None) -> str:
    return physical_name(server_id, f"probe-{kind}-{region}", limit=naming.SQS_QUEUE, stack=stack)


def visibility_timeout_s(consumer_timeout_s: int) -> int:
    """At least 6x the consumer's timeout (AWS's rule for SQS event sources), plus the
    batching window a message may wait in before the function even starts."""
    return 6 * consumer_timeout_s + BATCHING_WINDOW_S


# Scheduler starts the rounds workflow once a minute, its finest rate.
ROUNDS_SCHEDULE = "rate(1 minute)"
# Step Functions' log delivery to CloudWatch Logs: AWS requires these on every resource ("*").
STATES_LOG_DELIVERY_ACTIONS = (
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
)


# What a consumer does with alert claims in the table's home region (functions/results/store.py).
ALERT_CLAIM_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
# What the consumer does with the stack's KeyValueStore (functions/results/kvs.py):
# read the health document and its ETag, write it with the ETag. Nothing else, and
# on that one store only.
HEALTH_STORE_ACTIONS = (
    "cloudfront-keyvaluestore:DescribeKeyValueStore",
    "cloudfront-keyvaluestore:GetKey",
    "cloudfront-keyvaluestore:PutKey",
)


class ProbeCredentialsArgs(TypedDict):
    """How the probes get a bearer token (OAuth client credentials)."""

    token_url: str
    """The issuer's token endpoint (https)."""
    client_id: str
    """OAuth client id the probes authenticate as."""
    client_secret_name: str
    """Secrets Manager secret, in the fleet's region, holding the client secret."""
    client_secret: NotRequired[pulumi.Input[str] | None]
    """The client secret (a Pulumi secret): the fleet creates client_secret_name holding it, before the first
    probe; without it, that secret must exist already."""
    audience: str
    """Audience (resource) the token is requested for."""


class RegionHealthArgs(TypedDict):
    """Where and how the fleet's results consumer publishes region health (regional failover)."""

    store_arn: pulumi.Input[str]
    """The stack's CloudFront KeyValueStore, which the viewer-request function reads."""
    probe_regions: list[str]
    """Every probe region of the stack: each one's votes count (this fleet's region among them)."""
    quorum: NotRequired[int]
    """Probe regions that must agree to avoid or restore a region; 0 (default): a majority."""
    failure_threshold: NotRequired[int]
    """Consecutive failed rounds before a probe region votes a region down (default 2)."""
    recovery_threshold: NotRequired[int]
    """Consecutive successful rounds before it votes the region up again (default 3)."""


class ProbeFleetArgs(TypedDict):
    """Inputs of one region's probe fleet."""

    region: str
    """AWS region the fleet runs in."""
    server_id: str
    """Name of the MCP server: prefixes resource names, named in probe events and metrics."""
    edge_mcp_url: pulumi.Input[str]
    """The edge's MCP URL, probed pinned to each origin region: best the distribution's own domain
    (EdgeLayer.distribution_mcp_url), which works from the first minute; a custom domain fails
    every edge probe until its DNS record points at the distribution."""
    origin_urls: dict[str, pulumi.Input[str]]
    """Origin region -> its Function URL (with trailing slash), probed directly with SigV4-signed requests."""
    origin_function_arns: dict[str, pulumi.Input[str]]
    """Origin region -> ARN of its origin function (McpOrigin.function_arn): the probe role may invoke its
    Function URL (AuthType AWS_IAM), and these functions only."""
    origin_alias_arns: dict[str, pulumi.Input[str]]
    """Origin region -> ARN of the alias its Function URL is on (McpOrigin.alias_arn)."""
    table_name: pulumi.Input[str]
    """Name of the probe results table."""
    table_arn: pulumi.Input[str]
    """ARN of the results table's copy in this region."""
    table_home_region: NotRequired[pulumi.Input[str] | None]
    """The results table's home region (ProbeResults.home_region), where every fleet's consumer claims its
    alerts, so one change pages once across probe regions (default: this fleet's region)."""
    alert_topic_arn: pulumi.Input[str]
    """SNS topic in this region for alarms and probe alerts."""
    alert_key_arn: pulumi.Input[str]
    """KMS key the alert topic is encrypted with (publishers need to use it)."""
    credentials: ProbeCredentialsArgs
    """How the probes get their bearer token."""
    mcp_path: NotRequired[str]
    """Path of the MCP endpoint on the origins (default /mcp)."""
    interval_seconds: NotRequired[int]
    """Seconds between probe rounds, a divisor of the minute: 10, 12, 15, 20, 30 or 60 (default 10)."""
    timeout_seconds: NotRequired[int]
    """Timeout of the probe function, 5-900 seconds (default 30)."""
    deadline_seconds: NotRequired[int]
    """Hard deadline of one probe, below timeout_seconds (default 20)."""
    degraded_latency_ms: NotRequired[int]
    """A probe slower than this is reported degraded (default 1500)."""
    history_ttl_days: NotRequired[int]
    """Days probe history items live in the results table (default 30)."""
    consumer_timeout_seconds: NotRequired[int]
    """Timeout of the results consumer function, 1-900 seconds (default 30)."""
    log_retention_days: NotRequired[int]
    """CloudWatch Logs retention for the fleet's functions (default 30)."""
    health: NotRequired[RegionHealthArgs]
    """Region health publishing for the edge's failover; without it the consumer publishes none."""


def fleet_args(name: str, args: ProbeFleetArgs) -> ProbeFleetArgs:
    """``args`` with every default filled in (the same shape: the args are the fleet's one record),
    checked; a ``ComponentArgsError`` names every problem."""
    checks = ArgChecks("ProbeFleet", name)
    required = ("region", "server_id", "edge_mcp_url", "origin_urls", "origin_function_arns", "origin_alias_arns",
                "table_name", "table_arn", "alert_topic_arn", "alert_key_arn", "credentials")
    if not checks.required(args, *required):
        checks.done()
    credentials = args["credentials"]
    full: ProbeFleetArgs = {
        **args,
        "mcp_path": args.get("mcp_path") or MCP_PATH.default,
        "interval_seconds": args.get("interval_seconds", PROBE_INTERVAL_S.default),
        "timeout_seconds": args.get("timeout_seconds", PROBE_TIMEOUT_S.default),
        "deadline_seconds": args.get("deadline_seconds", PROBE_DEADLINE_S.default),
        "degraded_latency_ms": args.get("degraded_latency_ms", PROBE_DEGRADED_LATENCY_MS.default),
        "history_ttl_days": args.get("history_ttl_days", PROBE_HISTORY_TTL_DAYS.default),
        "consumer_timeout_seconds": args.get("consumer_timeout_seconds", CONSUMER_TIMEOUT_S.default),
        "log_retention_days": args.get("log_retention_days", LOG_RETENTION_DAYS.default),
        "credentials": {"token_url": "", "client_id": "", "client_secret_name": "", "audience": "", **credentials},
    }
    if args.get("health"):
        full["health"] = health_args(args["health"])
    checks.region("region", full["region"])
    if isinstance(full.get("table_home_region"), str):
        checks.region("table_home_region", full.get("table_home_region"))
    checks.name_prefix("server_id", full["server_id"])
    checks.mcp_path("mcp_path", full["mcp_path"])
    if checks.region_map("origin_urls", full["origin_urls"], "its origin's Function URL"):
        for region, url in full["origin_urls"].items():
            if is_known(url):
                checks.https_url(f"origin_urls[{region!r}]", url)
    for key in ("origin_function_arns", "origin_alias_arns"):
        if checks.region_map(key, full[key], "its origin's ARN") and set(full[key]) != set(full["origin_urls"]):  # type: ignore[literal-required]
            checks.problem(key, sorted(full[key]),  # type: ignore[literal-required]
                           f"must name the regions of origin_urls, {sorted(full['origin_urls'])}")
    if is_known(full["edge_mcp_url"]):
        checks.https_url("edge_mcp_url", full["edge_mcp_url"])
    checks.https_url("credentials.token_url", full["credentials"]["token_url"])
    for field in ("client_id", "client_secret_name", "audience"):
        checks.text(f"credentials.{field}", full["credentials"][field])  # type: ignore[literal-required]
    checks.one_of("interval_seconds", full["interval_seconds"], PROBE_INTERVAL_S.choices)
    checks.within("timeout_seconds", full["timeout_seconds"], PROBE_TIMEOUT_S)
    checks.integer("deadline_seconds", full["deadline_seconds"], int(PROBE_DEADLINE_S.low or 1),
                   max(1, full["timeout_seconds"] - 1),
                   " seconds, below timeout_seconds (so a probe fails cleanly instead of timing out)")
    checks.within("degraded_latency_ms", full["degraded_latency_ms"], PROBE_DEGRADED_LATENCY_MS)
    checks.within("history_ttl_days", full["history_ttl_days"], PROBE_HISTORY_TTL_DAYS)
    checks.within("consumer_timeout_seconds", full["consumer_timeout_seconds"], CONSUMER_TIMEOUT_S)
    checks.one_of("log_retention_days", full["log_retention_days"], LOG_RETENTION_DAYS.choices)
    if "health" in full and checks.required(full["health"], "store_arn", "probe_regions"):
        check_health(checks, full["health"], full["region"])
    checks.done()
    return full


def health_args(args: RegionHealthArgs) -> RegionHealthArgs:
    """``args`` with the defaults filled in."""
    return {
        **args,
        "probe_regions": list(args.get("probe_regions") or ()),
        "quorum": args.get("quorum", 0),
        "failure_threshold": args.get("failure_threshold", HEALTH_FAILURE_ROUNDS_DEFAULT),
        "recovery_threshold": args.get("recovery_threshold", HEALTH_RECOVERY_ROUNDS_DEFAULT),
    }


def check_health(checks: ArgChecks, health: RegionHealthArgs, region: str) -> None:
    regions = health["probe_regions"]
    checks.regions("health.probe_regions", regions)
    if len(set(regions)) != len(regions):
        checks.problem("health.probe_regions", regions, "must list each probe region once")
    if regions and region not in regions:
        checks.problem("health.probe_regions", regions,
                       f"must include the fleet's own region {region} (its votes count)")
    checks.integer("health.quorum", health["quorum"], 0, max(1, len(regions)), " probe regions (0: a majority)")
    checks.within("health.failure_threshold", health["failure_threshold"], HEALTH_FAILURE_THRESHOLD, " rounds")
    checks.within("health.recovery_threshold", health["recovery_threshold"], HEALTH_RECOVERY_THRESHOLD, " rounds")


def health_environment(health: RegionHealthArgs, store_arn: str, origin_regions: list[str]) -> dict[str, str]:
    """What functions/results/handler.py reads to publish region health."""
    return {
        ConsumerEnv.HEALTH_STORE_ARN: store_arn,
        ConsumerEnv.HEALTH_PROBE_REGIONS: ",".join(health["probe_regions"]),
        # Outcomes for other regions are neither voted on nor published (the document stays small).
        ConsumerEnv.HEALTH_ORIGIN_REGIONS: ",".join(origin_regions),
        ConsumerEnv.HEALTH_QUORUM: str(health["quorum"]),
        ConsumerEnv.HEALTH_FAILURE_THRESHOLD: str(health["failure_threshold"]),
        ConsumerEnv.HEALTH_RECOVERY_THRESHOLD: str(health["recovery_threshold"]),
    }


def probe_event(server_id: str, mcp_path: str, target: str, region: str, url: str) -> dict[str, Any]:
    """The schedule input for one target (``functions/probe/event.py`` validates it)."""
    return {
        ProbeEvent.ENDPOINT: url if target == TARGET_EDGE else url.rstrip("/") + mcp_path,
        ProbeEvent.SERVER_ID: server_id,
        ProbeEvent.TARGET: target,
        ProbeEvent.TARGET_REGION: region,
        ProbeEvent.PIN_REGION: region if target == TARGET_EDGE else None,
        ProbeEvent.SIGNED: target == TARGET_ORIGIN,
    }


def probe_events(args: ProbeFleetArgs) -> dict[str, pulumi.Output[dict[str, Any]]]:
    """Target label -> probe event (one invocation's input each round): the edge pinned to each
    origin region, then each origin's Function URL."""
    events: dict[str, pulumi.Output[dict[str, Any]]] = {}
    event = partial(probe_event, args["server_id"], args["mcp_path"])
    edge_mcp_url, origin_urls = args["edge_mcp_url"], args["origin_urls"]
    for region in origin_urls:
        events[f"{TARGET_EDGE}-{region}"] = pulumi.Output.from_input(edge_mcp_url).apply(
            partial(event, TARGET_EDGE, region))
    for region, url in origin_urls.items():
        events[f"{TARGET_ORIGIN}-{region}"] = pulumi.Output.from_input(url).apply(partial(event, TARGET_ORIGIN, region))
    return events


def probe_environment(args: ProbeFleetArgs) -> dict[str, str]:
    """What functions/probe/handler.py reads (of the client secret, its name only)."""
    return {
        ProbeEnv.DEADLINE_S: str(args["deadline_seconds"]),
        ProbeEnv.DEGRADED_LATENCY_MS: str(args["degraded_latency_ms"]),
        ProbeEnv.TOKEN_URL: args["credentials"]["token_url"],
        ProbeEnv.CLIENT_ID: args["credentials"]["client_id"],
        ProbeEnv.CLIENT_SECRET_NAME: args["credentials"]["client_secret_name"],
        ProbeEnv.TOKEN_AUDIENCE: args["credentials"]["audience"],
    }


def client_secret_decrypt_statement(region: str, secret_arn: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """The probe role's grant on the KMS key of a client secret that exists already, whatever
    key encrypts it: ``kms:Decrypt`` only through Secrets Manager in ``region``
    (``kms:ViaService``) and only for this secret (Secrets Manager's encryption context names
    the secret's ARN, ``kms:EncryptionContext:SecretARN``)."""
    return (list(SECRET_DECRYPT_ACTIONS), [f"arn:aws:kms:{region}:*:key/*"], {
        "StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"},
        "StringLike": {"kms:EncryptionContext:SecretARN": secret_arn},
    })


class ProbeFleet(pulumi.ComponentResource):
    """One region's probe fleet: MCP probes of the edge (pinned to each origin region) and of
    every origin, a round every ``interval_seconds`` (a Step Functions Express workflow that
    EventBridge Scheduler starts every minute); outcomes through Lambda Destinations and SQS to a
    results consumer that writes the results table and raises alerts."""

    results_queue_url: pulumi.Output[str]
    """URL of the queue successful probe outcomes are sent to."""
    results_queue_arn: pulumi.Output[str]
    """ARN of the results queue."""
    dead_letter_queue_url: pulumi.Output[str]
    """URL of the queue failed probe outcomes are sent to."""
    dead_letter_queue_arn: pulumi.Output[str]
    """ARN of the dead-letter queue."""
    quarantine_queue_url: pulumi.Output[str]
    """URL of the queue messages the consumer could not process are moved to."""
    quarantine_queue_arn: pulumi.Output[str]
    """ARN of the quarantine queue."""
    probe_function_arn: pulumi.Output[str]
    """ARN of the probe function."""
    consumer_function_arn: pulumi.Output[str]
    """ARN of the results consumer function."""
    schedule_arns: pulumi.Output[list[str]]
    """ARNs of the fleet's schedules: the one that starts the rounds workflow every minute."""
    rounds_state_machine_arn: pulumi.Output[str]
    """ARN of the Step Functions Express workflow that runs a minute's probe rounds."""
    event_source_mapping_arns: pulumi.Output[list[str]]
    """ARNs of the consumer's event source mappings (results queue, dead-letter queue)."""
    region: pulumi.Output[str]
    """AWS region of the fleet."""

    def __init__(self, name: str, args: ProbeFleetArgs, opts: pulumi.ResourceOptions | None = None):
        # Defaults filled in and checked before anything is registered.
        args = fleet_args(name, with_integers(args, ProbeFleetArgs))
        super().__init__(component_type("ProbeFleet"), name, None, component_options(opts, "mcpedge:probes:ProbeFleet"))
        region = args["region"]
        self._region = region
        self._name = name
        self._args = args
        self._topic = args["alert_topic_arn"]
        self._account_id = aws.get_caller_identity_output().account_id
        server = args["server_id"]

        quarantine = self._queue("quarantine", queue_name(server, "quarantine", region), QUARANTINE_RETENTION_S)
        redrive = quarantine.arn.apply(lambda arn: json.dumps(
            {"deadLetterTargetArn": arn, "maxReceiveCount": QUARANTINE_AFTER_RECEIVES}))
        results = self._queue("results", queue_name(server, "results", region), RESULTS_RETENTION_S, redrive)
        dead_letters = self._queue("dlq", queue_name(server, "dlq", region), DEAD_LETTER_RETENTION_S, redrive)
        aws.sqs.RedriveAllowPolicy(
            f"{name}-quarantine-allow",
            region=region,
            queue_url=quarantine.url,
            redrive_allow_policy=pulumi.Output.all(results.arn, dead_letters.arn).apply(lambda arns: json.dumps(
                {"redrivePermission": "byQueue", "sourceQueueArns": arns})),
            opts=pulumi.ResourceOptions(parent=self),
        )

        probe = self._probe_function(args, results, dead_letters)
        rounds = self._rounds(args, probe)
        schedule_group, schedules = self._schedules(args, rounds)
        consumer, mappings = self._consumer(args, results, dead_letters)
        self._alarms(dead_letters, quarantine, consumer, schedule_group, rounds)

        self.region = pulumi.Output.from_input(region)
        self.results_queue_url = results.url
        self.results_queue_arn = results.arn
        self.dead_letter_queue_url = dead_letters.url
        self.dead_letter_queue_arn = dead_letters.arn
        self.quarantine_queue_url = quarantine.url
        self.quarantine_queue_arn = quarantine.arn
        self.schedule_arns = pulumi.Output.all(*(schedule.arn for schedule in schedules))
        self.event_source_mapping_arns = pulumi.Output.all(*(mapping.arn for mapping in mappings))
        self.probe_function_arn = probe.arn
        self.consumer_function_arn = consumer.arn
        self.rounds_state_machine_arn = rounds.arn
        self.register_outputs({
            "region": self.region,
            "resultsQueueUrl": results.url,
            "deadLetterQueueUrl": dead_letters.url,
            "quarantineQueueUrl": quarantine.url,
            "probeFunctionArn": probe.arn,
            "consumerFunctionArn": consumer.arn,
            "scheduleArns": self.schedule_arns,
            "roundsStateMachineArn": rounds.arn,
            "eventSourceMappingArns": self.event_source_mapping_arns,
        })

    # --- building blocks --------------------------------------------------------------

    def _child(self, **kw: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, **kw)

    def _queue(self, suffix: str, queue_name: str, retention_s: int,
               redrive: pulumi.Input[str] | None = None) -> aws.sqs.Queue:
        return aws.sqs.Queue(
            f"{self._name}-{suffix}",
            region=self._region,
            name=queue_name,
            message_retention_seconds=retention_s,
            visibility_timeout_seconds=visibility_timeout_s(self._args["consumer_timeout_seconds"]),
            sqs_managed_sse_enabled=True,
            redrive_policy=redrive,
            opts=self._child(),
        )

    def _client_secret(self, value: pulumi.Input[str]) -> tuple[pulumi.Output[str], aws.secretsmanager.SecretVersion]:
        """The probes' client secret, created in this region from the given value."""
        credentials = self._args["credentials"]
        secret = aws.secretsmanager.Secret(
            f"{self._name}-client-secret",
            region=self._region,
            name=credentials["client_secret_name"],
            description=f"OAuth client secret of {credentials['client_id']}, the probes of {self._args['server_id']}",
            # Deleted at once on destroy, so the same stack can be created again under the same name.
            recovery_window_in_days=0,
            opts=self._child(),
        )
        version = aws.secretsmanager.SecretVersion(
            f"{self._name}-client-secret-value",
            region=self._region,
            secret_id=secret.arn,
            secret_string=pulumi.Output.secret(value),
            opts=self._child(),
        )
        return secret.arn, version

    def _probe_function(self, args: ProbeFleetArgs, results: aws.sqs.Queue,
                        dead_letters: aws.sqs.Queue) -> aws.lambda_.Function:
        region = self._region
        fn_name = physical_name(args["server_id"], "probe", limit=naming.LAMBDA_FUNCTION)
        given = args["credentials"].get("client_secret")
        secret_name = args["credentials"]["client_secret_name"]
        created: list[pulumi.Resource] = []
        secret_arn: pulumi.Output[str]
        if given is not None:
            secret_arn, version = self._client_secret(given)
            created.append(version)  # the value is there before the first probe runs
        else:
            secret_arn = self._account_id.apply(
                # Secrets Manager appends "-" and 6 random characters to a secret's ARN.
                lambda account: f"arn:aws:secretsmanager:{region}:{account}:secret:{secret_name}-??????"
            )
        environment = probe_environment(args)
        def probe_statements(a: list[str]) -> list[Statement]:
            return [
                # Lambda Destinations send with the function's role: these two queues only.
                (["sqs:SendMessage"], [a[0], a[1]]),
                # The client secret, in this region.
                (SECRET_READ_ACTIONS, [a[2]]),
                # ... and, when it exists already, the KMS key it may be encrypted with (a created one uses AWS's).
                *([client_secret_decrypt_statement(region, a[2])] if given is None else []),
            ]

        statements = pulumi.Output.all(results.arn, dead_letters.arn, secret_arn).apply(probe_statements)
        probe = regional_function(
            f"{self._name}-probe", region=region, function_name=fn_name,
            description=f"MCP probe of {args['server_id']} from {region} (one target per invocation)",
            role_description=f"Execution role of {fn_name} in {region}",
            code=zip_code(PROBE_PACKAGE, PROBE_HANDLER), memory_mb=PROBE_MEMORY_MB, timeout_s=args["timeout_seconds"],
            environment=environment, log_retention_days=args["log_retention_days"], statements=statements,
            parent=self, depends_on=created,
        )
        aws.lambda_.FunctionEventInvokeConfig(
            f"{self._name}-probe-async",
            region=region,
            function_name=probe.function.name,
            # A retried probe measures a later moment and could double-count; a stale
            # one is useless: no retries, and drop events older than 5 minutes.
            maximum_retry_attempts=0,
            maximum_event_age_in_seconds=MAX_EVENT_AGE_S,
            destination_config=aws.lambda_.FunctionEventInvokeConfigDestinationConfigArgs(
                on_success=aws.lambda_.FunctionEventInvokeConfigDestinationConfigOnSuccessArgs(destination=results.arn),
                on_failure=aws.lambda_.FunctionEventInvokeConfigDestinationConfigOnFailureArgs(
                    destination=dead_letters.arn),
            ),
            # Lambda checks the role may send to both queues when the config is saved.
            opts=self._child(depends_on=[probe.policy]),
        )
        # The origins' Function URLs take SigV4 from this role (direct targets), and from no one but the edge.
        self._origin_invoke_policy = aws.iam.RolePolicy(
            f"{self._name}-probe-origins",
            role=probe.role.id,
            policy=pulumi.Output.all(pulumi.Output.all(*args["origin_function_arns"].values()),
                                     pulumi.Output.all(*args["origin_alias_arns"].values())).apply(
                lambda a: invoke_origins_policy(a[0], a[1])),
            opts=self._child(),
        )
        return probe.function

    def _rounds(self, args: ProbeFleetArgs, probe: aws.lambda_.Function) -> aws.sfn.StateMachine:
        """The Express workflow that runs one minute's probe rounds (probe_rounds.rounds_definition):
        its role may invoke exactly the probe function and deliver its error logs."""
        region, name, server = self._region, self._name, args["server_id"]
        machine_name = physical_name(server, f"probe-rounds-{region}", limit=naming.STATE_MACHINE)
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-rounds-logs", region=region,
            # The vendedlogs prefix keeps Step Functions' log delivery off the account's
            # CloudWatch Logs resource policy (whose size is limited).
            name=f"/aws/vendedlogs/states/{machine_name}",
            retention_in_days=args["log_retention_days"], opts=self._child(),
        )
        role, policy = self._service_role(
            f"{name}-rounds", "states.amazonaws.com",
            f"Step Functions in {region}: invoke {server}-probe every round, nothing else",
            probe.arn.apply(lambda arn: allow_policy([
                (["lambda:InvokeFunction"], [arn]),
                (list(STATES_LOG_DELIVERY_ACTIONS), ["*"]),
            ])))
        events = pulumi.Output.all(*probe_events(args).values())
        definition = pulumi.Output.all(probe.arn, events).apply(
            lambda a: json.dumps(rounds_definition(a[0], a[1], args["interval_seconds"]), indent=2))
        return aws.sfn.StateMachine(
            f"{name}-rounds",
            region=region,
            name=machine_name,
            # Express: a minute's rounds cost one request and under a minute of 64 MB duration,
            # where Standard bills every state transition (probe_rounds.py has the figures).
            type="EXPRESS",
            role_arn=role.arn,
            definition=definition,
            logging_configuration=aws.sfn.StateMachineLoggingConfigurationArgs(
                level="ERROR", include_execution_data=True,
                log_destination=log_group.arn.apply(lambda arn: f"{arn}:*"),
            ),
            # The first round finds the role allowed to invoke the probe, and the probe allowed
            # to call the Function URLs.
            opts=self._child(depends_on=[policy, self._origin_invoke_policy]),
        )

    def _service_role(self, name: str, service: str, description: str,
                      policy: pulumi.Input[str]) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
        """A role only ``service`` acting for this account may assume (confused deputy), with
        its one inline policy."""
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=self._account_id.apply(lambda account: trust_policy(
                service, condition={"StringEquals": {"aws:SourceAccount": account}})),
            description=description,
            opts=self._child(),
        )
        return role, aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy, opts=self._child())

    def _schedules(self, args: ProbeFleetArgs,
                   rounds: aws.sfn.StateMachine) -> tuple[aws.scheduler.ScheduleGroup, list[aws.scheduler.Schedule]]:
        region, name, server = self._region, self._name, args["server_id"]
        group = aws.scheduler.ScheduleGroup(
            f"{name}-schedules", region=region, name=physical_name(server, "probes", limit=naming.SCHEDULE_GROUP), opts=self._child(),
        )
        role, policy = self._service_role(
            f"{name}-scheduler", "scheduler.amazonaws.com",
            f"EventBridge Scheduler in {region}: start {server}'s probe rounds, nothing else",
            rounds.arn.apply(lambda arn: allow_policy([(["states:StartExecution"], [arn])])))
        schedule = aws.scheduler.Schedule(
            f"{name}-rounds-schedule",
            region=region,
            name=physical_name(server, f"probe-rounds-{region}", limit=naming.SCHEDULE),
            group_name=group.name,
            description=f"Start a minute of probe rounds (every {args['interval_seconds']} s) from {region}",
            schedule_expression=ROUNDS_SCHEDULE,
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            state="ENABLED",
            target=aws.scheduler.ScheduleTargetArgs(
                arn=rounds.arn,
                role_arn=role.arn,
                input="{}",
                # Delivery retries within the minute only: the next minute's rounds replace a late one.
                retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(
                    maximum_event_age_in_seconds=60,
                    maximum_retry_attempts=2,
                ),
            ),
            opts=self._child(depends_on=[policy]),
        )
        return group, [schedule]

    def _consumer(self, args: ProbeFleetArgs, results: aws.sqs.Queue,
                  dead_letters: aws.sqs.Queue) -> tuple[aws.lambda_.Function, list[aws.lambda_.EventSourceMapping]]:
        region = self._region
        fn_name = physical_name(args["server_id"], "probe-consumer", limit=naming.LAMBDA_FUNCTION)
        health = args.get("health")
        store_arn = health["store_arn"] if health is not None else ""
        home_region = args.get("table_home_region") or region
        environment = pulumi.Output.all(args["table_name"], args["alert_topic_arn"], dead_letters.arn,
                                        store_arn, home_region).apply(lambda a: {
            ConsumerEnv.TABLE_NAME: a[0],
            ConsumerEnv.ALERT_TOPIC_ARN: a[1],
            ConsumerEnv.DEAD_LETTER_QUEUE_ARN: a[2],
            ConsumerEnv.ALERT_CLAIM_REGION: a[4],
            ConsumerEnv.HISTORY_TTL_DAYS: str(args["history_ttl_days"]),
            ConsumerEnv.PROBE_INTERVAL_S: str(args["interval_seconds"]),
            "POWERTOOLS_SERVICE_NAME": "probe-results",
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            **(health_environment(health, a[3], sorted(args["origin_urls"])) if health is not None else {}),
        })
        others = [r for r in health["probe_regions"] if r != region] if health is not None else []
        statements = pulumi.Output.all(
            results.arn, dead_letters.arn, args["table_arn"], args["alert_topic_arn"], args["alert_key_arn"], store_arn,
            home_region,
        ).apply(
            lambda a: [
                (["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"],
                 [a[0], a[1]]),
                # This region's replica only (TransactWriteItems needs PutItem).
                (["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                  "dynamodb:Query", "dynamodb:ConditionCheckItem"], [a[2]]),
                # Alert claims, in the home region's copy (the same copy when this is the home region).
                *([(list(ALERT_CLAIM_ACTIONS), [replica_arns(a[2], region, [a[6]])[a[6]]])] if a[6] != region else []),
                (["sns:Publish"], [a[3]]),
                # The topic is encrypted with its own key: publishing uses it.
                (["kms:GenerateDataKey*", "kms:Decrypt"], [a[4]]),
                # Region health: the stack's KeyValueStore, nothing else of CloudFront's.
                *([(list(HEALTH_STORE_ACTIONS), [a[5]])] if health is not None else []),
                # ... and the other probe regions' streaks, read where their consumers write them
                # when this one's vote would complete a change (ahead of replication).
                *([(["dynamodb:Query"], sorted(replica_arns(a[2], region, others).values()))] if others else []),
            ])
        consumer = regional_function(
            f"{self._name}-consumer", region=region, function_name=fn_name,
            description=f"Probe results of {args['server_id']} in {region}: SQS -> DynamoDB, alerts",
            role_description=f"Execution role of {fn_name} in {region}",
            code=zip_code(RESULTS_PACKAGE, RESULTS_HANDLER), memory_mb=CONSUMER_MEMORY_MB,
            timeout_s=args["consumer_timeout_seconds"], environment=environment,
            log_retention_days=args["log_retention_days"], statements=statements, parent=self,
        )
        mappings = []
        for suffix, queue in (("results", results), ("dlq", dead_letters)):
            mappings.append(aws.lambda_.EventSourceMapping(
                f"{self._name}-consumer-{suffix}",
                region=region,
                event_source_arn=queue.arn,
                function_name=consumer.function.arn,
                batch_size=BATCH_SIZE,
                maximum_batching_window_in_seconds=BATCHING_WINDOW_S,
                function_response_types=["ReportBatchItemFailures"],
                scaling_config=aws.lambda_.EventSourceMappingScalingConfigArgs(
                    maximum_concurrency=CONSUMER_MAX_CONCURRENCY),
                # Lambda checks the role may read the queue when the mapping is created.
                opts=self._child(depends_on=[consumer.policy]),
            ))
        return consumer.function, mappings

    def _alarms(self, dead_letters: aws.sqs.Queue, quarantine: aws.sqs.Queue, consumer: aws.lambda_.Function,
                schedule_group: aws.scheduler.ScheduleGroup, rounds: aws.sfn.StateMachine) -> None:
        name, region, server = self._name, self._region, self._args["server_id"]

        def alarm(suffix: str, namespace: str, metric: str, dimensions: Mapping[str, pulumi.Input[str]],
                  statistic: str, minutes: int, description: str) -> None:
            topic_alarm(f"{name}-{suffix}", region=region, alarm_name=physical_name(server, f"probes-{region}-{suffix}", limit=naming.ALARM),
                        description=description, namespace=namespace, metric=metric, statistic=statistic,
                        dimensions=dimensions, threshold=0, periods=minutes, topic_arn=self._topic,
                        opts=self._child())

        alarm("dlq-depth", "AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": dead_letters.name},
              "Maximum", DLQ_ALARM_MINUTES,
              f"Failed probe outcomes have waited in the dead-letter queue for {DLQ_ALARM_MINUTES} minutes: "
              "the results consumer is not draining it")
        alarm("quarantine-depth", "AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": quarantine.name},
              "Maximum", 1, "Messages the results consumer could not process 10 times were quarantined: read them, "
              "fix the cause, then redrive them (SQS StartMessageMoveTask)")
        alarm("consumer-errors", "AWS/Lambda", "Errors", {"FunctionName": consumer.name}, "Sum", 1,
              "The probe results consumer crashed or timed out (its batch is retried)")
        alarm("schedules-dropped", "AWS/Scheduler", "InvocationDroppedCount",
              {"ScheduleGroup": schedule_group.name}, "Sum", 1,
              "EventBridge Scheduler dropped a minute of probe rounds after its retries: probes are missing")
        alarm("rounds-failed", "AWS/States", "ExecutionsFailed", {"StateMachineArn": rounds.arn}, "Sum", 1,
              "A minute of probe rounds failed (its execution's errors are in its log group): probes are missing")
