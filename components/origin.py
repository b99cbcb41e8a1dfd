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

import functools
import re
import shlex
from pathlib import Path
from typing import NotRequired, TypedDict
from urllib.parse import urlparse

import pulumi
import pulumi_aws as aws

import functions
from components import naming, settings
from components.alerts import topic_alarm
from components.image import IMAGE_DIGEST_PATTERN, LWA_IMAGE_TAGS, OriginImage
from components.jwt_rules import JwtRulesArgs, check_jwt_rules, jwt_algorithms, jwt_leeway_s
from components.lambda_package import PackageSpec
from components.naming import physical_name
from components.regional_function import regional_function, zip_code
from components.secrets import READ_ACTIONS as SECRET_READ_ACTIONS
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks, is_known, with_integers
from functions.contract import (
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE_S,
    SNAPSTART_HOOK_PATHS,
    OriginEnv,
)

# The MCP server this package deploys unless told otherwise: functions/mcp_server,
# found from the installed ``functions`` package (not from a working directory).
SERVER_SOURCE = Path(functions.__file__).resolve().parent.parent / "examples" / "demo"
# Port uvicorn listens on inside the execution environment (the adapter's default).
APP_PORT = 8080
# Answered 200 by the app without the origin secret or a token: the adapter polls it
# until the app is up, before the first invocation is passed on.
READINESS_PATH = "/healthz"
# The Web Adapter is published by AWS in this account, one layer per architecture.
LWA_LAYER_ACCOUNT = "753240598075"
LWA_LAYER_NAME = "LambdaAdapterLayerArm64"

# Started by the adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap, handler run.sh).
# --http httptools: uvicorn's C parser (the package ships its wheel) instead of h11's
# pure-Python one: about a fifth less per warm request (bench/origin_bench.py), most
# of it in parsing the request head, which carries a bearer token of a kilobyte or more.
def run_sh(app: str = "demo_server.app:app") -> bytes:
    """The entry point the adapter starts (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap, handler
    run.sh; an image's ENTRYPOINT). The app's own packages sit at the task root, before
    the runtime's, so the pinned versions win over anything the runtime ships."""
    return b"""#!/bin/sh
# Lambda Web Adapter entry point: start the MCP origin under uvicorn on the port
# the adapter forwards to. Configuration comes from the function's environment.
set -e
cd "${LAMBDA_TASK_ROOT:-/var/task}"
export PYTHONPATH="${LAMBDA_TASK_ROOT:-/var/task}${PYTHONPATH:+:$PYTHONPATH}"
exec python -m uvicorn %s \\
  --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" \\
  --loop asyncio --http httptools --lifespan on \\
  --no-access-log --no-server-header --log-level warning \\
  --timeout-keep-alive 75
""" % app.encode()


RUN_SH = run_sh()


def run_sh_command(script: bytes) -> list[str]:
    """The words of the command a run.sh execs (``python -m uvicorn <app> <flags>``),
    shell variables left as written."""
    text = script.decode().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.strip().startswith("exec "))
    return shlex.split(line)[1:]


def run_sh_app(script: bytes) -> str:
    """The uvicorn app a run.sh starts."""
    words = run_sh_command(script)
    if words[:3] != ["python", "-m", "uvicorn"]:
        raise ValueError(f"run.sh does not exec python -m uvicorn: {words[:4]}")
    return words[3]


def uvicorn_flags(script: bytes, *, drop: tuple[str, ...] = ("--port",)) -> tuple[str, ...]:
    """A run.sh's uvicorn flags without those named in ``drop`` (and their values): what
    whoever starts the app elsewhere (the local run, the benchmarks) sets for itself."""
    words, flags = run_sh_command(script)[4:], []
    while words:
        word = words.pop(0)
        if word in drop:
            words.pop(0)
        elif not word.startswith(tuple(f"{name}=" for name in drop)):
            flags.append(word)
    return tuple(flags)


