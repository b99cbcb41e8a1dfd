"""Contract checks: every constrained input the program sets, checked against AWS's own
API models (the service models botocore ships), plus the rules AWS enforces only at
deploy time (Lambda@Edge) and the rules that span resources.

    .venv/bin/python -m review.contracts --stack prod [--variant one-region] [--all-variants]

Three kinds of checks, all run on a mock run of the real program:

- ``INPUT_CONTRACTS``: a pulumi-aws input (resource type + input path) mapped, by an
  explicit table, to the API member it becomes (service, shape, member). The enum,
  numeric range, length and pattern come from the botocore model; where the model has
  no constraint (CloudFront timeouts are bare integers, SQS attributes are strings),
  AWS's documented limit is encoded with its citation.
- ``RULES`` ``edge.*``: Lambda@Edge and CloudFront Function restrictions that the API
  accepts but CloudFront rejects when the function is associated (us-east-1, x86_64,
  numbered version, no environment/layers/VPC, trust principals, size and time limits).
- ``RULES`` of the other families: cross-resource rules (queue visibility >= 6x the
  consumer's timeout, provisioned <= reserved concurrency, Function URL permissions,
  destinations the role can write to, ...).

Every check reports how many resources and values it ran on, so that a check whose
resource the program does not create (yet) shows as "not run", never as verified.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.loaders
import botocore.model

from components.edge_function import (
    ARCHITECTURE,
    EDGE_REGION,
    EVENT_LIMITS,
    MAX_EPHEMERAL_STORAGE_MB,
    RUNTIME_PATTERN,
    TRUSTED_SERVICES,
)
from mcpedge.config import PROJECT_ROOT
from mcpedge.mock_program import ProgramRun, Resource, run_program
from review.resources import get_path, output, plain
from review.variants import VARIANTS

# --- constraints --------------------------------------------------------------------


@dataclass(frozen=True)
class Constraint:
    """What AWS accepts for one value. ``items`` constrains each element of a list."""

    source: str
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    max_bytes: int | None = None
    pattern: str | None = None
    kind: str | None = None  # "integer", "number", "string", "boolean", "list"
    items: Constraint | None = None
    # A documented rule the model cannot express: (what it requires, predicate).
    rule: tuple[str, Callable[[Any], bool]] | None = None

    def problems(self, value: Any) -> list[str]:
        found: list[str] = []
        if self.kind == "list":
            if not isinstance(value, list):
                return [f"must be a list, not {value!r}"]
            self._length(len(value), "entries", found)
            if self.items is not None:
                for i, item in enumerate(value):
                    found += [f"[{i}] {p}" for p in self.items.problems(item)]
            return found
        if self.kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
            return [f"must be an integer, not {value!r}"]
        if self.kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return [f"must be a number, not {value!r}"]
        if self.kind == "string" and not isinstance(value, str):
            return [f"must be a string, not {value!r}"]
        if self.kind == "boolean" and not isinstance(value, bool):
            return [f"must be true or false, not {value!r}"]
        if self.enum is not None and value not in self.enum:
            found.append(f"{value!r} is not one of {', '.join(map(str, self.enum))}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.minimum is not None and value < self.minimum:
                found.append(f"{value} is below the minimum {_num(self.minimum)}")
            if self.maximum is not None and value > self.maximum:
                found.append(f"{value} is above the maximum {_num(self.maximum)}")
        if isinstance(value, str):
            self._length(len(value), "characters", found)
            if self.max_bytes is not None and len(value.encode()) > self.max_bytes:
                found.append(f"is {len(value.encode())} bytes, above the limit of {self.max_bytes}")
            regex = _compiled(self.pattern)
            if regex is not None and not regex.fullmatch(value):
                found.append(f"{_short(value)!r} does not match the pattern {self.pattern}")
        if self.rule is not None and not self.rule[1](value):
            found.append(f"{_short(str(value))!r}: {self.rule[0]}")
        return found

    def _length(self, length: int, unit: str, found: list[str]) -> None:
        if self.min_length is not None and length < self.min_length:
            found.append(f"has {length} {unit}, fewer than {self.min_length}")
        if self.max_length is not None and length > self.max_length:
            found.append(f"has {length} {unit}, more than {self.max_length}")

    def describe(self) -> str:
        parts = []
        if self.enum is not None:
            parts.append("one of " + ", ".join(map(str, self.enum)))
        if self.minimum is not None or self.maximum is not None:
            parts.append(f"range {_num(self.minimum)}..{_num(self.maximum)}")
        if self.min_length is not None or self.max_length is not None:
            parts.append(f"length {_num(self.min_length)}..{_num(self.max_length)}")
        if self.max_bytes is not None:
            parts.append(f"at most {self.max_bytes} bytes")
        if _compiled(self.pattern) is not None:
            parts.append(f"pattern {self.pattern}")
        if self.rule is not None:
            parts.append(self.rule[0])
        if self.items is not None:
            parts.append("each " + self.items.describe())
        return "; ".join(parts) or "no constraint"

    def constrains(self) -> bool:
        return self.describe() != "no constraint"


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


def _short(value: str) -> str:
    return value if len(value) <= 80 else value[:77] + "..."


@functools.cache
def _compiled(pattern: str | None) -> re.Pattern[str] | None:
    """AWS models write Java regexes; the few that Python cannot read are not checked
    (``describe`` then omits them, so the report never claims a pattern it skipped)."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


def merge(*constraints: Constraint | None) -> Constraint:
    """The model's constraint tightened by the documented one."""
    present = [c for c in constraints if c is not None]
    out: dict[str, Any] = {"source": " + ".join(c.source for c in present)}
    for c in present:
        for name in ("enum", "kind", "pattern", "rule", "items", "max_bytes"):
            value = getattr(c, name)
            if value is not None:
                out[name] = value
        for name, pick in (("minimum", max), ("min_length", max), ("maximum", min), ("max_length", min)):
            value = getattr(c, name)
            if value is not None:
                out[name] = value if out.get(name) is None else pick(out[name], value)
    return Constraint(**out)


# --- the botocore models ------------------------------------------------------------


@functools.cache
def service_model(service: str) -> botocore.model.ServiceModel:
    loader = botocore.loaders.create_loader()
    return botocore.model.ServiceModel(loader.load_service_model(service, "service-2"), service_name=service)


_KINDS = {"integer": "integer", "long": "integer", "float": "number", "double": "number", "string": "string",
          "boolean": "boolean", "list": "list"}


def shape_constraint(shape: botocore.model.Shape, source: str) -> Constraint:
    meta = shape.metadata
    kind = _KINDS.get(shape.type_name)
    if kind == "list":
        assert isinstance(shape, botocore.model.ListShape)
        return Constraint(
            source=source, kind="list", min_length=meta.get("min"), max_length=meta.get("max"),
            items=shape_constraint(shape.member, source),
        )
    enum = getattr(shape, "enum", None) or None
    if kind in ("integer", "number"):
        return Constraint(source=source, kind=kind, minimum=meta.get("min"), maximum=meta.get("max"))
    if kind == "string":
        return Constraint(
            source=source, kind=kind, enum=tuple(enum) if enum else None,
            min_length=meta.get("min") or None, max_length=meta.get("max"), pattern=meta.get("pattern"),
        )
    return Constraint(source=source, kind=kind)


@dataclass(frozen=True)
class ApiMember:
    service: str
    shape: str
    member: str

    def constraint(self) -> Constraint:
        model = service_model(self.service)
        parent = model.shape_for(self.shape)
        assert isinstance(parent, botocore.model.StructureShape)
        if self.member not in parent.members:
            raise KeyError(f"{self.service} model: {self.shape} has no member {self.member}")
        version = model.api_version
        source = f"botocore {self.service} {version} {self.shape}.{self.member}"
        return shape_constraint(parent.members[self.member], source)


# --- documented limits (where the model has none) -----------------------------------

