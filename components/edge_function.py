"""Lambda@Edge functions: every deploy-time rule in one place (like CDK's ``EdgeFunction``).

``edge_function(...)`` creates a Lambda@Edge function that follows them, and the
contract checks (``review/``) import the same constants instead of restating them:

- created in us-east-1 (``EDGE_REGION``), whatever region the stack's origins are in;
- x86_64 only (``ARCHITECTURE``); a Python 3 or Node.js managed runtime (``RUNTIME_PATTERN``);
- published (``publish=True``): CloudFront takes a numbered version (``qualified_arn``),
  never ``$LATEST`` or an alias;
- its role trusted by both ``lambda.amazonaws.com`` and ``edgelambda.amazonaws.com``
  (``TRUSTED_SERVICES``), allowed to write the replicas' logs (created by CloudFront in
  whichever region ran the replica, as ``/aws/lambda/us-east-1.<name>``);
- no environment variables (configuration is rendered into the code), no layers, no VPC,
  no provisioned concurrency, no container image, at most ``MAX_EPHEMERAL_STORAGE_MB``;
- timeout, memory and package size within the event type's quotas (``EVENT_LIMITS``);
- its replicas' log groups created beforehand, with the stack's retention, in every region
  with a CloudFront regional edge cache (``REPLICA_LOG_REGIONS``): left to Lambda@Edge they
  would be created on first use and never expire; and so is the function's own log group in
  us-east-1 (``/aws/lambda/<name>``, where an invocation of the function itself logs: a test
  invoke, the console), which Lambda would otherwise create without retention;
- ``skip_destroy=True``: CloudFront deletes replicas hours after the distribution lets
  go, and deleting the function fails until then, so a destroy leaves it behind
  (``aws lambda delete-function --region us-east-1 --function-name <name>`` later).

Sources: https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/lambda-at-edge-function-restrictions.html
and https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cloudfront-limits.html#limits-lambda-at-edge
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws

from components.iam import allow_policy, trust_policy
from components.lambda_package import PackageSpec
from edge.regions import EDGE_CONTROL_REGION

EDGE_REGION = EDGE_CONTROL_REGION
ARCHITECTURE = "x86_64"
RUNTIME_PATTERN = re.compile(r"python3\.\d+|nodejs\d+\.x")
TRUSTED_SERVICES = ("lambda.amazonaws.com", "edgelambda.amazonaws.com")
MAX_EPHEMERAL_STORAGE_MB = 512
# Where CloudFront runs Lambda@Edge replicas: the AWS Regions with a regional edge cache
# (origin-request triggers run there). AWS publishes no list of regions for Lambda@Edge; these
# are the regional edge caches on CloudFront's locations page, by region code. A region added
# later gets its log group from Lambda@Edge itself (docs/architecture.md, Destroy, expires it).
REPLICA_LOG_REGIONS = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-northeast-1", "ap-northeast-2",
    "ap-southeast-1", "ap-southeast-2", "eu-central-1", "eu-west-1", "eu-west-2", "sa-east-1",
)


@dataclass(frozen=True)
class EventLimits:
    """Lambda@Edge quotas for one CloudFront event type."""

    timeout_s: int
    memory_mb: int
    package_bytes: int  # compressed


EVENT_LIMITS: Mapping[str, EventLimits] = {
    "viewer-request": EventLimits(5, 128, 1 * 1024 * 1024),
    "viewer-response": EventLimits(5, 128, 1 * 1024 * 1024),
    "origin-request": EventLimits(30, 10240, 50 * 1024 * 1024),
    "origin-response": EventLimits(30, 10240, 50 * 1024 * 1024),
}


def replica_log_group_name(function_name: str) -> str:
    """The log group a replica writes to, in whichever region it ran (us-east-1 included)."""
    return f"/aws/lambda/{EDGE_REGION}.{function_name}"


def function_log_group_name(function_name: str) -> str:
    """The log group of the function itself (an invocation in us-east-1 that is no replica)."""
    return f"/aws/lambda/{function_name}"


def replica_logs_policy(account_id: str, function_name: str) -> str:
    """What the role needs to write its replicas' logs: CloudFront runs them in every region,
    each logging to ``/aws/lambda/us-east-1.<name>`` there (hence ``*``)."""
    return allow_policy([(
        ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        [
            f"arn:aws:logs:*:{account_id}:log-group:/aws/lambda/{EDGE_REGION}.{function_name}",
            f"arn:aws:logs:*:{account_id}:log-group:/aws/lambda/{EDGE_REGION}.{function_name}:*",
            f"arn:aws:logs:{EDGE_REGION}:{account_id}:log-group:/aws/lambda/{function_name}",
            f"arn:aws:logs:{EDGE_REGION}:{account_id}:log-group:/aws/lambda/{function_name}:*",
        ],
    )])


def edge_package_spec(name: str, files: Mapping[str, str], python_version: str = "3.13",
                      requirements: Path | None = None) -> PackageSpec:
    """A Lambda@Edge package of generated files (rendered code) and, when ``requirements``
    names a requirements file, its manylinux x86_64 wheels for CPython ``python_version``."""
    return PackageSpec(
        name=name,
        extra_files={arcname: text.encode("utf-8") for arcname, text in files.items()},
        requirements=requirements,
        architecture=ARCHITECTURE,
        python_version=python_version,
    )


def check_edge_function(function_name: str, *, runtime: str, event_type: str, memory_mb: int, timeout_s: int) -> None:
    """Refuse, before any resource exists, what Lambda@Edge would refuse at association time."""
    problems = []
    if not RUNTIME_PATTERN.fullmatch(runtime):
        problems.append(f"runtime {runtime!r} is not a Python 3 or Node.js managed runtime")
    limits = EVENT_LIMITS.get(event_type)
    if limits is None:
        problems.append(f"event type {event_type!r} is none of {', '.join(EVENT_LIMITS)}")
    else:
        if not 1 <= timeout_s <= limits.timeout_s:
            problems.append(f"timeout {timeout_s} s is outside 1-{limits.timeout_s} s ({event_type})")
        if not 128 <= memory_mb <= limits.memory_mb:
            problems.append(f"memory {memory_mb} MB is outside 128-{limits.memory_mb} MB ({event_type})")
    if problems:
        raise ValueError(f"Lambda@Edge function {function_name}: " + "; ".join(problems))


def edge_function(
    resource_name: str,
    *,
    function_name: str,
    purpose: str,
    description: str,
    runtime: str,
    handler: str,
    code: pulumi.Input[pulumi.Archive],
    event_type: str,
    memory_mb: int,
    timeout_s: int,
    parent: pulumi.Resource,
    log_retention_days: int = 30,
    role_policies: Mapping[str, pulumi.Input[str]] | None = None,
) -> aws.lambda_.Function:
    """A Lambda@Edge function by the rules above: its role (``<resource_name>-role``), the
    role's replica-logs policy (``<resource_name>-logs``), its replicas' log groups with
    ``log_retention_days`` (``<resource_name>-logs-<region>``), its own log group in us-east-1
    with the same retention (``<resource_name>-function-logs``) and the published function.
    ``role_policies`` (suffix -> policy document) are further inline policies of the role
    (``<resource_name>-<suffix>``), for what the function's code calls."""
    check_edge_function(function_name, runtime=runtime, event_type=event_type, memory_mb=memory_mb,
                        timeout_s=timeout_s)
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        f"{resource_name}-role",
        assume_role_policy=trust_policy(*TRUSTED_SERVICES),
        description=(f"Lambda@Edge {purpose} {function_name}: writes its replicas' logs"
                     + (f", and {', '.join(role_policies)}" if role_policies else ", nothing else")),
        opts=child,
    )
    account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent)).account_id
    aws.iam.RolePolicy(
        f"{resource_name}-logs",
        role=role.id,
        policy=account_id.apply(lambda account: replica_logs_policy(account, function_name)),
        opts=child,
    )
    extra = [aws.iam.RolePolicy(f"{resource_name}-{suffix}", role=role.id, policy=policy, opts=child)
             for suffix, policy in (role_policies or {}).items()]
    replica_logs = [
        aws.cloudwatch.LogGroup(
            f"{resource_name}-logs-{region}",
            region=region,
            name=replica_log_group_name(function_name),
            retention_in_days=log_retention_days,
            opts=child,
        )
        for region in REPLICA_LOG_REGIONS
    ]
    own_logs = aws.cloudwatch.LogGroup(
        f"{resource_name}-function-logs",
        region=EDGE_REGION,
        name=function_log_group_name(function_name),
        retention_in_days=log_retention_days,
        opts=child,
    )
    return aws.lambda_.Function(
        resource_name,
        region=EDGE_REGION,
        name=function_name,
        description=description,
        role=role.arn,
        runtime=runtime,
        architectures=[ARCHITECTURE],
        handler=handler,
        code=code,
        memory_size=memory_mb,
        timeout=timeout_s,
        publish=True,  # CloudFront takes a numbered version, never $LATEST
        # Replicas outlive the distribution by hours; see the module docstring.
        skip_destroy=True,
        # The log groups exist (with their retention) before any replica can log.
        # Its role's policies too: a published version must not run before it may do its work.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*replica_logs, own_logs, *extra]),
    )