def uvicorn_flag(script: bytes, name: str) -> str:
    """The value a run.sh gives uvicorn's flag ``name`` (``--http``: its HTTP implementation)."""
    flags = uvicorn_flags(script, drop=())
    return flags[flags.index(name) + 1]


# The Lambda alias every origin's Function URL, provisioned concurrency and
# auto scaling point at.
LIVE_ALIAS = "live"
# How an origin avoids cold starts (McpOriginArgs.cold_start, mcp-edge:originColdStart):
# settings.COLD_START, and SnapStart's minimum Web Adapter layer version.
DEFAULT_COLD_START = settings.COLD_START.default
COLD_START_MODES = settings.COLD_START.choices
SNAPSTART_MIN_LWA_LAYER_VERSION = settings.SNAPSTART_MIN_LWA_LAYER_VERSION
# Regions where Lambda has no SnapStart (AWS's SnapStart documentation).
SNAPSTART_UNAVAILABLE_REGIONS = ("ap-east-2", "ap-southeast-6")
PACKAGE_TYPES = settings.PACKAGE_TYPE.choices
# Files of the server folder that the zip never ships as they are: the image's recipe,
# and the SnapStart entry module (added back only to the SnapStart package).
SNAPSTART_MODULE = "snapstart.py"
NOT_IN_ZIP = ("Dockerfile", SNAPSTART_MODULE)

# What a server package folder must hold: run.sh starts ``mcp_server.app:app``.
SERVER_PACKAGE_FILES = ("demo_server/app.py", "requirements.txt")


@functools.cache
def server_package_spec(source: Path, cold_start: str = DEFAULT_COLD_START) -> PackageSpec:
    """The origin's Lambda package for an MCP server package folder (shipped as
    ``mcp_server/``, its requirements.txt installed for Lambda's platform). Under
    SnapStart it also ships ``mcp_server/snapstart.py`` (ours, whatever the folder
    holds) and run.sh starts that module's app, which serves the snapshot hooks."""
    # The demo serves the SnapStart hooks itself when the adapter names them (one run.sh).
    extra = {"run.sh": RUN_SH}
    return PackageSpec(
        name="mcp-server",
        sources=(source,),
        requirements=source / "requirements.txt",
        architecture="arm64",
        python_version="3.13",
        extra_files=extra,
        executables=("run.sh",),
        exclude=("Dockerfile", "README.md"),
    )


SERVER_PACKAGE = server_package_spec(SERVER_SOURCE)

# Alarm thresholds the issue fixes; the evaluation windows are ours.
UTILIZATION_ALARM_THRESHOLD = 0.8


# Defaults of McpOriginArgs (the ready-made program passes every value from its stack config).
DEFAULT_LWA_LAYER_VERSION = settings.LWA_LAYER_VERSION.default
# Each sizing arg's setting (default and bounds).
SIZING_SETTINGS = {
    "memory_mb": settings.ORIGIN_MEMORY_MB,
    "timeout_seconds": settings.ORIGIN_TIMEOUT_S,
    "reserved_concurrency": settings.ORIGIN_RESERVED_CONCURRENCY,
    "provisioned_min": settings.ORIGIN_PROVISIONED_MIN,
    "provisioned_max": settings.ORIGIN_PROVISIONED_MAX,
    "utilization_target": settings.ORIGIN_UTILIZATION_TARGET,
    "scale_in_cooldown_seconds": settings.ORIGIN_SCALE_IN_COOLDOWN_S,
    "scale_out_cooldown_seconds": settings.ORIGIN_SCALE_OUT_COOLDOWN_S,
}
DEFAULT_SIZING = {name: setting.default for name, setting in SIZING_SETTINGS.items()}


def lwa_layer_arn(region: str, version: int) -> str:
    """The AWS Lambda Web Adapter layer (arm64) in ``region``: layers are regional."""
    return f"arn:aws:lambda:{region}:{LWA_LAYER_ACCOUNT}:layer:{LWA_LAYER_NAME}:{version}"