CLOUDFRONT_QUOTAS = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cloudfront-limits.html"
CLOUDFRONT_TIMEOUTS = "https://repost.aws/knowledge-center/cloudfront-custom-origin-response"
SQS_ATTRIBUTES = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html"
SQS_QUEUE_NAME = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_CreateQueue.html"
LOGS_RETENTION = "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html"
ALARM_API = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html"
SNS_SUBSCRIBE = "https://docs.aws.amazon.com/sns/latest/api/API_Subscribe.html"
SNS_TOPIC = "https://docs.aws.amazon.com/sns/latest/api/API_CreateTopic.html"
LAMBDA_CREATE = "https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html"
SCHEDULE_TYPES = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html"
DYNAMODB_NAMES = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html"
IAM_QUOTAS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
EDGE_RESTRICTIONS = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/lambda-at-edge-function-restrictions.html"
EDGE_QUOTAS = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cloudfront-limits.html#limits-lambda-at-edge"
CFF_QUOTAS = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cloudfront-limits.html#limits-functions"
CFF_MAX_CODE_BYTES = 10 * 1024  # CloudFront Functions: maximum function size (CFF_QUOTAS)
CFF_RESTRICTIONS = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cloudfront-function-restrictions.html"
ALLOWED_METHODS = "https://docs.aws.amazon.com/cloudfront/latest/APIReference/API_AllowedMethods.html"
ESM_SQS = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html"
ESM_BATCHING = "https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html"
PROVISIONED = "https://docs.aws.amazon.com/lambda/latest/dg/provisioned-concurrency.html"
URL_AUTH = "https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html"
DESTINATIONS = "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html"
EXECUTION_ROLE = "https://docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html"
ALARM_ACTIONS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html"
SCHEDULER_ROLE = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role"
SCALABLE_TARGET = "https://docs.aws.amazon.com/autoscaling/application/APIReference/API_RegisterScalableTarget.html"
TARGET_TRACKING = ("https://docs.aws.amazon.com/autoscaling/application/APIReference/"
                   "API_TargetTrackingScalingPolicyConfiguration.html")
SCHEDULE_GROUPS = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-group.html"
GLOBAL_TABLES = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_reqs_bestpractices.html"
CUSTOM_DOMAIN = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cnames-and-https-requirements.html"

# PutRetentionPolicy: "Possible values are: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180,
# 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, and 3653."
RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                  3288, 3653)
SNS_PROTOCOLS = ("http", "https", "email", "email-json", "sms", "sqs", "application", "lambda", "firehose")

_RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")


def _valid_schedule_expression(value: Any) -> bool:
    """EventBridge Scheduler: rate(1 minute) (singular for 1, plural otherwise, at least
    1 minute), cron(six fields) or at(yyyy-mm-ddThh:mm:ss)."""
    if not isinstance(value, str):
        return False
    rate = _RATE.fullmatch(value)
    if rate:
        count, unit = int(rate.group(1)), rate.group(2)
        return count >= 1 and (unit.endswith("s") == (count != 1))
    if value.startswith("cron(") and value.endswith(")"):
        return len(value[5:-1].split()) == 6
    return re.fullmatch(r"at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)", value) is not None


def _valid_alarm_period(value: Any) -> bool:
    # PutMetricAlarm: "Valid values are 10, 20, 30, and any multiple of 60."
    return isinstance(value, int) and (value in (10, 20, 30) or (value >= 60 and value % 60 == 0))


def documented(url: str, **limits: Any) -> Constraint:
    return Constraint(source=url, **limits)


# --- the table: pulumi-aws input -> API member -----------------------------------------


@dataclass(frozen=True)
class InputContract:
    resource_type: str
    path: str  # pulumi-aws wire names; "a[].b" for every item of list a, "x(json).y" inside a JSON string
    api: ApiMember | None = None
    documented: Constraint | None = None
    # The program may leave it unset (AWS's default applies): then the check reports
    # "not set" instead of failing for lack of values.
    optional: bool = False
    # pulumi-aws sentinels that mean "unset" (e.g. -1 reserved concurrency).
    unset_values: tuple[Any, ...] = ()

    @property
    def id(self) -> str:
        # "aws:lambda/function:Function" + "timeout" -> "lambda/function.timeout"
        return f"{self.resource_type.split(':')[1]}.{self.path}"

    @functools.cached_property
    def constraint(self) -> Constraint:
        model = self.api.constraint() if self.api else None
        constraint = merge(model, self.documented)
        if not constraint.constrains():
            raise ValueError(f"{self.id}: neither the model nor a documented limit constrains it")
        return constraint


def _api(resource_type: str, path: str, service: str, shape: str, member: str, **kw: Any) -> InputContract:
    return InputContract(resource_type, path, ApiMember(service, shape, member), **kw)


def _doc(resource_type: str, path: str, constraint: Constraint, **kw: Any) -> InputContract:
    return InputContract(resource_type, path, None, constraint, **kw)


LAMBDA = "aws:lambda/function:Function"
ALIAS = "aws:lambda/alias:Alias"
URL = "aws:lambda/functionUrl:FunctionUrl"
PERMISSION = "aws:lambda/permission:Permission"
PROVISIONED_CONFIG = "aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig"
INVOKE_CONFIG = "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig"
ESM = "aws:lambda/eventSourceMapping:EventSourceMapping"
CF_FUNCTION = "aws:cloudfront/function:Function"
DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
ORIGIN_REQUEST_POLICY = "aws:cloudfront/originRequestPolicy:OriginRequestPolicy"
CACHE_POLICY = "aws:cloudfront/cachePolicy:CachePolicy"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
TOPIC = "aws:sns/topic:Topic"
SUBSCRIPTION = "aws:sns/topicSubscription:TopicSubscription"
SCALING_TARGET = "aws:appautoscaling/target:Target"
SCALING_POLICY = "aws:appautoscaling/policy:Policy"
SCHEDULE = "aws:scheduler/schedule:Schedule"
SCHEDULE_GROUP = "aws:scheduler/scheduleGroup:ScheduleGroup"
QUEUE = "aws:sqs/queue:Queue"
TABLE = "aws:dynamodb/table:Table"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"

_CF_TIMEOUT = "1..180 s; above 60 s may need a quota increase"
_DISTRIBUTION_BEHAVIOURS = ("defaultCacheBehavior", "orderedCacheBehaviors[]")

