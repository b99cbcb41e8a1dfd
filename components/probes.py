"""The probes: ``ProbeResults`` (one global table) and ``ProbeFleet`` (one per probe region).

A fleet, in its region:

- the probe Lambda (python3.13, arm64, httpx only), invoked asynchronously by one
  EventBridge Scheduler schedule per target, whose input names the target: the public
  edge URL pinned to each origin region (region-pin header) and every regional
  Function URL directly (with the origin secret, read from the function's encrypted
  environment, never from the schedule input, which Scheduler stores in plain text);
- its async invoke config: 0 retries, 300 s maximum event age, OnSuccess to the
  results queue, OnFailure to the dead-letter queue (its role may send to those two
  queues and write its own logs, nothing else);
- the two queues (SSE-SQS; results kept 7 days, dead letters 14) and a quarantine
  queue both redrive to, so a message the consumer can never parse stops cycling
  but is kept (14 days) and alarmed on;
- the results consumer (Powertools batch processing) with an event source mapping
  on each queue (``ReportBatchItemFailures``, 1 s batching window, maximum
  concurrency 2), writing to this region's replica of the results table;
- alarms to the region's alert topic: dead-letter queue depth, quarantine depth,
  consumer errors, dropped schedule invocations.

The results table is one DynamoDB global table (``ProbeResults``), created in the
first probe region with a replica in every other probe region: each consumer writes
to its own region, and every region can read every outcome. Streams
(NEW_AND_OLD_IMAGES) are on because global tables replicate through them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws

from components.alerts import topic_alarm
from components.iam import allow_policy, trust_policy
from components.packaging import PackageSpec, build_package, source_code_hash
from mcpedge.config import PROJECT_ROOT, StackConfig
from mcpedge.constants import ORIGIN_SECRET_HEADER, REGION_PIN_HEADER, SERVED_REGION_HEADER

FUNCTIONS = PROJECT_ROOT / "functions"
PROBE_PACKAGE = PackageSpec(
    name="probe",
    sources=((FUNCTIONS / "probe", "probe/"),),
    requirements=FUNCTIONS / "probe" / "requirements.txt",
    architecture="arm64",
    python_version="3.13",
)
RESULTS_PACKAGE = PackageSpec(
    name="probe-results",
    sources=((FUNCTIONS / "results", "results/"),),
    requirements=FUNCTIONS / "results" / "requirements.txt",
    architecture="arm64",
    python_version="3.13",
)
PROBE_HANDLER = "probe.handler.handler"
RESULTS_HANDLER = "results.handler.handler"
PROBE_MEMORY_MB = 256  # I/O bound; 256 MB buys enough CPU for TLS handshakes
CONSUMER_MEMORY_MB = 256
METRICS_NAMESPACE = "McpEdge/Probes"

# Destination records and queues (the numbers, and the AWS rule for visibility).
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

# Results table layout (functions/results/store.py reads and writes it).
TABLE_HASH_KEY = "pk"
TABLE_RANGE_KEY = "sk"
TABLE_TTL_ATTRIBUTE = "expiresAt"


def results_table_name(server_id: str) -> str:
    return f"{server_id}-probe-results"


def visibility_timeout_s(consumer_timeout_s: int) -> int:
    """At least 6x the consumer's timeout (AWS's rule for SQS event sources), plus the
    batching window a message may wait in before the function even starts."""
    return 6 * consumer_timeout_s + BATCHING_WINDOW_S


def schedule_rate(minutes: int) -> str:
    return f"rate({minutes} minute{'s' if minutes != 1 else ''})"




# --- the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResultsArgs:
    config: StackConfig


class ProbeResults(pulumi.ComponentResource):
    """The results table: a global table in the first probe region, replicated to the others."""

    name: pulumi.Output[str]
    arn: pulumi.Output[str]
    home_region: str

    def __init__(self, name: str, args: ProbeResultsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mcpedge:probes:ProbeResults", name, None, opts)
        regions = args.config.probes.regions
        self.home_region = regions[0]
        table = aws.dynamodb.Table(
            f"{name}-table",
            region=self.home_region,
            name=results_table_name(args.config.server_id),
            billing_mode="PAY_PER_REQUEST",
            hash_key=TABLE_HASH_KEY,
            range_key=TABLE_RANGE_KEY,
            attributes=[
                aws.dynamodb.TableAttributeArgs(name=TABLE_HASH_KEY, type="S"),
                aws.dynamodb.TableAttributeArgs(name=TABLE_RANGE_KEY, type="S"),
            ],
            ttl=aws.dynamodb.TableTtlArgs(attribute_name=TABLE_TTL_ATTRIBUTE, enabled=True),
            # Global tables replicate through the stream; on even with one region, so
            # adding a probe region later only adds a replica.
            stream_enabled=True,
            stream_view_type="NEW_AND_OLD_IMAGES",
            point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=True),
            replicas=[aws.dynamodb.TableReplicaArgs(region_name=r, point_in_time_recovery=True) for r in regions[1:]],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.name = table.name
        self.arn = table.arn
        self.register_outputs({"name": table.name, "arn": table.arn, "homeRegion": self.home_region})

    def arn_in(self, region: str) -> pulumi.Output[str]:
        """The ARN of the replica in ``region`` (same name, that region in the ARN)."""
        home = self.home_region
        return self.arn.apply(lambda arn: arn.replace(f":{home}:", f":{region}:", 1))


# --- one region's fleet ---------------------------------------------------------------


@dataclass(frozen=True)
class ProbeFleetArgs:
    config: StackConfig
    region: str
    # The public MCP URL (https://<public host><mcp path>).
    edge_mcp_url: pulumi.Input[str]
    # Origin region -> its Function URL (with trailing slash).
    origin_urls: Mapping[str, pulumi.Input[str]]
    origin_secret: pulumi.Input[str]
    table_name: pulumi.Input[str]
    # The table's ARN in this region (this region's replica).
    table_arn: pulumi.Input[str]
    # SNS topic in this region, and the KMS key it is encrypted with (publishers
    # need to use the key).
    alert_topic_arn: pulumi.Input[str]
    alert_key_arn: pulumi.Input[str]


def probe_event(config: StackConfig, target: str, region: str, url: str) -> dict[str, Any]:
    """The schedule input for one target (``functions/probe/event.py`` validates it)."""
    return {
        "endpoint": url if target == "edge" else url.rstrip("/") + config.mcp_path,
        "serverId": config.server_id,
        "target": target,
        "targetRegion": region,
        "pinRegion": region if target == "edge" else None,
        "needsOriginSecret": target == "origin",
    }


def probe_events(config: StackConfig, edge_mcp_url: pulumi.Input[str],
                 origin_urls: Mapping[str, pulumi.Input[str]]) -> dict[str, pulumi.Output[dict[str, Any]]]:
    """Schedule name suffix -> probe event: the edge pinned to each origin region, then
    each origin's Function URL."""
    events: dict[str, pulumi.Output[dict[str, Any]]] = {}
    for region in config.regions:
        events[f"edge-{region}"] = pulumi.Output.from_input(edge_mcp_url).apply(
            partial(probe_event, config, "edge", region))
    for region in config.regions:
        events[f"origin-{region}"] = pulumi.Output.from_input(origin_urls[region]).apply(
            partial(probe_event, config, "origin", region))
    return events