def function_name_for(server_id: str, region: str, stack: str | None = None) -> str:
    # Lambda names are per region, so the same name in every region reads well in
    # the console and in alarms; the stack in it keeps stacks of one account apart.
    return physical_name(server_id, f"origin-{region}", limit=naming.LAMBDA_FUNCTION, stack=stack)


def resource_server_url(audience: str, custom_domain: str | None, mcp_path: str) -> str:
    """The protected resource's URL (RFC 9728 `resource`): the audience when it is a
    URL (the usual choice: the public MCP URL), else the custom domain's MCP URL."""
    parsed = urlparse(audience)
    if parsed.scheme == "https" and parsed.hostname:
        return audience
    if custom_domain:
        return f"https://{custom_domain}{mcp_path}"
    return ""


def allowed_hosts(region: str, custom_domain: str | None) -> tuple[str, ...]:
    """Host header patterns the origin accepts: its own Function URL (any in the region,
    since the URL's id exists only after the function does), the distribution and the
    custom domain (in case a Host reaches the origin unchanged)."""
    hosts = [f"*.lambda-url.{region}.on.aws", "*.cloudfront.net"]
    if custom_domain:
        hosts.append(custom_domain)
    return tuple(hosts)


def url_host(url: str) -> str:
    host = urlparse(url).hostname
    if not host:
        raise ValueError(f"Function URL {url!r} has no host")
    return host


class OriginSizingArgs(TypedDict):
    """Capacity of one region's origin function; every field has a default."""

    memory_mb: NotRequired[int]
    """Memory of the function, 128-10240 MB (default 1024)."""
    timeout_seconds: NotRequired[int]
    """Timeout of the function, 1-900 seconds (default 120)."""
    reserved_concurrency: NotRequired[int]
    """Reserved concurrency of the function; 0 reserves none (default 100)."""
    provisioned_min: NotRequired[int]
    """Minimum provisioned concurrency on the live alias; 0 turns it off (default 2)."""
    provisioned_max: NotRequired[int]
    """Maximum provisioned concurrency auto scaling may reach, at most reserved_concurrency when set (default 20)."""
    utilization_target: NotRequired[float]
    """Target provisioned-concurrency utilization for auto scaling, in (0, 1] (default 0.7)."""
    scale_in_cooldown_seconds: NotRequired[int]
    """Auto scaling scale-in cooldown, seconds (default 300)."""
    scale_out_cooldown_seconds: NotRequired[int]
    """Auto scaling scale-out cooldown, seconds (default 30)."""


class McpOriginArgs(TypedDict):
    """Inputs of one region's MCP origin.

    ``server_package``: a folder like ``functions/mcp_server`` (a copy with your own
    ``tools.py``): its ``app.py`` defines the ASGI ``app`` that ``run.sh`` starts, its
    ``requirements.txt`` the dependencies installed for Lambda. A relative path is taken
    from the working directory of the program.
    """

    region: str
    """AWS region of the origin."""
    server_id: str
    """Name of the MCP server: prefixes the function's name, reported by the server."""
    auth: JwtRulesArgs
    """The token rules the server enforces on every MCP request."""
    jwks_url: str
    """https URL of the issuer's JSON Web Key Set."""
    scopes: NotRequired[list[str]]
    """OAuth scopes the server advertises (RFC 9728 scopes_supported); tools may need more."""
    origin_secret_arn: pulumi.Input[str]
    """ARN of this region's origin secret in Secrets Manager (OriginSecret.arns[region]): the header value
    CloudFront and the probes send, read at start-up; the origin refuses requests without it."""
    origin_secret_version: NotRequired[pulumi.Input[str] | None]
    """The secret's current version id (OriginSecret.versions[region]): a new one (a rotation) starts every
    execution environment again, with the new pair."""
    alert_topic_arn: NotRequired[pulumi.Input[str] | None]
    """SNS topic in the same region for the origin's alarms; without it no alarms are created."""
    mcp_path: NotRequired[str]
    """Path of the MCP endpoint (default /mcp)."""
    custom_domain: NotRequired[str | None]
    """The edge's custom domain, if any: accepted as Host; the resource URL when the audience is no URL."""
    sizing: NotRequired[OriginSizingArgs]
    """Memory, timeout, concurrency and auto scaling."""
    server_package: NotRequired[str | None]
    """Folder of the MCP server package to deploy, shipped as mcp_server (default: functions/mcp_server)."""
    lwa_layer_version: NotRequired[int]
    """Version of the AWS Lambda Web Adapter layer, LambdaAdapterLayerArm64 (default 25)."""
    log_retention_days: NotRequired[int]
    """CloudWatch Logs retention, one of the values CloudWatch allows (default 30)."""
    package_type: NotRequired[str]
    """zip (the default: a deterministic zip under the Web Adapter layer) or image (a container image from functions/mcp_server/Dockerfile in an ECR repository of the origin's region, pinned by digest)."""
    image_digest: NotRequired[pulumi.Input[str] | None]
    """With package_type image: the digest (sha256:...) of an image already pushed to this origin's repository; without it the component builds and pushes the image (pulumi-docker-build)."""
    cold_start: NotRequired[str]
    """How cold starts are avoided: provisioned (provisioned concurrency with auto scaling, the default), snapstart (Lambda SnapStart on published versions; needs lwa_layer_version 30 or later, no provisioned sizing) or none (on-demand only)."""