INPUT_CONTRACTS: tuple[InputContract, ...] = (
    # Lambda functions
    _api(LAMBDA, "runtime", "lambda", "CreateFunctionRequest", "Runtime"),
    _api(LAMBDA, "architectures", "lambda", "CreateFunctionRequest", "Architectures"),
    _api(LAMBDA, "memorySize", "lambda", "CreateFunctionRequest", "MemorySize"),
    _api(LAMBDA, "timeout", "lambda", "CreateFunctionRequest", "Timeout"),
    _api(LAMBDA, "handler", "lambda", "CreateFunctionRequest", "Handler"),
    _api(LAMBDA, "description", "lambda", "CreateFunctionRequest", "Description", optional=True),
    _api(LAMBDA, "name", "lambda", "CreateFunctionRequest", "FunctionName",
         documented=documented(LAMBDA_CREATE + " (a bare function name: at most 64 characters)", max_length=64)),
    _api(LAMBDA, "layers", "lambda", "CreateFunctionRequest", "Layers", optional=True),
    _api(LAMBDA, "reservedConcurrentExecutions", "lambda", "PutFunctionConcurrencyRequest",
         "ReservedConcurrentExecutions", optional=True, unset_values=(-1,)),
    _api(LAMBDA, "loggingConfig.logFormat", "lambda", "LoggingConfig", "LogFormat", optional=True),
    _api(LAMBDA, "loggingConfig.applicationLogLevel", "lambda", "LoggingConfig", "ApplicationLogLevel", optional=True),
    _api(LAMBDA, "loggingConfig.systemLogLevel", "lambda", "LoggingConfig", "SystemLogLevel", optional=True),
    _api(LAMBDA, "ephemeralStorage.size", "lambda", "EphemeralStorage", "Size", optional=True),
    _api(LAMBDA, "tracingConfig.mode", "lambda", "TracingConfig", "Mode", optional=True),
    _api(ALIAS, "name", "lambda", "CreateAliasRequest", "Name"),
    # Function URLs and permissions
    _api(URL, "authorizationType", "lambda", "CreateFunctionUrlConfigRequest", "AuthType"),
    _api(URL, "invokeMode", "lambda", "CreateFunctionUrlConfigRequest", "InvokeMode"),
    _api(URL, "qualifier", "lambda", "CreateFunctionUrlConfigRequest", "Qualifier", optional=True),
    _api(URL, "cors.maxAge", "lambda", "Cors", "MaxAge", optional=True),
    _api(URL, "cors.allowMethods", "lambda", "Cors", "AllowMethods", optional=True),
    _api(URL, "cors.allowHeaders", "lambda", "Cors", "AllowHeaders", optional=True),
    _api(URL, "cors.exposeHeaders", "lambda", "Cors", "ExposeHeaders", optional=True),
    _api(URL, "cors.allowOrigins", "lambda", "Cors", "AllowOrigins", optional=True),
    _api(PERMISSION, "action", "lambda", "AddPermissionRequest", "Action"),
    _api(PERMISSION, "principal", "lambda", "AddPermissionRequest", "Principal"),
    _api(PERMISSION, "functionUrlAuthType", "lambda", "AddPermissionRequest", "FunctionUrlAuthType", optional=True),
    # Concurrency
    _api(PROVISIONED_CONFIG, "provisionedConcurrentExecutions", "lambda", "PutProvisionedConcurrencyConfigRequest",
         "ProvisionedConcurrentExecutions"),
    _api(PROVISIONED_CONFIG, "qualifier", "lambda", "PutProvisionedConcurrencyConfigRequest", "Qualifier"),
    # Asynchronous invocation
    _api(INVOKE_CONFIG, "maximumEventAgeInSeconds", "lambda", "PutFunctionEventInvokeConfigRequest",
         "MaximumEventAgeInSeconds"),
    _api(INVOKE_CONFIG, "maximumRetryAttempts", "lambda", "PutFunctionEventInvokeConfigRequest",
         "MaximumRetryAttempts"),
    _api(INVOKE_CONFIG, "destinationConfig.onSuccess.destination", "lambda", "OnSuccess", "Destination",
         optional=True),
    _api(INVOKE_CONFIG, "destinationConfig.onFailure.destination", "lambda", "OnFailure", "Destination",
         optional=True),
    # Event source mappings
    _api(ESM, "batchSize", "lambda", "CreateEventSourceMappingRequest", "BatchSize"),
    _api(ESM, "maximumBatchingWindowInSeconds", "lambda", "CreateEventSourceMappingRequest",
         "MaximumBatchingWindowInSeconds", optional=True),
    _api(ESM, "functionResponseTypes", "lambda", "CreateEventSourceMappingRequest", "FunctionResponseTypes"),
    _api(ESM, "scalingConfig.maximumConcurrency", "lambda", "ScalingConfig", "MaximumConcurrency", optional=True),
    _api(ESM, "eventSourceArn", "lambda", "CreateEventSourceMappingRequest", "EventSourceArn"),
    # CloudFront Functions
    _api(CF_FUNCTION, "runtime", "cloudfront", "FunctionConfig", "Runtime"),
    _api(CF_FUNCTION, "name", "cloudfront", "CreateFunctionRequest", "Name", optional=True),
    _doc(CF_FUNCTION, "code", documented(CFF_QUOTAS + " (maximum function size 10 KB)", kind="string",
                                         min_length=1, max_bytes=CFF_MAX_CODE_BYTES)),
    # CloudFront distribution
    _api(DISTRIBUTION, "priceClass", "cloudfront", "DistributionConfig", "PriceClass"),
    _api(DISTRIBUTION, "httpVersion", "cloudfront", "DistributionConfig", "HttpVersion"),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originProtocolPolicy", "cloudfront", "CustomOriginConfig",
         "OriginProtocolPolicy"),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originSslProtocols", "cloudfront", "OriginSslProtocols", "Items"),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originReadTimeout", "cloudfront", "CustomOriginConfig",
         "OriginReadTimeout", documented=documented(f"{CLOUDFRONT_TIMEOUTS} ({_CF_TIMEOUT})", minimum=1, maximum=180)),
    _api(DISTRIBUTION, "origins[].customOriginConfig.originKeepaliveTimeout", "cloudfront", "CustomOriginConfig",
         "OriginKeepaliveTimeout",
         documented=documented(f"{CLOUDFRONT_TIMEOUTS} ({_CF_TIMEOUT})", minimum=1, maximum=180)),
    _api(DISTRIBUTION, "origins[].connectionAttempts", "cloudfront", "Origin", "ConnectionAttempts",
         documented=documented(CLOUDFRONT_QUOTAS + " (connection attempts per origin 1-3)", minimum=1, maximum=3),
         optional=True),
    _api(DISTRIBUTION, "origins[].connectionTimeout", "cloudfront", "Origin", "ConnectionTimeout",
         documented=documented(CLOUDFRONT_QUOTAS + " (connection timeout per origin 1-10 s)", minimum=1, maximum=10),
         optional=True),
    _api(DISTRIBUTION, "defaultCacheBehavior.viewerProtocolPolicy", "cloudfront", "DefaultCacheBehavior",
         "ViewerProtocolPolicy"),
    _api(DISTRIBUTION, "orderedCacheBehaviors[].viewerProtocolPolicy", "cloudfront", "CacheBehavior",
         "ViewerProtocolPolicy", optional=True),
    *(
        contract
        for behaviour in _DISTRIBUTION_BEHAVIOURS
        for contract in (
            _api(DISTRIBUTION, f"{behaviour}.allowedMethods", "cloudfront", "AllowedMethods", "Items",
                 optional=behaviour != "defaultCacheBehavior"),
            _api(DISTRIBUTION, f"{behaviour}.cachedMethods", "cloudfront", "CachedMethods", "Items",
                 optional=behaviour != "defaultCacheBehavior"),
            _api(DISTRIBUTION, f"{behaviour}.functionAssociations[].eventType", "cloudfront", "FunctionAssociation",
                 "EventType", optional=behaviour != "defaultCacheBehavior"),
            _api(DISTRIBUTION, f"{behaviour}.lambdaFunctionAssociations[].eventType", "cloudfront",
                 "LambdaFunctionAssociation", "EventType", optional=behaviour != "defaultCacheBehavior"),
        )
    ),
    _api(DISTRIBUTION, "viewerCertificate.minimumProtocolVersion", "cloudfront", "ViewerCertificate",
         "MinimumProtocolVersion", optional=True),
    _api(DISTRIBUTION, "viewerCertificate.sslSupportMethod", "cloudfront", "ViewerCertificate", "SSLSupportMethod",
         optional=True),
    _doc(DISTRIBUTION, "aliases", documented(CLOUDFRONT_QUOTAS + " (alternate domain names per distribution: 100)",
                                             kind="list", max_length=100), optional=True),
    _api(ORIGIN_REQUEST_POLICY, "headersConfig.headerBehavior", "cloudfront", "OriginRequestPolicyHeadersConfig",
         "HeaderBehavior"),
    _api(ORIGIN_REQUEST_POLICY, "cookiesConfig.cookieBehavior", "cloudfront", "OriginRequestPolicyCookiesConfig",
         "CookieBehavior"),
    _api(ORIGIN_REQUEST_POLICY, "queryStringsConfig.queryStringBehavior", "cloudfront",
         "OriginRequestPolicyQueryStringsConfig", "QueryStringBehavior"),
    _api(CACHE_POLICY, "parametersInCacheKeyAndForwardedToOrigin.headersConfig.headerBehavior", "cloudfront",
         "CachePolicyHeadersConfig", "HeaderBehavior", optional=True),
    # CloudWatch
    _api(ALARM, "comparisonOperator", "cloudwatch", "PutMetricAlarmInput", "ComparisonOperator"),
    _api(ALARM, "statistic", "cloudwatch", "PutMetricAlarmInput", "Statistic", optional=True),
    _api(ALARM, "period", "cloudwatch", "PutMetricAlarmInput", "Period",
         documented=Constraint(source=ALARM_API, rule=("periods are 10, 20, 30 or a multiple of 60 seconds",
                                                       _valid_alarm_period)), optional=True),
    _api(ALARM, "evaluationPeriods", "cloudwatch", "PutMetricAlarmInput", "EvaluationPeriods"),
    _api(ALARM, "datapointsToAlarm", "cloudwatch", "PutMetricAlarmInput", "DatapointsToAlarm", optional=True),
    _api(ALARM, "treatMissingData", "cloudwatch", "PutMetricAlarmInput", "TreatMissingData",
         documented=documented(ALARM_API, enum=("breaching", "notBreaching", "ignore", "missing")), optional=True),
    _api(ALARM, "namespace", "cloudwatch", "PutMetricAlarmInput", "Namespace", optional=True),
    _api(ALARM, "metricName", "cloudwatch", "PutMetricAlarmInput", "MetricName", optional=True),
    _api(ALARM, "name", "cloudwatch", "PutMetricAlarmInput", "AlarmName", optional=True),
    _api(ALARM, "alarmDescription", "cloudwatch", "PutMetricAlarmInput", "AlarmDescription", optional=True),
    _api(ALARM, "alarmActions", "cloudwatch", "PutMetricAlarmInput", "AlarmActions", optional=True),
    _api(ALARM, "okActions", "cloudwatch", "PutMetricAlarmInput", "OKActions", optional=True),
    _api(ALARM, "unit", "cloudwatch", "PutMetricAlarmInput", "Unit", optional=True),
    _api(LOG_GROUP, "retentionInDays", "logs", "PutRetentionPolicyRequest", "retentionInDays",
         documented=documented(LOGS_RETENTION, enum=RETENTION_DAYS)),
    _api(LOG_GROUP, "name", "logs", "CreateLogGroupRequest", "logGroupName", optional=True),
    _api(LOG_GROUP, "logGroupClass", "logs", "CreateLogGroupRequest", "logGroupClass", optional=True),
    # SNS
    _doc(TOPIC, "name", documented(SNS_TOPIC + " (1-256 letters, digits, - and _)", kind="string", min_length=1,
                                   max_length=256, pattern=r"[A-Za-z0-9_-]+(\.fifo)?"), optional=True),
    _api(SUBSCRIPTION, "protocol", "sns", "SubscribeInput", "Protocol",
         documented=documented(SNS_SUBSCRIBE, enum=SNS_PROTOCOLS)),
    # Application Auto Scaling
    _api(SCALING_TARGET, "scalableDimension", "application-autoscaling", "RegisterScalableTargetRequest",
         "ScalableDimension"),
    _api(SCALING_TARGET, "serviceNamespace", "application-autoscaling", "RegisterScalableTargetRequest",
         "ServiceNamespace"),
    _api(SCALING_TARGET, "minCapacity", "application-autoscaling", "RegisterScalableTargetRequest", "MinCapacity",
         documented=documented(SCALABLE_TARGET + " (capacities are integers, at least 0)", minimum=0)),
    _api(SCALING_TARGET, "maxCapacity", "application-autoscaling", "RegisterScalableTargetRequest", "MaxCapacity",
         documented=documented(SCALABLE_TARGET + " (capacities are integers, at least 0)", minimum=0)),
    _api(SCALING_TARGET, "resourceId", "application-autoscaling", "RegisterScalableTargetRequest", "ResourceId"),
    _api(SCALING_POLICY, "policyType", "application-autoscaling", "PutScalingPolicyRequest", "PolicyType"),
    _api(SCALING_POLICY, "scalableDimension", "application-autoscaling", "PutScalingPolicyRequest",
         "ScalableDimension"),
    _api(SCALING_POLICY, "serviceNamespace", "application-autoscaling", "PutScalingPolicyRequest", "ServiceNamespace"),
    _api(SCALING_POLICY, "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType",
         "application-autoscaling", "PredefinedMetricSpecification", "PredefinedMetricType"),
    _api(SCALING_POLICY, "targetTrackingScalingPolicyConfiguration.scaleInCooldown", "application-autoscaling",
         "TargetTrackingScalingPolicyConfiguration", "ScaleInCooldown", optional=True,
         documented=documented(TARGET_TRACKING + " (cooldowns are whole seconds, at least 0)", minimum=0)),
    _api(SCALING_POLICY, "targetTrackingScalingPolicyConfiguration.scaleOutCooldown", "application-autoscaling",
         "TargetTrackingScalingPolicyConfiguration", "ScaleOutCooldown", optional=True,
         documented=documented(TARGET_TRACKING + " (cooldowns are whole seconds, at least 0)", minimum=0)),
    # EventBridge Scheduler
    _api(SCHEDULE, "state", "scheduler", "CreateScheduleInput", "State", optional=True),
    _api(SCHEDULE, "flexibleTimeWindow.mode", "scheduler", "FlexibleTimeWindow", "Mode"),
    _api(SCHEDULE, "flexibleTimeWindow.maximumWindowInMinutes", "scheduler", "FlexibleTimeWindow",
         "MaximumWindowInMinutes", optional=True),
    _api(SCHEDULE, "scheduleExpression", "scheduler", "CreateScheduleInput", "ScheduleExpression",
         documented=Constraint(source=SCHEDULE_TYPES, rule=(
             "must be rate(N unit) (singular unit for 1, at least 1 minute), cron(6 fields) or at(...)",
             _valid_schedule_expression))),
    _api(SCHEDULE, "name", "scheduler", "CreateScheduleInput", "Name", optional=True),
    _api(SCHEDULE, "groupName", "scheduler", "CreateScheduleInput", "GroupName", optional=True),
    _api(SCHEDULE, "target.retryPolicy.maximumRetryAttempts", "scheduler", "RetryPolicy", "MaximumRetryAttempts",
         optional=True),
    _api(SCHEDULE, "target.retryPolicy.maximumEventAgeInSeconds", "scheduler", "RetryPolicy",
         "MaximumEventAgeInSeconds", optional=True),
    _api(SCHEDULE, "target.input", "scheduler", "Target", "Input", optional=True),
    # SQS: every attribute is a string in the model; the limits are documented.
    _doc(QUEUE, "visibilityTimeoutSeconds", documented(SQS_ATTRIBUTES + " (VisibilityTimeout 0-43200 s)",
                                                       kind="integer", minimum=0, maximum=43200)),
    _doc(QUEUE, "messageRetentionSeconds", documented(SQS_ATTRIBUTES + " (MessageRetentionPeriod 60-1209600 s)",
                                                      kind="integer", minimum=60, maximum=1209600), optional=True),
    _doc(QUEUE, "delaySeconds", documented(SQS_ATTRIBUTES + " (DelaySeconds 0-900 s)", kind="integer", minimum=0,
                                           maximum=900), optional=True),
    _doc(QUEUE, "maxMessageSize", documented(SQS_ATTRIBUTES + " (MaximumMessageSize 1024-1048576 bytes)",
                                             kind="integer", minimum=1024, maximum=1048576), optional=True),
    _doc(QUEUE, "receiveWaitTimeSeconds", documented(SQS_ATTRIBUTES + " (ReceiveMessageWaitTimeSeconds 0-20 s)",
                                                     kind="integer", minimum=0, maximum=20), optional=True),
    _doc(QUEUE, "kmsDataKeyReusePeriodSeconds", documented(SQS_ATTRIBUTES + " (KmsDataKeyReusePeriodSeconds 60-86400)",
                                                           kind="integer", minimum=60, maximum=86400), optional=True),
    _doc(QUEUE, "redrivePolicy(json).maxReceiveCount", documented(SQS_ATTRIBUTES + " (maxReceiveCount 1-1000)",
                                                                  kind="integer", minimum=1, maximum=1000),
         optional=True),
    _doc(QUEUE, "name", documented(SQS_QUEUE_NAME + " (up to 80 letters, digits, - and _; .fifo for FIFO)",
                                   kind="string", min_length=1, max_length=80, pattern=r"[A-Za-z0-9_-]+(\.fifo)?"),
         optional=True),
    # DynamoDB
    _api(TABLE, "billingMode", "dynamodb", "CreateTableInput", "BillingMode", optional=True),
    _api(TABLE, "attributes[].type", "dynamodb", "AttributeDefinition", "AttributeType"),
    _api(TABLE, "hashKey", "dynamodb", "KeySchemaElement", "AttributeName"),
    _api(TABLE, "rangeKey", "dynamodb", "KeySchemaElement", "AttributeName", optional=True),
    _api(TABLE, "streamViewType", "dynamodb", "StreamSpecification", "StreamViewType", optional=True),
    _api(TABLE, "ttl.attributeName", "dynamodb", "TimeToLiveSpecification", "AttributeName", optional=True),
    _doc(TABLE, "name", documented(DYNAMODB_NAMES + " (3-255 characters: a-z, A-Z, 0-9, _ - .)", kind="string",
                                   min_length=3, max_length=255, pattern=r"[a-zA-Z0-9_.-]+"), optional=True),
    # IAM
    _api(ROLE, "name", "iam", "CreateRoleRequest", "RoleName", optional=True),
    _api(ROLE, "assumeRolePolicy", "iam", "CreateRoleRequest", "AssumeRolePolicyDocument",
         documented=documented(IAM_QUOTAS + " (role trust policy length 2048 characters)", max_length=2048)),
    _api(ROLE_POLICY, "policy", "iam", "PutRolePolicyRequest", "PolicyDocument",
         documented=documented(IAM_QUOTAS + " (inline role policies: 10240 characters in total)", max_length=10240)),
    _api(ROLE_POLICY, "name", "iam", "PutRolePolicyRequest", "PolicyName", optional=True),
    _api(POLICY, "policy", "iam", "CreatePolicyRequest", "PolicyDocument",
         documented=documented(IAM_QUOTAS + " (managed policy size 6144 characters)", max_length=6144)),
)


