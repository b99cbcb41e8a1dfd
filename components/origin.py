"""McpOrigin: one region's MCP origin, the official MCP SDK on Lambda behind a
streaming Function URL.

Per region: a least-privilege execution role, the log group (with retention), the
function (python3.13 on arm64 under the AWS Lambda Web Adapter layer, which turns
Function URL invocations into HTTP requests to uvicorn on a local port and streams
the response back), a published version behind the alias ``live``, provisioned
concurrency on that alias with Application Auto Scaling, the Function URL on the
alias in RESPONSE_STREAM mode with its two invoke permissions, and the alarms.

Everything regional takes ``region=`` (pulumi-aws 7): one provider serves every
region. The package is built once per program run (cached by content hash), so
every region uploads the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

import pulumi
import pulumi_aws as aws

from components.alerts import topic_alarm
from components.iam import allow_policy, trust_policy
from components.packaging import PackageSpec, build_package, source_code_hash
from mcpedge.config import PROJECT_ROOT, StackConfig
from mcpedge.constants import LIVE_ALIAS, ORIGIN_SECRET_HEADER, SERVED_REGION_HEADER

SERVER_SOURCE = PROJECT_ROOT / "functions" / "mcp_server"
# Port uvicorn listens on inside the execution environment (the adapter's default).
APP_PORT = 8080
# Answered 200 by the app without the origin secret or a token: the adapter polls it
# until the app is up, before the first invocation is passed on.
READINESS_PATH = "/healthz"
# The Web Adapter is published by AWS in this account, one layer per architecture.
LWA_LAYER_ACCOUNT = "753240598075"
LWA_LAYER_NAME = "LambdaAdapterLayerArm64"

# Started by the adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap, handler run.sh).
# The app's own packages sit at the zip root, before the runtime's, so the pinned
# versions win over anything the runtime ships.
RUN_SH = b"""#!/bin/sh
# Lambda Web Adapter entry point: start the MCP origin under uvicorn on the port
# the adapter forwards to. Configuration comes from the function's environment.
set -e
cd "${LAMBDA_TASK_ROOT:-/var/task}"
export PYTHONPATH="${LAMBDA_TASK_ROOT:-/var/task}${PYTHONPATH:+:$PYTHONPATH}"
exec python -m uvicorn mcp_server.app:app \\
  --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" \\
  --loop asyncio --http h11 --lifespan on \\
  --no-access-log --no-server-header --log-level warning \\
  --timeout-keep-alive 75
"""

SERVER_PACKAGE = PackageSpec(
    name="mcp-server",
    sources=((SERVER_SOURCE, "mcp_server/"),),
    requirements=SERVER_SOURCE / "requirements.txt",
    architecture="arm64",
    python_version="3.13",
    extra_files={"run.sh": RUN_SH},
    executables=("run.sh",),
)

# CORS on the Function URL: the headers MCP clients send and read (browser clients).
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-session-id",
    "mcp-method",
    "mcp-name",
    "last-event-id",
)
CORS_EXPOSE_HEADERS = ("mcp-session-id", "www-authenticate", SERVED_REGION_HEADER)
# POST for MCP; GET for the protected resource metadata. The stateless origin
# serves no GET stream and no session DELETE.
CORS_ALLOW_METHODS = ("GET", "POST")
CORS_MAX_AGE_S = 86400

# Alarm thresholds the issue fixes; the evaluation windows are ours.
UTILIZATION_ALARM_THRESHOLD = 0.8


def lwa_layer_arn(region: str, version: int) -> str:
    """The AWS Lambda Web Adapter layer (arm64) in ``region``: layers are regional."""
    return f"arn:aws:lambda:{region}:{LWA_LAYER_ACCOUNT}:layer:{LWA_LAYER_NAME}:{version}"


def function_name_for(server_id: str, region: str) -> str:
    # Lambda names are per region, so the same name in every region reads well in
    # the console and in alarms; at most 31 + 8 + 14 = 53 characters (limit 64).
    return f"{server_id}-origin-{region}"


def resource_server_url(config: StackConfig) -> str:
    """The protected resource's URL (RFC 9728 `resource`): the audience when it is a
    URL (the usual choice: the public MCP URL), else the custom domain's MCP URL."""
    audience = urlparse(config.auth.audience)
    if audience.scheme == "https" and audience.hostname:
        return config.auth.audience
    if config.edge.custom_domain:
        return f"https://{config.edge.custom_domain}{config.mcp_path}"
    return ""


def allowed_hosts(config: StackConfig, region: str) -> tuple[str, ...]:
    """Host header patterns the origin accepts: its own Function URL (any in the region,
    since the URL's id exists only after the function does), the distribution and the
    custom domain (in case a Host reaches the origin unchanged)."""
    hosts = [f"*.lambda-url.{region}.on.aws", "*.cloudfront.net"]
    if config.edge.custom_domain:
        hosts.append(config.edge.custom_domain)
    return tuple(hosts)


