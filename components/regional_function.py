"""Regional Lambda functions: the resources every one of them needs, in one place (as
``edge_function.py`` is for Lambda@Edge).

``regional_function(...)`` creates, in the function's region:

- its log group ``/aws/lambda/<function name>`` with the given retention (``<name>-logs``):
  left to Lambda it would be created on first use and never expire;
- its execution role, trusted by ``lambda.amazonaws.com`` only (``<name>-role``);
- the role's one inline policy (``<name>-policy`` unless named otherwise): write log
  streams in that log group (it exists, so no ``logs:CreateLogGroup``) plus the
  function's own statements, nothing else;
- the function (``<name>-function``), logging to that group, created after the group
  and the policy, so its first invocation can log.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.iam import Statement, allow_policy, trust_policy
from components.lambda_package import PackageSpec, build_package, source_code_hash

RUNTIME = "python3.13"
ARCHITECTURE = "arm64"
LOG_WRITE_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")

# (actions, resources[, condition]), as components.iam.allow_policy takes them.
Statements = Sequence[Statement]


@dataclass(frozen=True)
class RegionalFunction:
    """A regional function and what was created for it."""

    function: aws.lambda_.Function
    role: aws.iam.Role
    policy: aws.iam.RolePolicy
    """What a resource Lambda checks the role's permissions on (an event source mapping, an
    async invoke config's destinations) must depend on."""
    log_group: aws.cloudwatch.LogGroup


def execution_policy(log_group_arn: str, statements: Statements) -> str:
    """The role's policy: write its own log group's streams, then ``statements``."""
    return allow_policy([(list(LOG_WRITE_ACTIONS), [f"{log_group_arn}:*"]), *statements])


def zip_code(package: PackageSpec, handler: str, *, runtime: str = RUNTIME,
             layers: Sequence[pulumi.Input[str]] = ()) -> dict[str, Any]:
    """The function's code args for a zip package, built now (cached by content); its hash
    goes with it, so an unchanged package shows no diff."""
    path = build_package(package)
    return {
        "runtime": runtime,
        "handler": handler,
        "code": pulumi.FileArchive(str(path)),
        "source_code_hash": source_code_hash(path),
        **({"layers": list(layers)} if layers else {}),
    }


def regional_function(
    name: str,
    *,
    region: str,
    function_name: str,
    description: str,
    role_description: str,
    code: Mapping[str, Any],
    memory_mb: int,
    timeout_s: int,
    environment: pulumi.Input[Mapping[str, pulumi.Input[str]]],
    log_retention_days: int,
    statements: pulumi.Input[Statements],
    parent: pulumi.Resource,
    policy_name: str | None = None,
    depends_on: Sequence[pulumi.Resource] = (),
    architecture: str = ARCHITECTURE,
    **function_args: Any,
) -> RegionalFunction:
    """The log group, role, policy and function (see the module docstring), children of
    ``parent``. ``code`` is the function's code args (``zip_code(...)``, or an image's
    ``package_type``/``image_uri``); ``function_args`` are any further Function args;
    the function waits for ``depends_on`` too."""
    child = pulumi.ResourceOptions(parent=parent)
    log_group = aws.cloudwatch.LogGroup(
        f"{name}-logs", region=region, name=f"/aws/lambda/{function_name}",
        retention_in_days=log_retention_days, opts=child,
    )
    role = aws.iam.Role(
        f"{name}-role", assume_role_policy=trust_policy("lambda.amazonaws.com"),
        description=role_description, opts=child,
    )
    policy = aws.iam.RolePolicy(
        policy_name or f"{name}-policy",
        role=role.id,
        policy=pulumi.Output.all(log_group.arn, statements).apply(lambda a: execution_policy(a[0], a[1])),
        opts=child,
    )
    function = aws.lambda_.Function(
        f"{name}-function",
        region=region,
        name=function_name,
        description=description,
        role=role.arn,
        architectures=[architecture],
        **code,
        memory_size=memory_mb,
        timeout=timeout_s,
        environment=aws.lambda_.FunctionEnvironmentArgs(variables=environment),
        logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="Text", log_group=log_group.name),
        **function_args,
        # The log group (with its retention) and the permission to write to it exist
        # before the first invocation.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[log_group, policy, *depends_on]),
    )
    return RegionalFunction(function=function, role=role, policy=policy, log_group=log_group)