PROVISIONED_SIZING = ("provisioned_min", "provisioned_max", "utilization_target", "scale_in_cooldown_seconds",
                      "scale_out_cooldown_seconds")


def cold_start_of(args: McpOriginArgs) -> str:
    return args.get("cold_start") or DEFAULT_COLD_START


def package_type_of(args: McpOriginArgs) -> str:
    return args.get("package_type") or settings.PACKAGE_TYPE.default


def lwa_layer_version_of(args: McpOriginArgs) -> int:
    return args.get("lwa_layer_version", DEFAULT_LWA_LAYER_VERSION)


def origin_sizing(args: McpOriginArgs) -> dict:
    """The sizing with every default filled in; without provisioned concurrency
    (snapstart, none) its minimum and maximum are 0."""
    sizing = {**DEFAULT_SIZING, **{k: v for k, v in (args.get("sizing") or {}).items() if v is not None}}
    if cold_start_of(args) != "provisioned":
        sizing.update(provisioned_min=0, provisioned_max=0)
    return sizing


def server_source(args: McpOriginArgs) -> Path:
    """The server package folder: relative paths are taken from the working directory."""
    given = args.get("server_package")
    return Path(given).resolve() if given else SERVER_SOURCE


def check_origin_args(name: str, args: McpOriginArgs) -> None:
    checks = ArgChecks("McpOrigin", name)
    if not checks.required(args, "region", "server_id", "auth", "jwks_url", "origin_secret_arn"):
        checks.done()
    checks.region("region", args["region"])
    checks.name_prefix("server_id", args["server_id"])
    check_jwt_rules(checks, "auth", args["auth"])
    checks.https_url("jwks_url", args["jwks_url"])
    checks.mcp_path("mcp_path", args.get("mcp_path") or settings.MCP_PATH.default)
    checks.scopes("scopes", args.get("scopes"))
    if args.get("custom_domain"):
        checks.dns_name("custom_domain", args.get("custom_domain"))
    sizing = origin_sizing(args)
    for key in ("memory_mb", "timeout_seconds", "reserved_concurrency", "provisioned_min", "provisioned_max"):
        checks.within(f"sizing.{key}", sizing[key], SIZING_SETTINGS[key],
                      " (0: none)" if key == "reserved_concurrency" else None)
    counts = (sizing["provisioned_min"], sizing["provisioned_max"], sizing["reserved_concurrency"])
    if all(isinstance(n, int) for n in counts) and not counts[0] <= counts[1] <= (counts[2] or counts[1]):
        checks.problems.append(
            f"sizing: provisioned_min {sizing['provisioned_min']} <= provisioned_max {sizing['provisioned_max']} <= "
            f"reserved_concurrency {sizing['reserved_concurrency']} does not hold (Lambda refuses provisioned "
            "concurrency above reserved concurrency; 0 reserves none)")
    target = settings.ORIGIN_UTILIZATION_TARGET
    checks.number("sizing.utilization_target", sizing["utilization_target"], target.low, target.high,  # type: ignore[arg-type]
                  low_open=True)
    for key in ("scale_in_cooldown_seconds", "scale_out_cooldown_seconds"):
        checks.within(f"sizing.{key}", sizing[key], SIZING_SETTINGS[key])
    checks.within("lwa_layer_version", lwa_layer_version_of(args), settings.LWA_LAYER_VERSION)
    check_cold_start(checks, args)
    check_package_type(checks, args)
    checks.one_of("log_retention_days", args.get("log_retention_days", settings.LOG_RETENTION_DAYS.default),
                  settings.LOG_RETENTION_DAYS.choices)
    source = server_source(args)
    missing = [f for f in SERVER_PACKAGE_FILES if not (source / f).is_file()]
    if missing:
        checks.problem("server_package", str(source), f"must be a folder holding {' and '.join(SERVER_PACKAGE_FILES)} "
                                                      f"(missing: {', '.join(missing)})")
    if is_known(args["origin_secret_arn"]) and not str(args["origin_secret_arn"]).startswith("arn:"):
        checks.problem("origin_secret_arn", args["origin_secret_arn"], "must be a Secrets Manager secret ARN")
    checks.done()