def url_host(url: str) -> str:
    host = urlparse(url).hostname
    if not host:
        raise ValueError(f"Function URL {url!r} has no host")
    return host


@dataclass(frozen=True)
class McpOriginArgs:
    config: StackConfig
    region: str
    # The header value CloudFront and the probes send; the origin refuses others.
    origin_secret: pulumi.Input[str]
    # SNS topic in the same region (alarm actions must be regional).
    alert_topic_arn: pulumi.Input[str]
    # During a rotation, the secret being retired: accepted too, so requests that
    # CloudFront (minutes to propagate) or a probe still sign with it keep working.
    origin_secret_previous: pulumi.Input[str] | None = None


class McpOrigin(pulumi.ComponentResource):
    url: pulumi.Output[str]
    host: pulumi.Output[str]
    alias_arn: pulumi.Output[str]
    function_name: pulumi.Output[str]
    region: str

    def __init__(self, name: str, args: McpOriginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mcpedge:origin:McpOrigin", name, None, opts)
        config, region = args.config, args.region
        sizing = config.origin_for(region)
        child = pulumi.ResourceOptions(parent=self)
        fn_name = function_name_for(config.server_id, region)

        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            region=region,
            name=f"/aws/lambda/{fn_name}",
            retention_in_days=config.log_retention_days,
            opts=child,
        )

        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=trust_policy("lambda.amazonaws.com"),
            description=f"Execution role of the MCP origin {fn_name}: writes its own log group, nothing else",
            opts=child,
        )
        # Least privilege: the function writes log streams in its own log group and
        # needs nothing else from AWS (no VPC, no secrets fetched at runtime). The
        # log group exists already, so no logs:CreateLogGroup.
        logs_policy = aws.iam.RolePolicy(
            f"{name}-logs-policy",
            role=role.id,
            policy=log_group.arn.apply(
                lambda arn: allow_policy([(["logs:CreateLogStream", "logs:PutLogEvents"], [f"{arn}:*"])])),
            opts=child,
        )

        package = build_package(SERVER_PACKAGE)
        environment = pulumi.Output.all(args.origin_secret, args.origin_secret_previous).apply(
            lambda secrets: {
                **self._environment(config, region),
                "ORIGIN_SECRET": secrets[0],
                **({"ORIGIN_SECRET_PREVIOUS": secrets[1]} if secrets[1] else {}),
            }
        )
        function = aws.lambda_.Function(
            f"{name}-function",
            region=region,
            name=fn_name,
            description=f"MCP origin of {config.server_id} in {region} (Lambda Web Adapter, streaming)",
            role=role.arn,
            runtime="python3.13",
            architectures=["arm64"],
            handler="run.sh",
            code=pulumi.FileArchive(str(package)),
            source_code_hash=source_code_hash(package),
            memory_size=sizing.memory_mb,
            timeout=sizing.timeout_s,
            reserved_concurrent_executions=sizing.reserved_concurrency,
            publish=True,
            layers=[lwa_layer_arn(region, config.lwa_layer_version)],
            environment=aws.lambda_.FunctionEnvironmentArgs(variables=pulumi.Output.secret(environment)),
            logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="Text", log_group=log_group.name),
            # The log group (with its retention) and the permission to write to it
            # exist before the first invocation.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group, logs_policy]),
        )

        alias = aws.lambda_.Alias(
            f"{name}-alias",
            region=region,
            name=LIVE_ALIAS,
            function_name=function.name,
            function_version=function.version,
            description="What the Function URL, provisioned concurrency and auto scaling point at",
            opts=child,
        )

        if sizing.provisioned:
            provisioned = aws.lambda_.ProvisionedConcurrencyConfig(
                f"{name}-provisioned",
                region=region,
                function_name=function.name,
                qualifier=alias.name,
                provisioned_concurrent_executions=sizing.provisioned_min,
                # Auto scaling owns the value after creation; do not fight it.
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["provisionedConcurrentExecutions"]),
            )
            target = aws.appautoscaling.Target(
                f"{name}-scaling-target",
                region=region,
                service_namespace="lambda",
                scalable_dimension="lambda:function:ProvisionedConcurrency",
                resource_id=pulumi.Output.concat("function:", function.name, ":", alias.name),
                min_capacity=sizing.provisioned_min,
                max_capacity=sizing.provisioned_max,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[provisioned]),
            )
            aws.appautoscaling.Policy(
                f"{name}-scaling-policy",
                region=region,
                policy_type="TargetTrackingScaling",
                service_namespace=target.service_namespace,
                scalable_dimension=target.scalable_dimension,
                resource_id=target.resource_id,
                target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                    target_value=config.autoscaling.utilization_target,
                    predefined_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                        predefined_metric_type="LambdaProvisionedConcurrencyUtilization",
                    ),
                    scale_in_cooldown=config.autoscaling.scale_in_cooldown_s,
                    scale_out_cooldown=config.autoscaling.scale_out_cooldown_s,
                ),
                opts=child,
            )

        function_url = aws.lambda_.FunctionUrl(
            f"{name}-url",
            region=region,
            function_name=function.name,
            qualifier=alias.name,
            # The origin authenticates every request itself (origin secret, then JWT).
            authorization_type="NONE",
            invoke_mode="RESPONSE_STREAM",
            cors=aws.lambda_.FunctionUrlCorsArgs(
                allow_origins=["*"],
                allow_methods=list(CORS_ALLOW_METHODS),
                allow_headers=list(CORS_ALLOW_HEADERS),
                expose_headers=list(CORS_EXPOSE_HEADERS),
                max_age=CORS_MAX_AGE_S,
            ),
            opts=child,
        )
        # Function URLs created since October 2025 need both permissions.
        aws.lambda_.Permission(
            f"{name}-url-invoke-url",
            region=region,
            action="lambda:InvokeFunctionUrl",
            function=function.name,
            qualifier=alias.name,
            principal="*",
            function_url_auth_type="NONE",
            opts=child,
        )
        aws.lambda_.Permission(
            f"{name}-url-invoke-function",
            region=region,
            action="lambda:InvokeFunction",
            function=function.name,
            qualifier=alias.name,
            principal="*",
            invoked_via_function_url=True,
            opts=child,
        )

        self._alarms(name, region, fn_name, function, args.alert_topic_arn, provisioned=sizing.provisioned)

        self.region = region
        self.url = function_url.function_url
        self.host = function_url.function_url.apply(url_host)
        self.alias_arn = alias.arn
        self.function_name = function.name
        self.register_outputs({
            "url": self.url,
            "host": self.host,
            "aliasArn": self.alias_arn,
            "functionName": self.function_name,
            "region": region,
        })

    @staticmethod
    def _environment(config: StackConfig, region: str) -> dict[str, str]:
        """What the app reads (functions/mcp_server/settings.py), besides the secret."""
        return {
            # The Lambda Web Adapter: wrap the runtime, stream responses, wait for
            # the app's readiness path before passing invocations on.
            "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
            "AWS_LWA_INVOKE_MODE": "response_stream",
            "AWS_LWA_PORT": str(APP_PORT),
            "AWS_LWA_READINESS_CHECK_PATH": READINESS_PATH,
            "MCP_SERVER_NAME": config.server_id,
            "MCP_PATH": config.mcp_path,
            "SERVED_REGION": region,
            "ORIGIN_SECRET_HEADER": ORIGIN_SECRET_HEADER,
            "SERVED_REGION_HEADER": SERVED_REGION_HEADER,
            "AUTH_ISSUER": config.auth.issuer,
            "AUTH_AUDIENCE": config.auth.audience,
            "AUTH_JWKS_URL": config.auth.jwks_url,
            "AUTH_ALGORITHMS": ",".join(config.auth.algorithms),
            "AUTH_LEEWAY_SECONDS": str(config.auth.leeway_s),
            "RESOURCE_SERVER_URL": resource_server_url(config),
            "ALLOWED_HOSTS": ",".join(allowed_hosts(config, region)),
        }

    def _alarms(
        self,
        name: str,
        region: str,
        fn_name: str,
        function: aws.lambda_.Function,
        topic_arn: pulumi.Input[str],
        *,
        provisioned: bool,
    ) -> None:
        child = pulumi.ResourceOptions(parent=self)
        on_function = {"FunctionName": function.name}
        on_alias = {"FunctionName": function.name, "Resource": pulumi.Output.concat(function.name, ":", LIVE_ALIAS)}

        def alarm(suffix: str, metric: str, statistic: str, threshold: float, dimensions: dict, *,
                  periods: int = 1, description: str) -> None:
            topic_alarm(f"{name}-{suffix}", region=region, alarm_name=f"{fn_name}-{suffix}", description=description,
                        namespace="AWS/Lambda", metric=metric, statistic=statistic, dimensions=dimensions,
                        threshold=threshold, periods=periods, topic_arn=topic_arn, opts=child)

        if provisioned:
            alarm("spillover", "ProvisionedConcurrencySpilloverInvocations", "Sum", 0, on_alias,
                  description=f"{fn_name}:{LIVE_ALIAS} served invocations beyond its provisioned concurrency "
                              "(cold starts): auto scaling is behind or at its maximum")
            alarm("utilization", "ProvisionedConcurrencyUtilization", "Maximum", UTILIZATION_ALARM_THRESHOLD,
                  on_alias, periods=5,
                  description=f"{fn_name}:{LIVE_ALIAS} used over 80% of its provisioned concurrency for 5 minutes")
        alarm("throttles", "Throttles", "Sum", 0, on_function,
              description=f"{fn_name} was throttled: reserved concurrency is exhausted")
        alarm("errors", "Errors", "Sum", 0, on_function,
              description=f"{fn_name} failed invocations (crashes, timeouts, adapter errors)")