@dataclass
class CheckResult:
    """One check on one run: how many resources and values it saw, what was wrong."""

    id: str
    kind: str  # "input", "edge", "cross"
    description: str
    source: str
    resources: int = 0
    values: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.problems:
            return "FAIL"
        if self.values:
            return "ok"
        return "not set" if self.resources else "no resource"


def check_input(contract: InputContract, run: ProgramRun) -> CheckResult:
    constraint = contract.constraint
    resources = run.of_type(contract.resource_type)
    result = CheckResult(contract.id, "input", constraint.describe(), constraint.source, resources=len(resources))
    for resource in sorted(resources, key=lambda r: r.name):
        for where, value in _values_at(resource.inputs, contract.path):
            if value in contract.unset_values and not isinstance(value, bool):
                continue
            result.values += 1
            result.problems += [f"{resource.name}: {where} {p}" for p in constraint.problems(value)]
    return result


def _values_at(inputs: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """``get_path`` plus ``x(json).y``: descend into a JSON document held in a string."""
    head, sep, rest = path.partition("(json).")
    found = get_path(inputs, head)
    if not sep:
        return found
    out: list[tuple[str, Any]] = []
    for where, text in found:
        try:
            document = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            out.append((where, text))  # not JSON: the constraint reports the type
            continue
        if isinstance(document, dict):
            out += [(f"{where}(json).{w}", v) for w, v in get_path(document, rest)]
    return out


# --- the resource graph, for rules that span resources --------------------------------


def parse_lambda_ref(ref: str, default_region: str) -> tuple[str, str, str | None]:
    """(region, function name, qualifier) of a function name, partial or full ARN."""
    if ref.startswith("arn:"):
        parts = ref.split(":")
        if len(parts) < 7 or parts[5] != "function":
            return default_region, ref, None
        return parts[3], parts[6], parts[7] if len(parts) > 7 else None
    name, _, qualifier = ref.partition(":")
    return default_region, name, qualifier or None


class Graph:
    """Indexes of one run: functions by name, queues and roles by ARN, role policies."""

    def __init__(self, run: ProgramRun):
        self.run = run
        self.functions = {(r.region, output(r, "name")): r for r in run.of_type(LAMBDA)}
        self.by_arn: dict[str, Resource] = {}
        for r in run.resources:
            arn = output(r, "arn")
            if isinstance(arn, str):
                self.by_arn[arn] = r
        self.roles = run.of_type(ROLE)

    def function(self, ref: Any, region: str) -> tuple[Resource | None, str | None]:
        if not isinstance(ref, str):
            return None, None
        fn_region, name, qualifier = parse_lambda_ref(ref, region)
        return self.functions.get((fn_region, name)), qualifier

    def role_of(self, function: Resource) -> Resource | None:
        arn = plain(function.inputs.get("role"))
        found = self.by_arn.get(arn) if isinstance(arn, str) else None
        return found if found is not None and found.type == ROLE else None

    def statements(self, role: Resource) -> list[dict[str, Any]]:
        """Identity-policy statements of a role: inline, attached and role-level."""
        documents: list[Any] = []
        names = {output(role, "name"), role.id, output(role, "arn")}
        for policy in self.run.of_type(ROLE_POLICY):
            if plain(policy.inputs.get("role")) in names:
                documents.append(plain(policy.inputs.get("policy")))
        for attachment in self.run.of_type(ATTACHMENT):
            if plain(attachment.inputs.get("role")) in names:
                documents.append(self._policy_document(plain(attachment.inputs.get("policyArn"))))
        for inline in plain(role.inputs.get("inlinePolicies")) or []:
            documents.append(inline.get("policy"))
        for arn in plain(role.inputs.get("managedPolicyArns")) or []:
            documents.append(self._policy_document(arn))
        return [s for d in documents for s in _statements(d)]

    def _policy_document(self, arn: Any) -> Any:
        if arn in MANAGED_POLICIES:
            return MANAGED_POLICIES[arn]
        policy = self.by_arn.get(arn) if isinstance(arn, str) else None
        return plain(policy.inputs.get("policy")) if policy is not None else None


# AWS managed policies the program may attach, with the statements that matter here.
MANAGED_POLICIES: dict[str, dict[str, Any]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {"Statement": [
        {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "*"}]},
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": {"Statement": [
        {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                                       "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "*"}]},
}


def _statements(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    if not isinstance(document, dict):
        return []
    statements = document.get("Statement") or []
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _matches(patterns: Any, value: str, *, case: bool) -> bool:
    for pattern in _as_list(patterns):
        if not isinstance(pattern, str):
            continue
        if fnmatch.fnmatchcase(value if case else value.lower(), pattern if case else pattern.lower()):
            return True
    return False


def allows(statements: Iterable[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether identity statements allow ``action`` on ``resource`` (explicit Deny wins;
    NotAction/NotResource statements grant nothing here; conditions are assumed met)."""
    allowed = False
    for statement in statements:
        if "NotAction" in statement or "NotResource" in statement:
            continue
        hit = _matches(statement.get("Action"), action, case=False) and _matches(
            statement.get("Resource"), resource, case=True
        )
        if hit and statement.get("Effect") == "Deny":
            return False
        allowed = allowed or (hit and statement.get("Effect") == "Allow")
    return allowed


def trusted_services(role: Resource) -> set[str]:
    """Service principals the role's trust policy lets assume it."""
    services: set[str] = set()
    for statement in _statements(plain(role.inputs.get("assumeRolePolicy"))):
        if statement.get("Effect") != "Allow" or not _matches(statement.get("Action"), "sts:AssumeRole", case=False):
            continue
        principal = statement.get("Principal")
        if isinstance(principal, dict):
            services.update(str(s) for s in _as_list(principal.get("Service")))
    return services


# --- rules --------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # "edge" or "cross"
    description: str
    source: str
    check: Callable[[Graph, CheckResult], None]


RULES: list[Rule] = []


def rule(rule_id: str, description: str, source: str) -> Callable[
    [Callable[[Graph, CheckResult], None]], Callable[[Graph, CheckResult], None]
]:
    """Register a rule; ``edge.*`` rules are deploy-time edge restrictions, the others
    span resources."""

    def register(fn: Callable[[Graph, CheckResult], None]) -> Callable[[Graph, CheckResult], None]:
        kind = "edge" if rule_id.startswith("edge.") else "cross"
        RULES.append(Rule(rule_id, kind, description, source, fn))
        return fn

    return register


@dataclass(frozen=True)
class EdgeAssociation:
    distribution: Resource
    where: str
    event_type: str
    arn: str


def _behaviours(distribution: Resource) -> list[tuple[str, dict[str, Any]]]:
    inputs = plain(distribution.inputs)
    found = []
    if isinstance(inputs.get("defaultCacheBehavior"), dict):
        found.append(("defaultCacheBehavior", inputs["defaultCacheBehavior"]))
    for i, behaviour in enumerate(inputs.get("orderedCacheBehaviors") or []):
        found.append((f"orderedCacheBehaviors[{i}]", behaviour))
    return found


def lambda_associations(graph: Graph) -> list[EdgeAssociation]:
    return [
        EdgeAssociation(d, f"{where}.lambdaFunctionAssociations[{i}]", str(a.get("eventType")), str(a.get("lambdaArn")))
        for d in graph.run.of_type(DISTRIBUTION)
        for where, behaviour in _behaviours(d)
        for i, a in enumerate(behaviour.get("lambdaFunctionAssociations") or [])
    ]


def function_associations(graph: Graph) -> list[EdgeAssociation]:
    return [
        EdgeAssociation(d, f"{where}.functionAssociations[{i}]", str(a.get("eventType")), str(a.get("functionArn")))
        for d in graph.run.of_type(DISTRIBUTION)
        for where, behaviour in _behaviours(d)
        for i, a in enumerate(behaviour.get("functionAssociations") or [])
    ]


def edge_functions(graph: Graph, result: CheckResult) -> list[tuple[EdgeAssociation, Resource]]:
    """Each Lambda@Edge association with the program's function it names. An association
    whose function the program does not create cannot be verified: that is a problem."""
    out = []
    for association in lambda_associations(graph):
        result.resources += 1
        _, name, _ = parse_lambda_ref(association.arn, EDGE_REGION)
        function = next((f for f in graph.run.of_type(LAMBDA) if output(f, "name") == name), None)
        if function is None:
            result.problems.append(
                f"{association.distribution.name}: {association.where} names {association.arn}, "
                f"a function this program does not create: its restrictions cannot be verified"
            )
            continue
        out.append((association, function))
    return out


def _edge_rule(rule_id: str, description: str, source: str = EDGE_RESTRICTIONS) -> Callable[
    [Callable[[EdgeAssociation, Resource, Graph], list[str]]], Callable[[EdgeAssociation, Resource, Graph], list[str]]
]:
    """A rule over every Lambda@Edge association: the function returns its problems."""

    def register(
        fn: Callable[[EdgeAssociation, Resource, Graph], list[str]],
    ) -> Callable[[EdgeAssociation, Resource, Graph], list[str]]:
        def check(graph: Graph, result: CheckResult) -> None:
            for association, function in edge_functions(graph, result):
                result.values += 1
                result.problems += [f"{function.name} ({association.event_type}): {p}" for p in fn(association, function, graph)]

        RULES.append(Rule(rule_id, "edge", description, source, check))
        return fn

    return register


@_edge_rule("edge.lambda-region", "Lambda@Edge functions are created in us-east-1 (explicit region=)")
def _edge_region(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    region = plain(function.inputs.get("region"))
    if region is None:
        return [f"has no region=; it would follow the provider's default region instead of {EDGE_REGION}"]
    return [] if region == EDGE_REGION else [f"is in {region}; Lambda@Edge functions must be in {EDGE_REGION}"]


@_edge_rule("edge.lambda-numbered-version",
            "the distribution references a published, numbered version (qualified ARN), never $LATEST or an alias")
def _edge_version(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    problems = []
    if plain(function.inputs.get("publish")) is not True:
        problems.append("publish is not true: there is no numbered version to associate")
    if not re.fullmatch(r"arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]+:\d+", association.arn):
        problems.append(f"{association.where} references {association.arn}, not a numbered version")
    elif association.arn != output(function, "qualifiedArn"):
        problems.append(f"{association.where} references {association.arn}, not the function's qualifiedArn")
    return problems


@_edge_rule("edge.lambda-architecture", f"Lambda@Edge supports {ARCHITECTURE} only")
def _edge_arch(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    architectures = plain(function.inputs.get("architectures")) or ["x86_64"]  # Lambda's default
    return [] if architectures == [ARCHITECTURE] else [f"architectures {architectures}: Lambda@Edge needs {ARCHITECTURE}"]


@_edge_rule("edge.lambda-unsupported-features",
            "no environment variables, layers, VPC, provisioned concurrency, container image, or ephemeral storage "
            f"above {MAX_EPHEMERAL_STORAGE_MB} MB")
def _edge_features(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    inputs = plain(function.inputs)
    problems = []
    if (inputs.get("environment") or {}).get("variables"):
        problems.append("has environment variables (render configuration into the code instead)")
    if inputs.get("layers"):
        problems.append("has layers")
    if (inputs.get("vpcConfig") or {}).get("subnetIds"):
        problems.append("has a VPC configuration")
    if inputs.get("packageType") == "Image" or inputs.get("imageUri"):
        problems.append("is a container image")
    if ((inputs.get("ephemeralStorage") or {}).get("size") or 512) > MAX_EPHEMERAL_STORAGE_MB:  # 512: Lambda's default
        problems.append(f"has ephemeral storage above {MAX_EPHEMERAL_STORAGE_MB} MB")
    name = output(function, "name")
    for config in graph.run.of_type(PROVISIONED_CONFIG):
        if parse_lambda_ref(str(plain(config.inputs.get("functionName"))), function.region)[1] == name:
            problems.append(f"has provisioned concurrency ({config.name})")
    return problems


@_edge_rule("edge.lambda-runtime", "Lambda@Edge runs Python 3 and Node.js managed runtimes")
def _edge_runtime(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    runtime = str(plain(function.inputs.get("runtime")))
    ok = RUNTIME_PATTERN.fullmatch(runtime) is not None
    return [] if ok else [f"runtime {runtime} is not a Python 3 or Node.js runtime"]


@_edge_rule("edge.lambda-trust", f"the execution role trusts {' and '.join(TRUSTED_SERVICES)}")
def _edge_trust(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    role = graph.role_of(function)
    if role is None:
        return [f"role {plain(function.inputs.get('role'))} is not a role this program creates: trust unverifiable"]
    missing = set(TRUSTED_SERVICES) - trusted_services(role)
    return [f"role {role.name} does not trust {', '.join(sorted(missing))}"] if missing else []


@_edge_rule("edge.lambda-limits", "timeout, memory and package size within the event type's Lambda@Edge quotas",
            EDGE_QUOTAS)
def _edge_limits(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    limits = EVENT_LIMITS.get(association.event_type)
    if limits is None:
        return [f"event type {association.event_type} is not a CloudFront event"]
    timeout_limit, memory_limit, size_limit = limits.timeout_s, limits.memory_mb, limits.package_bytes
    problems = []
    timeout = plain(function.inputs.get("timeout")) or 3
    memory = plain(function.inputs.get("memorySize")) or 128
    if timeout > timeout_limit:
        problems.append(f"timeout {timeout} s is above {timeout_limit} s")
    if memory > memory_limit:
        problems.append(f"memory {memory} MB is above {memory_limit} MB")
    path = getattr(function.inputs.get("code"), "path", None)
    if path:
        # The program runs from the project root, so relative package paths start there.
        full = Path(path) if Path(path).is_absolute() else PROJECT_ROOT / path
        if not full.is_file():
            problems.append(f"package {path} does not exist: its size cannot be checked")
        elif full.stat().st_size > size_limit:
            problems.append(f"package is {full.stat().st_size} bytes, above {size_limit}")
    return problems


@rule("edge.cloudfront-function-association",
      "CloudFront Functions: viewer events only, a published function this program creates, code within 10 KB",
      CFF_RESTRICTIONS)
def _cff_associations(graph: Graph, result: CheckResult) -> None:
    functions = {output(f, "arn"): f for f in graph.run.of_type(CF_FUNCTION)}
    for association in function_associations(graph):
        result.resources += 1
        result.values += 1
        where = f"{association.distribution.name}: {association.where}"
        if association.event_type not in ("viewer-request", "viewer-response"):
            result.problems.append(f"{where} is {association.event_type}; CloudFront Functions run on viewer events")
        function = functions.get(association.arn)
        if function is None:
            result.problems.append(f"{where} names {association.arn}, a function this program does not create")
            continue
        if plain(function.inputs.get("publish")) is False:
            result.problems.append(f"{where}: {function.name} is not published (only LIVE functions associate)")
        code = plain(function.inputs.get("code"))
        if not isinstance(code, str) or not 0 < len(code.encode()) <= CFF_MAX_CODE_BYTES:
            result.problems.append(f"{where}: {function.name} code is missing or above 10 KB")


@rule("cloudfront.allowed-methods",
      "allowed methods are one of AWS's three sets; cached methods are GET,HEAD or GET,HEAD,OPTIONS within them",
      ALLOWED_METHODS)
def _allowed_methods(graph: Graph, result: CheckResult) -> None:
    sets = ({"GET", "HEAD"}, {"GET", "HEAD", "OPTIONS"}, {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"})
    for distribution in graph.run.of_type(DISTRIBUTION):
        result.resources += 1
        for where, behaviour in _behaviours(distribution):
            allowed = set(behaviour.get("allowedMethods") or [])
            cached = set(behaviour.get("cachedMethods") or [])
            result.values += 1
            if allowed not in sets:
                result.problems.append(f"{distribution.name}: {where}.allowedMethods {sorted(allowed)} is not an AWS set")
            if cached not in sets[:2] or not cached <= allowed:
                result.problems.append(f"{distribution.name}: {where}.cachedMethods {sorted(cached)} is not allowed")


@rule("cloudfront.custom-domain-certificate",
      "aliases need an ACM certificate in us-east-1 served with SNI, not the default certificate", CUSTOM_DOMAIN)
def _custom_domain(graph: Graph, result: CheckResult) -> None:
    for distribution in graph.run.of_type(DISTRIBUTION):
        result.resources += 1
        aliases = plain(distribution.inputs.get("aliases")) or []
        if not aliases:
            continue
        result.values += 1
        certificate = plain(distribution.inputs.get("viewerCertificate")) or {}
        arn = str(certificate.get("acmCertificateArn") or "")
        if not arn.startswith(f"arn:aws:acm:{EDGE_REGION}:"):
            result.problems.append(f"{distribution.name}: aliases {aliases} need an ACM certificate in {EDGE_REGION}")
        if certificate.get("cloudfrontDefaultCertificate"):
            result.problems.append(f"{distribution.name}: aliases cannot use the default CloudFront certificate")
        if certificate.get("sslSupportMethod") != "sni-only":
            result.problems.append(f"{distribution.name}: sslSupportMethod should be sni-only (vip costs extra)")


def _sqs_mappings(graph: Graph, result: CheckResult) -> list[tuple[Resource, Resource, Resource, str]]:
    """(mapping, queue, function, queue arn) for every SQS event source mapping; a
    mapping whose queue or function the program does not create is a problem."""
    out = []
    for mapping in graph.run.of_type(ESM):
        source = plain(mapping.inputs.get("eventSourceArn"))
        if not isinstance(source, str) or ":sqs:" not in source:
            continue
        result.resources += 1
        queue = graph.by_arn.get(source)
        function, _ = graph.function(plain(mapping.inputs.get("functionName")), mapping.region)
        if queue is None or function is None:
            result.problems.append(f"{mapping.name}: its queue or function is not created by this program: unverifiable")
            continue
        out.append((mapping, queue, function, source))
    return out


@rule("sqs.visibility-6x-consumer-timeout",
      "each SQS source queue's visibility timeout is at least 6x its consumer function's timeout", ESM_SQS)
def _visibility(graph: Graph, result: CheckResult) -> None:
    for mapping, queue, function, _ in _sqs_mappings(graph, result):
        result.values += 1
        visibility = plain(queue.inputs.get("visibilityTimeoutSeconds"))
        visibility = 30 if visibility is None else visibility
        timeout = plain(function.inputs.get("timeout")) or 3
        if visibility < 6 * timeout:
            result.problems.append(
                f"{mapping.name}: queue {queue.name} visibility {visibility} s < 6 x {function.name} timeout "
                f"{timeout} s = {6 * timeout} s"
            )


@rule("sqs.batching", "batch size above 10 needs a batching window; FIFO queues take at most 10", ESM_BATCHING)
def _batching(graph: Graph, result: CheckResult) -> None:
    for mapping, queue, _, _ in _sqs_mappings(graph, result):
        result.values += 1
        size = plain(mapping.inputs.get("batchSize")) or 10
        window = plain(mapping.inputs.get("maximumBatchingWindowInSeconds")) or 0
        if size > 10 and window < 1:
            result.problems.append(f"{mapping.name}: batchSize {size} > 10 needs maximumBatchingWindowInSeconds >= 1")
        if plain(queue.inputs.get("fifoQueue")) and size > 10:
            result.problems.append(f"{mapping.name}: FIFO queue {queue.name} takes batches of at most 10")


@rule("sqs.consumer-can-receive",
      "the consumer's role may receive, delete and read attributes of its source queue", EXECUTION_ROLE)
def _consumer_permissions(graph: Graph, result: CheckResult) -> None:
    for mapping, _, function, arn in _sqs_mappings(graph, result):
        result.values += 1
        role = graph.role_of(function)
        if role is None:
            result.problems.append(f"{mapping.name}: {function.name}'s role is not created by this program")
            continue
        statements = graph.statements(role)
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
            if not allows(statements, action, arn):
                result.problems.append(f"{mapping.name}: role {role.name} does not allow {action} on {arn}")


def _reserved(function: Resource) -> int | None:
    value = plain(function.inputs.get("reservedConcurrentExecutions"))
    return None if value is None or value == -1 else int(value)


@rule("lambda.provisioned-within-reserved",
      "provisioned concurrency is on a version or alias and at most the function's reserved concurrency", PROVISIONED)
def _provisioned(graph: Graph, result: CheckResult) -> None:
    for config in graph.run.of_type(PROVISIONED_CONFIG):
        result.resources += 1
        result.values += 1
        function, _ = graph.function(plain(config.inputs.get("functionName")), config.region)
        qualifier = plain(config.inputs.get("qualifier"))
        if function is None:
            result.problems.append(f"{config.name}: its function is not created by this program: unverifiable")
            continue
        if not qualifier or qualifier == "$LATEST":
            result.problems.append(f"{config.name}: qualifier {qualifier!r}: needs a published version or alias")
        reserved = _reserved(function)
        provisioned = plain(config.inputs.get("provisionedConcurrentExecutions"))
        if reserved is None:
            result.notes.append(f"{config.name}: {function.name} has no reserved concurrency (account pool applies)")
        elif provisioned > reserved:
            result.problems.append(f"{config.name}: provisioned {provisioned} > reserved {reserved} of {function.name}")


@rule("lambda.autoscaling-within-reserved",
      "provisioned-concurrency auto scaling targets an alias of a program function, min <= max <= reserved",
      PROVISIONED)
def _autoscaling(graph: Graph, result: CheckResult) -> None:
    for target in graph.run.of_type(SCALING_TARGET):
        if plain(target.inputs.get("scalableDimension")) != "lambda:function:ProvisionedConcurrency":
            continue
        result.resources += 1
        result.values += 1
        resource_id = str(plain(target.inputs.get("resourceId")))
        match = re.fullmatch(r"function:([A-Za-z0-9_-]+):([A-Za-z0-9_$-]+)", resource_id)
        if match is None:
            result.problems.append(f"{target.name}: resourceId {resource_id!r} is not function:NAME:QUALIFIER")
            continue
        function = graph.functions.get((target.region, match.group(1)))
        if function is None:
            result.problems.append(f"{target.name}: {resource_id} is not a function of this program in {target.region}")
            continue
        low, high = plain(target.inputs.get("minCapacity")), plain(target.inputs.get("maxCapacity"))
        if low > high:
            result.problems.append(f"{target.name}: minCapacity {low} > maxCapacity {high}")
        reserved = _reserved(function)
        if reserved is not None and high > reserved:
            result.problems.append(f"{target.name}: maxCapacity {high} > reserved concurrency {reserved}")
        aliases = {
            plain(a.inputs.get("name")) for a in graph.run.of_type(ALIAS)
            if a.region == target.region and graph.function(plain(a.inputs.get("functionName")), a.region)[0] is function
        }
        if match.group(2) not in aliases and not match.group(2).isdigit():
            result.problems.append(f"{target.name}: qualifier {match.group(2)} is not an alias of {function.name}")


@rule("lambda.function-url-permissions",
      "each Function URL has lambda:InvokeFunctionUrl (with its auth type) and lambda:InvokeFunction "
      "(invoked_via_function_url) on the same function and qualifier", URL_AUTH)
def _url_permissions(graph: Graph, result: CheckResult) -> None:
    permissions = graph.run.of_type(PERMISSION)
    for url in graph.run.of_type(URL):
        result.resources += 1
        result.values += 1
        function, _ = graph.function(plain(url.inputs.get("functionName")), url.region)
        if function is None:
            result.problems.append(f"{url.name}: its function is not created by this program: unverifiable")
            continue
        qualifier = plain(url.inputs.get("qualifier"))
        auth = plain(url.inputs.get("authorizationType"))
        mine = []
        for permission in permissions:
            target, ref_qualifier = graph.function(plain(permission.inputs.get("function")), permission.region)
            if target is function and (plain(permission.inputs.get("qualifier")) or ref_qualifier) == qualifier:
                mine.append(plain(permission.inputs))
        url_perm = [p for p in mine if p.get("action") == "lambda:InvokeFunctionUrl"]
        invoke_perm = [p for p in mine if p.get("action") == "lambda:InvokeFunction" and p.get("invokedViaFunctionUrl")]
        if not any(p.get("functionUrlAuthType") == auth for p in url_perm):
            result.problems.append(f"{url.name}: no lambda:InvokeFunctionUrl permission with functionUrlAuthType {auth}")
        if not invoke_perm:
            result.problems.append(f"{url.name}: no lambda:InvokeFunction permission with invokedViaFunctionUrl")
        if auth == "NONE" and not all(p.get("principal") == "*" for p in url_perm + invoke_perm):
            result.problems.append(f"{url.name}: a public (NONE) URL needs principal '*' on both permissions")


_DESTINATION_ACTIONS = {"sqs": "sqs:SendMessage", "sns": "sns:Publish", "lambda": "lambda:InvokeFunction",
                        "events": "events:PutEvents", "s3": "s3:PutObject"}


@rule("lambda.async-destinations-writable",
      "asynchronous-invocation destinations exist in the program and the function's role may write to them",
      DESTINATIONS)
def _destinations(graph: Graph, result: CheckResult) -> None:
    for config in graph.run.of_type(INVOKE_CONFIG):
        result.resources += 1
        function, _ = graph.function(plain(config.inputs.get("functionName")), config.region)
        destinations = get_path(config.inputs, "destinationConfig.onSuccess.destination") + get_path(
            config.inputs, "destinationConfig.onFailure.destination"
        )
        if function is None:
            result.problems.append(f"{config.name}: its function is not created by this program: unverifiable")
            continue
        role = graph.role_of(function)
        for where, arn in destinations:
            result.values += 1
            service = str(arn).split(":")[2] if str(arn).startswith("arn:") else ""
            action = _DESTINATION_ACTIONS.get(service)
            if action is None:
                result.problems.append(f"{config.name}: {where} {arn} is not a destination type Lambda supports")
                continue
            if graph.by_arn.get(arn) is None:
                result.problems.append(f"{config.name}: {where} {arn} is not created by this program")
            if role is None or not allows(graph.statements(role), action, arn):
                result.problems.append(f"{config.name}: {function.name}'s role does not allow {action} on {arn}")


@rule("lambda.execution-role-trust", "every function's execution role trusts lambda.amazonaws.com", EXECUTION_ROLE)
def _execution_trust(graph: Graph, result: CheckResult) -> None:
    for function in graph.run.of_type(LAMBDA):
        result.resources += 1
        result.values += 1
        role = graph.role_of(function)
        if role is None:
            result.problems.append(f"{function.name}: role {plain(function.inputs.get('role'))} is not created here")
        elif "lambda.amazonaws.com" not in trusted_services(role):
            result.problems.append(f"{function.name}: role {role.name} does not trust lambda.amazonaws.com")


@rule("cloudwatch.alarm-actions-same-region", "alarm actions name SNS topics in the alarm's own region", ALARM_ACTIONS)
def _alarm_regions(graph: Graph, result: CheckResult) -> None:
    for alarm in graph.run.of_type(ALARM):
        result.resources += 1
        for key in ("alarmActions", "okActions", "insufficientDataActions"):
            for arn in plain(alarm.inputs.get(key)) or []:
                result.values += 1
                parts = str(arn).split(":")
                if len(parts) > 3 and parts[2] == "sns" and parts[3] != alarm.region:
                    result.problems.append(f"{alarm.name}: {key} {arn} is not in {alarm.region}")


@rule("scheduler.target-invocable",
      "each schedule's role trusts scheduler.amazonaws.com and may invoke its Lambda target", SCHEDULER_ROLE)
def _schedules(graph: Graph, result: CheckResult) -> None:
    for schedule in graph.run.of_type(SCHEDULE):
        result.resources += 1
        target = plain(schedule.inputs.get("target")) or {}
        arn, role_arn = str(target.get("arn") or ""), target.get("roleArn")
        result.values += 1
        role = graph.by_arn.get(role_arn) if isinstance(role_arn, str) else None
        if role is None or role.type != ROLE:
            result.problems.append(f"{schedule.name}: role {role_arn} is not created by this program: unverifiable")
            continue
        if "scheduler.amazonaws.com" not in trusted_services(role):
            result.problems.append(f"{schedule.name}: role {role.name} does not trust scheduler.amazonaws.com")
        if ":lambda:" in arn and not allows(graph.statements(role), "lambda:InvokeFunction", arn):
            result.problems.append(f"{schedule.name}: role {role.name} does not allow lambda:InvokeFunction on {arn}")


@rule("scheduler.group-exists", "each schedule's group is the default group or one this program creates in its region",
      SCHEDULE_GROUPS)
def _schedule_groups(graph: Graph, result: CheckResult) -> None:
    groups = {(g.region, output(g, "name")) for g in graph.run.of_type(SCHEDULE_GROUP)}
    for schedule in graph.run.of_type(SCHEDULE):
        result.resources += 1
        result.values += 1
        group = plain(schedule.inputs.get("groupName")) or "default"
        if group != "default" and (schedule.region, group) not in groups:
            result.problems.append(f"{schedule.name}: group {group} is not created by this program in {schedule.region}")


@rule("dynamodb.global-table-replicas",
      "global-table replicas are other regions, each once, and the table streams NEW_AND_OLD_IMAGES", GLOBAL_TABLES)
def _replicas(graph: Graph, result: CheckResult) -> None:
    for table in graph.run.of_type(TABLE):
        result.resources += 1
        replicas = [r.get("regionName") for r in plain(table.inputs.get("replicas")) or []]
        if not replicas:
            continue
        result.values += 1
        if table.region in replicas:
            result.problems.append(f"{table.name}: replicas include the table's own region {table.region}")
        if len(set(replicas)) != len(replicas):
            result.problems.append(f"{table.name}: a replica region is listed twice: {replicas}")
        inputs = plain(table.inputs)
        if not inputs.get("streamEnabled") or inputs.get("streamViewType") != "NEW_AND_OLD_IMAGES":
            result.problems.append(f"{table.name}: replicas need streamEnabled with streamViewType NEW_AND_OLD_IMAGES")


# Physical-name limits, checked on the name AWS will see (auto-names add 8 characters).
NAME_LIMITS = {LAMBDA: 64, ROLE: 64, QUEUE: 80, TOPIC: 256, LOG_GROUP: 512, ALARM: 255, CF_FUNCTION: 64,
               SCHEDULE: 64, TABLE: 255, POLICY: 128, ROLE_POLICY: 128}


@rule("names.physical-name-lengths", "physical names (given or auto-named) fit AWS's name length limits",
      "per-service API references (see INPUT_CONTRACTS sources)")
def _name_lengths(graph: Graph, result: CheckResult) -> None:
    for resource in graph.run.resources:
        limit = NAME_LIMITS.get(resource.type)
        if limit is None:
            continue
        result.resources += 1
        result.values += 1
        name = str(output(resource, "name") or "")
        if len(name) > limit:
            result.problems.append(f"{resource.name}: physical name {name!r} has {len(name)} characters, limit {limit}")


# --- running ------------------------------------------------------------------------


@dataclass
class ContractReport:
    label: str
    results: list[CheckResult]

    @property
    def problems(self) -> list[str]:
        return [f"[{r.id}] {p}" for r in self.results for p in r.problems]

    def result(self, check_id: str) -> CheckResult:
        return next(r for r in self.results if r.id == check_id)

    def format(self) -> str:
        width = max(len(r.id) for r in self.results)
        lines = [f"Contract checks: {self.label}", ""]
        lines.append(f"{'check':<{width}}  {'status':<11} {'resources':>9} {'values':>6}")
        for r in self.results:
            lines.append(f"{r.id:<{width}}  {r.status:<11} {r.resources:>9} {r.values:>6}")
        ran = [r for r in self.results if r.values]
        lines += ["", f"{len(ran)} of {len(self.results)} checks ran on {sum(r.values for r in ran)} values; "
                      f"{len(self.problems)} problems"]
        lines += [f"  {p}" for p in self.problems]
        notes = [n for r in self.results for n in r.notes]
        if notes:
            lines += ["notes:"] + [f"  {n}" for n in notes]
        return "\n".join(lines) + "\n"


def run_rule(rule_: Rule, graph: Graph) -> CheckResult:
    result = CheckResult(rule_.id, rule_.kind, rule_.description, rule_.source)
    rule_.check(graph, result)
    return result


def check_run(run: ProgramRun, label: str = "") -> ContractReport:
    graph = Graph(run)
    results = [check_input(c, run) for c in INPUT_CONTRACTS] + [run_rule(r, graph) for r in RULES]
    return ContractReport(label or run.stack, results)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m review.contracts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod", help="stack name: reads Pulumi.<stack>.yaml (default: prod)")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="prod",
                        help="config overrides applied to the stack file (review/variants.py)")
    parser.add_argument("--all-variants", action="store_true", help="check every variant")
    args = parser.parse_args(argv)
    names = sorted(VARIANTS) if args.all_variants else [args.variant]
    failed = False
    for name in names:
        run = run_program(args.stack, config_overrides=VARIANTS[name])
        report = check_run(run, f"stack {args.stack}, variant {name}")
        sys.stdout.write(report.format() + "\n")
        failed = failed or bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