def probe_environment(config: StackConfig, origin_secret: str) -> dict[str, str]:
    """What functions/probe/handler.py reads."""
    return {
        "PROBE_DEADLINE_S": str(config.probes.deadline_s),
        "PROBE_DEGRADED_LATENCY_MS": str(config.probes.degraded_latency_ms),
        "TOKEN_URL": config.auth.token_url,
        "CLIENT_ID": config.auth.probe_client_id,
        "CLIENT_SECRET_NAME": config.auth.probe_client_secret_name,
        "TOKEN_AUDIENCE": config.auth.audience,
        "ORIGIN_SECRET": origin_secret,
        "ORIGIN_SECRET_HEADER": ORIGIN_SECRET_HEADER,
        "REGION_PIN_HEADER": REGION_PIN_HEADER,
        "SERVED_REGION_HEADER": SERVED_REGION_HEADER,
    }


class ProbeFleet(pulumi.ComponentResource):
    results_queue_url: pulumi.Output[str]
    results_queue_arn: pulumi.Output[str]
    dead_letter_queue_url: pulumi.Output[str]
    dead_letter_queue_arn: pulumi.Output[str]
    quarantine_queue_url: pulumi.Output[str]
    probe_function_arn: pulumi.Output[str]
    consumer_function_arn: pulumi.Output[str]
    region: str

    def __init__(self, name: str, args: ProbeFleetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mcpedge:probes:ProbeFleet", name, None, opts)
        config, region = args.config, args.region
        missing = [r for r in config.regions if r not in args.origin_urls]
        if missing:
            raise ValueError(f"ProbeFleet {name}: no Function URL for origin region(s) {', '.join(missing)}")
        self.region = region
        self._name = name
        self._config = config
        self._topic = args.alert_topic_arn
        self._account_id = aws.get_caller_identity_output().account_id
        server = config.server_id

        quarantine = self._queue("quarantine", f"{server}-probe-quarantine-{region}", QUARANTINE_RETENTION_S)
        redrive = quarantine.arn.apply(lambda arn: json.dumps(
            {"deadLetterTargetArn": arn, "maxReceiveCount": QUARANTINE_AFTER_RECEIVES}))
        results = self._queue("results", f"{server}-probe-results-{region}", RESULTS_RETENTION_S, redrive)
        dead_letters = self._queue("dlq", f"{server}-probe-dlq-{region}", DEAD_LETTER_RETENTION_S, redrive)
        aws.sqs.RedriveAllowPolicy(
            f"{name}-quarantine-allow",
            region=region,
            queue_url=quarantine.url,
            redrive_allow_policy=pulumi.Output.all(results.arn, dead_letters.arn).apply(lambda arns: json.dumps(
                {"redrivePermission": "byQueue", "sourceQueueArns": arns})),
            opts=pulumi.ResourceOptions(parent=self),
        )

        probe = self._probe_function(args, results, dead_letters)
        schedule_group = self._schedules(args, probe)
        consumer = self._consumer(args, results, dead_letters)
        self._alarms(dead_letters, quarantine, consumer, schedule_group)

        self.results_queue_url = results.url
        self.results_queue_arn = results.arn
        self.dead_letter_queue_url = dead_letters.url
        self.dead_letter_queue_arn = dead_letters.arn
        self.quarantine_queue_url = quarantine.url
        self.probe_function_arn = probe.arn
        self.consumer_function_arn = consumer.arn
        self.register_outputs({
            "region": region,
            "resultsQueueUrl": results.url,
            "deadLetterQueueUrl": dead_letters.url,
            "quarantineQueueUrl": quarantine.url,
            "probeFunctionArn": probe.arn,
            "consumerFunctionArn": consumer.arn,
        })

    # --- building blocks --------------------------------------------------------------

    def _child(self, **kw: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, **kw)

    def _queue(self, suffix: str, queue_name: str, retention_s: int,
               redrive: pulumi.Input[str] | None = None) -> aws.sqs.Queue:
        return aws.sqs.Queue(
            f"{self._name}-{suffix}",
            region=self.region,
            name=queue_name,
            message_retention_seconds=retention_s,
            visibility_timeout_seconds=visibility_timeout_s(self._config.probes.consumer_timeout_s),
            sqs_managed_sse_enabled=True,
            redrive_policy=redrive,
            opts=self._child(),
        )

    def _function(self, suffix: str, function_name: str, description: str, package: PackageSpec, handler: str, *,
                  timeout_s: int, memory_mb: int, environment: pulumi.Input[dict[str, str]],
                  statements: pulumi.Input[Sequence[tuple[Sequence[str], Sequence[str]]]]) -> tuple[aws.lambda_.Function, aws.iam.RolePolicy]:
        """Log group, role (its own logs plus ``statements``), and the function."""
        name, region = f"{self._name}-{suffix}", self.region
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", region=region, name=f"/aws/lambda/{function_name}",
            retention_in_days=self._config.log_retention_days, opts=self._child(),
        )
        role = aws.iam.Role(
            f"{name}-role", assume_role_policy=trust_policy("lambda.amazonaws.com"),
            description=f"Execution role of {function_name} in {region}", opts=self._child(),
        )
        policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.id,
            policy=pulumi.Output.all(log_group.arn, statements).apply(lambda a: allow_policy([
                (["logs:CreateLogStream", "logs:PutLogEvents"], [f"{a[0]}:*"]), *a[1],
            ])),
            opts=self._child(),
        )
        path = build_package(package)
        function = aws.lambda_.Function(
            f"{name}-function",
            region=region,
            name=function_name,
            description=description,
            role=role.arn,
            runtime="python3.13",
            architectures=["arm64"],
            handler=handler,
            code=pulumi.FileArchive(str(path)),
            source_code_hash=source_code_hash(path),
            memory_size=memory_mb,
            timeout=timeout_s,
            environment=aws.lambda_.FunctionEnvironmentArgs(variables=environment),
            logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="Text", log_group=log_group.name),
            opts=self._child(depends_on=[log_group, policy]),
        )
        return function, policy

    def _probe_function(self, args: ProbeFleetArgs, results: aws.sqs.Queue,
                        dead_letters: aws.sqs.Queue) -> aws.lambda_.Function:
        config, region = self._config, self.region
        fn_name = f"{config.server_id}-probe"
        secret_arn = self._account_id.apply(
            # Secrets Manager appends "-" and 6 random characters to a secret's ARN.
            lambda account: f"arn:aws:secretsmanager:{region}:{account}:secret:{config.auth.probe_client_secret_name}-??????"
        )
        # The origin secret makes the whole environment a secret in the state.
        environment: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
            pulumi.Output.from_input(args.origin_secret).apply(partial(probe_environment, config)))
        statements = pulumi.Output.all(results.arn, dead_letters.arn, secret_arn).apply(lambda a: [
            # Lambda Destinations send with the function's role: these two queues only.
            (["sqs:SendMessage"], [a[0], a[1]]),
            (["secretsmanager:GetSecretValue"], [a[2]]),
        ])
        probe, policy = self._function(
            "probe", fn_name, f"MCP probe of {config.server_id} from {region} (one target per invocation)",
            PROBE_PACKAGE, PROBE_HANDLER, timeout_s=config.probes.timeout_s, memory_mb=PROBE_MEMORY_MB,
            environment=environment, statements=statements,
        )
        aws.lambda_.FunctionEventInvokeConfig(
            f"{self._name}-probe-async",
            region=region,
            function_name=probe.name,
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
            opts=self._child(depends_on=[policy]),
        )
        return probe

    def _schedules(self, args: ProbeFleetArgs, probe: aws.lambda_.Function) -> aws.scheduler.ScheduleGroup:
        config, region, name = self._config, self.region, self._name
        group = aws.scheduler.ScheduleGroup(
            f"{name}-schedules", region=region, name=f"{config.server_id}-probes", opts=self._child(),
        )
        role = aws.iam.Role(
            f"{name}-scheduler-role",
            assume_role_policy=self._account_id.apply(lambda account: trust_policy(
                "scheduler.amazonaws.com", condition={"StringEquals": {"aws:SourceAccount": account}})),
            description=f"EventBridge Scheduler in {region}: invoke {config.server_id}-probe, nothing else",
            opts=self._child(),
        )
        policy = aws.iam.RolePolicy(
            f"{name}-scheduler-policy",
            role=role.id,
            policy=probe.arn.apply(lambda arn: allow_policy([(["lambda:InvokeFunction"], [arn])])),
            opts=self._child(),
        )
        for suffix, event in probe_events(config, args.edge_mcp_url, args.origin_urls).items():
            aws.scheduler.Schedule(
                f"{name}-{suffix}",
                region=region,
                name=f"{config.server_id}-{suffix}",
                group_name=group.name,
                description=f"Probe {suffix.replace('-', ' ', 1)} from {region}",
                schedule_expression=schedule_rate(config.probes.rate_minutes),
                flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
                state="ENABLED",
                target=aws.scheduler.ScheduleTargetArgs(
                    arn=probe.arn,
                    role_arn=role.arn,
                    input=pulumi.Output.json_dumps(event),
                    # Delivery retries within one period only: a later probe replaces a late one.
                    retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(
                        maximum_event_age_in_seconds=max(60, 60 * config.probes.rate_minutes),
                        maximum_retry_attempts=2,
                    ),
                ),
                opts=self._child(depends_on=[policy]),
            )
        return group

    def _consumer(self, args: ProbeFleetArgs, results: aws.sqs.Queue,
                  dead_letters: aws.sqs.Queue) -> aws.lambda_.Function:
        config, region = self._config, self.region
        fn_name = f"{config.server_id}-probe-consumer"
        environment = pulumi.Output.all(args.table_name, args.alert_topic_arn, dead_letters.arn).apply(lambda a: {
            "TABLE_NAME": a[0],
            "ALERT_TOPIC_ARN": a[1],
            "DEAD_LETTER_QUEUE_ARN": a[2],
            "HISTORY_TTL_DAYS": str(config.probes.history_ttl_days),
            "PROBE_RATE_MINUTES": str(config.probes.rate_minutes),
            "POWERTOOLS_SERVICE_NAME": "probe-results",
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
        })
        statements = pulumi.Output.all(
            results.arn, dead_letters.arn, args.table_arn, args.alert_topic_arn, args.alert_key_arn
        ).apply(
            lambda a: [
                (["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"],
                 [a[0], a[1]]),
                # This region's replica only (TransactWriteItems needs PutItem).
                (["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                  "dynamodb:Query", "dynamodb:ConditionCheckItem"], [a[2]]),
                (["sns:Publish"], [a[3]]),
                # The topic is encrypted with its own key: publishing uses it.
                (["kms:GenerateDataKey*", "kms:Decrypt"], [a[4]]),
            ])
        consumer, policy = self._function(
            "consumer", fn_name, f"Probe results of {config.server_id} in {region}: SQS -> DynamoDB, alerts",
            RESULTS_PACKAGE, RESULTS_HANDLER, timeout_s=config.probes.consumer_timeout_s,
            memory_mb=CONSUMER_MEMORY_MB, environment=environment, statements=statements,
        )
        for suffix, queue in (("results", results), ("dlq", dead_letters)):
            aws.lambda_.EventSourceMapping(
                f"{self._name}-consumer-{suffix}",
                region=region,
                event_source_arn=queue.arn,
                function_name=consumer.arn,
                batch_size=BATCH_SIZE,
                maximum_batching_window_in_seconds=BATCHING_WINDOW_S,
                function_response_types=["ReportBatchItemFailures"],
                scaling_config=aws.lambda_.EventSourceMappingScalingConfigArgs(
                    maximum_concurrency=CONSUMER_MAX_CONCURRENCY),
                # Lambda checks the role may read the queue when the mapping is created.
                opts=self._child(depends_on=[policy]),
            )
        return consumer

    def _alarms(self, dead_letters: aws.sqs.Queue, quarantine: aws.sqs.Queue,
                consumer: aws.lambda_.Function, schedule_group: aws.scheduler.ScheduleGroup) -> None:
        name, region, server = self._name, self.region, self._config.server_id

        def alarm(suffix: str, namespace: str, metric: str, dimensions: Mapping[str, pulumi.Input[str]],
                  statistic: str, minutes: int, description: str) -> None:
            topic_alarm(f"{name}-{suffix}", region=region, alarm_name=f"{server}-probes-{region}-{suffix}",
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
              "EventBridge Scheduler dropped probe invocations after its retries: probes are missing")