def check_package_type(checks: ArgChecks, args: McpOriginArgs) -> None:
    kind = package_type_of(args)
    checks.one_of("package_type", kind, PACKAGE_TYPES)
    digest = args.get("image_digest")
    if kind != "image":
        if digest is not None:
            checks.problem("image_digest", digest, "needs package_type 'image'")
        return
    if cold_start_of(args) == "snapstart":
        checks.problem("package_type", kind, "cannot be combined with cold_start 'snapstart' (Lambda SnapStart does "
                       "not support container images)")
    if is_known(digest) and digest is not None and not re.fullmatch(IMAGE_DIGEST_PATTERN, str(digest)):
        checks.problem("image_digest", digest, "must be sha256: and 64 lower-case hex digits")
    layer = lwa_layer_version_of(args)
    if layer not in LWA_IMAGE_TAGS:
        checks.problem("lwa_layer_version", layer, "has no known Web Adapter image for package_type 'image': one of "
                       f"{', '.join(map(str, LWA_IMAGE_TAGS))}")


def check_cold_start(checks: ArgChecks, args: McpOriginArgs) -> None:
    mode = cold_start_of(args)
    checks.one_of("cold_start", mode, COLD_START_MODES)
    if mode not in COLD_START_MODES or mode == "provisioned":
        return
    given = args.get("sizing") or {}
    for key in PROVISIONED_SIZING:
        if given.get(key) not in (None, 0):  # type: ignore[misc]
            checks.problem(f"sizing.{key}", given.get(key), f"is a provisioned-concurrency setting: cold_start {mode!r} "
                           "has no provisioned concurrency (Lambda refuses it together with SnapStart); leave it unset")
    if mode != "snapstart":
        return
    layer = lwa_layer_version_of(args)
    if isinstance(layer, int) and layer < SNAPSTART_MIN_LWA_LAYER_VERSION:
        checks.problem("lwa_layer_version", layer, f"must be at least {SNAPSTART_MIN_LWA_LAYER_VERSION} with cold_start "
                       "'snapstart' (the first Web Adapter release, 1.1.0, that relays SnapStart's hooks to the app)")
    if args.get("region") in SNAPSTART_UNAVAILABLE_REGIONS:
        checks.problem("region", args.get("region"), "has no Lambda SnapStart: use cold_start 'provisioned' or 'none' there")


