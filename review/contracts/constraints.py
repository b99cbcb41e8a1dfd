"""Constraint types: what an input may be (from botocore's service models or AWS's documented
limits), the resource types checked, the outcome of one check, and the rule registry."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import botocore.loaders
import botocore.model

if TYPE_CHECKING:  # for annotations only: the graph module needs none of this one
    from review.contracts.iam import Graph

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
SNAPSTART = "https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html"
IMAGES = "https://docs.aws.amazon.com/lambda/latest/dg/images-create.html"
URL_AUTH = "https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html"
DESTINATIONS = "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html"
EXECUTION_ROLE = "https://docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html"
ALARM_ACTIONS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html"
SCHEDULER_ROLE = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role"
SCALABLE_TARGET = "https://docs.aws.amazon.com/autoscaling/application/APIReference/API_RegisterScalableTarget.html"
TARGET_TRACKING = ("https://docs.aws.amazon.com/autoscaling/application/APIReference/"
                   "API_TargetTrackingScalingPolicyConfiguration.html")
SCHEDULE_GROUPS = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-group.html"
STATES_LAMBDA = "https://docs.aws.amazon.com/step-functions/latest/dg/connect-lambda.html"
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