class McpOrigin(pulumi.ComponentResource):
    """One region's MCP origin: the MCP server on Lambda (arm64, Lambda Web Adapter) behind a
    streaming Function URL on the alias live, with provisioned concurrency and auto scaling."""

    url: pulumi.Output[str]
    """The Function URL (https, with a trailing slash)."""
    host: pulumi.Output[str]
    """The Function URL's host: what CloudFront and the router send as Host."""
    alias_arn: pulumi.Output[str]
    """ARN of the live alias the Function URL serves."""
    function_name: pulumi.Output[str]
    """Name of the origin function."""
    function_arn: pulumi.Output[str]
    """ARN of the origin function."""
    region: pulumi.Output[str]
    """AWS region of the origin."""
    image_repository_url: pulumi.Output[str | None]
    """With package_type image: the URL of the origin's ECR repository (where a pipeline pushes the image)."""

    def __init__(self, name: str, args: McpOriginArgs, opts: pulumi.ResourceOptions | None = None):
        args = with_integers(args, McpOriginArgs)
        check_origin_args(name, args)  # before anything is registered
        super().__init__(component_type("McpOrigin"), name, None, component_options(opts, "mcpedge:origin:McpOrigin"))
        region, server_id = args["region"], args["server_id"]
        mcp_path = args.get("mcp_path") or settings.MCP_PATH.default
        auth = args["auth"]
        custom_domain = args.get("custom_domain") or None
        sizing = origin_sizing(args)
        cold_start = cold_start_of(args)
        provisioned = sizing["provisioned_min"] > 0
        child = pulumi.ResourceOptions(parent=self)
        fn_name = function_name_for(server_id, region)

        spec = server_package_spec(server_source(args), cold_start)
        image = package_type_of(args) == "image"
        plain_environment = {
            # The Lambda Web Adapter: wrap the runtime (the layer's bootstrap; an image
            # starts run.sh itself), stream responses, wait for the app's readiness path
            # before passing invocations on.
            **({} if image else {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"}),
            "AWS_LWA_INVOKE_MODE": "response_stream",
            "AWS_LWA_PORT": str(APP_PORT),
            "AWS_LWA_READINESS_CHECK_PATH": READINESS_PATH,
            # What the app reads (functions/mcp_server/settings.py); the origin secret
            # itself is read from Secrets Manager at start-up (origin_secrets.py).
            OriginEnv.SERVER_NAME: server_id,
            OriginEnv.MCP_PATH: mcp_path,
            OriginEnv.SERVED_REGION: region,
            OriginEnv.AUTH_ISSUER: auth["issuer"],
            OriginEnv.AUTH_AUDIENCE: auth["audience"],
            OriginEnv.AUTH_JWKS_URL: args["jwks_url"],
            OriginEnv.AUTH_ALGORITHMS: ",".join(jwt_algorithms(auth)),
            OriginEnv.AUTH_LEEWAY_SECONDS: str(jwt_leeway_s(auth)),
            OriginEnv.AUTH_SCOPES_SUPPORTED: ",".join(args.get("scopes") or ()),
            OriginEnv.RESOURCE_SERVER_URL: resource_server_url(auth["audience"], custom_domain, mcp_path),
            OriginEnv.ALLOWED_HOSTS: ",".join(allowed_hosts(region, custom_domain)),
            # Under SnapStart: where the adapter relays the snapshot's two events.
            **(SNAPSTART_HOOK_PATHS if cold_start == "snapstart" else {}),
        }
        # The secret's version changes with every rotation: a new function version, so
        # every execution environment starts again and reads the new pair.
        environment = pulumi.Output.all(args["origin_secret_arn"], args.get("origin_secret_version") or "").apply(
            lambda a: {**plain_environment, OriginEnv.ORIGIN_SECRET_ID: a[0], OriginEnv.ORIGIN_SECRET_VERSION: a[1]}
        )
        if image:
            # The image by digest, in this region's repository (Lambda pulls only there).
            self._image = OriginImage(
                name, region=region, server_id=server_id, function_name=fn_name, spec=spec,
                dockerfile=SERVER_SOURCE / "Dockerfile", lwa_layer_version=lwa_layer_version_of(args),
                digest=args.get("image_digest"), parent=self)
            code: dict = {"package_type": "Image", "image_uri": self._image.uri}
        else:
            code = zip_code(spec, "run.sh", layers=[lwa_layer_arn(region, lwa_layer_version_of(args))])
        function = regional_function(
            name,
            region=region,
            function_name=fn_name,
            description=f"MCP origin of {server_id} in {region} (Lambda Web Adapter, streaming)",
            role_description=f"Execution role of the MCP origin {fn_name}: writes its own log group, reads its origin secret",
            code=code,
            memory_mb=sizing["memory_mb"],
            timeout_s=sizing["timeout_seconds"],
            environment=environment,
            log_retention_days=args.get("log_retention_days", settings.LOG_RETENTION_DAYS.default),
            # Least privilege: besides its own log group, the function reads its region's
            # origin secret at start-up, nothing else (no VPC).
            statements=pulumi.Output.from_input(args["origin_secret_arn"]).apply(
                lambda arn: [(SECRET_READ_ACTIONS, [arn])]),
            parent=self,
            policy_name=f"{name}-logs-policy",
            # An image's function waits for the repository policy that lets Lambda pull it.
            depends_on=self._image.policies if image else (),
            # 0: no reservation (None leaves it unset; AWS refuses one that leaves under 100 unreserved).
            reserved_concurrent_executions=sizing["reserved_concurrency"] or None,
            publish=True,
            # Every published version (the alias live points at one) starts from a snapshot.
            snap_start=aws.lambda_.FunctionSnapStartArgs(apply_on="PublishedVersions") if cold_start == "snapstart" else None,
        ).function

        alias = aws.lambda_.Alias(
            f"{name}-alias",
            region=region,
            name=LIVE_ALIAS,
            function_name=function.name,
            function_version=function.version,
            description="What the Function URL, provisioned concurrency and auto scaling point at",
            opts=child,
        )

        if provisioned:
            provisioned_config = aws.lambda_.ProvisionedConcurrencyConfig(
                f"{name}-provisioned",
                region=region,
                function_name=function.name,
                qualifier=alias.name,
                provisioned_concurrent_executions=sizing["provisioned_min"],
                # Auto scaling owns the value after creation; do not fight it.
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["provisionedConcurrentExecutions"]),
            )
            target = aws.appautoscaling.Target(
                f"{name}-scaling-target",
                region=region,
                service_namespace="lambda",
                scalable_dimension="lambda:function:ProvisionedConcurrency",
                resource_id=pulumi.Output.concat("function:", function.name, ":", alias.name),
                min_capacity=sizing["provisioned_min"],
                max_capacity=sizing["provisioned_max"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[provisioned_config]),
            )
            aws.appautoscaling.Policy(
                f"{name}-scaling-policy",
                region=region,
                policy_type="TargetTrackingScaling",
                service_namespace=target.service_namespace,
                scalable_dimension=target.scalable_dimension,
                resource_id=target.resource_id,
                target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                    target_value=sizing["utilization_target"],
                    predefined_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                        predefined_metric_type="LambdaProvisionedConcurrencyUtilization",
                    ),
                    scale_in_cooldown=sizing["scale_in_cooldown_seconds"],
                    scale_out_cooldown=sizing["scale_out_cooldown_seconds"],
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

        topic_arn = args.get("alert_topic_arn")
        if topic_arn is not None:
            self._alarms(name, region, fn_name, function, topic_arn, provisioned=provisioned)

        self.region = pulumi.Output.from_input(region)
        self.url = function_url.function_url
        self.host = function_url.function_url.apply(url_host)
        self.alias_arn = alias.arn
        self.function_name = function.name
        self.function_arn = function.arn
        self.image_repository_url = self._image.repository.repository_url if image else pulumi.Output.from_input(None)
        self.register_outputs({
            "url": self.url,
            "host": self.host,
            "aliasArn": self.alias_arn,
            "functionName": self.function_name,
            "region": self.region,
        })

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
