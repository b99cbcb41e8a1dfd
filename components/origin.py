"""McpOrigin: one region's MCP origin, any MCP server on Lambda behind a streaming
Function URL that only IAM principals may call.

The server is the user's, unchanged: a folder of code with a runtime and the command
that starts it, or a container image. Per region: a least-privilege execution role,
the log group (with retention), the function on arm64 (a zip under the AWS Lambda Web
Adapter layer, whose bootstrap starts the generated ``run.sh``, or the image, whose
adapter extension does the same), a published version behind the alias ``live``, the
cold-start mode's resources (provisioned concurrency with Application Auto Scaling, or
SnapStart), the Function URL on the alias in RESPONSE_STREAM mode with ``AWS_IAM`` auth,
and the alarms.

Who may call the Function URL: the origin creates no resource-based permission at all.
Callers (the edge gate's role, each probe fleet's probe role) are in the same account,
so an identity policy on the caller's role is enough, and it keeps the origin unaware
of who watches or fronts it; the component exposes ``function_arn`` and ``alias_arn``
and ``invoke_origins_policy(...)`` renders the grant every caller's role gets: both
``lambda:InvokeFunctionUrl`` (only with ``lambda:FunctionUrlAuthType = AWS_IAM``) and
``lambda:InvokeFunction`` (which AWS requires for Function URLs created since October
2025) on exactly the functions and their aliases.

The package of a folder server is built once per program run (cached by content hash),
so every region uploads the same bytes. Nothing of ours runs inside the server: the
edge verifies tokens and scopes, signs the request with SigV4, and sends the viewer's
bearer token in ``x-mcp-edge-authorization``, which the adapter restores into
``Authorization`` (``AWS_LWA_AUTHORIZATION_SOURCE``).
"""

import functools
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from components import naming, settings, shell_command
from components.alerts import topic_alarm
from components.iam import POLICY_VERSION
from components.image import IMAGE_DIGEST_PATTERN, LWA_IMAGE_TAGS, OriginImage
from components.lambda_package import LINK_RULE, PackageSpec, walk_folder
from components.naming import physical_name
from components.regional_function import regional_function, zip_code
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks, is_known, with_integers
from functions.contract import (
    CORS_ALLOW_HEADERS,
    CORS_ALLOW_METHODS,
    CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE_S,
    EDGE_AUTHORIZATION_HEADER,
)

# Port the server listens on inside the execution environment (the adapter's default):
# run.sh sets PORT (and AWS_LWA_PORT) to it.
APP_PORT = 8080
# The header the edge carries the viewer's bearer token in (SigV4 takes Authorization):
# the adapter puts it back into Authorization before the request reaches the server.
AUTHORIZATION_SOURCE_HEADER = EDGE_AUTHORIZATION_HEADER
# The Web Adapter is published by AWS in this account, one layer per architecture.
LWA_LAYER_ACCOUNT = "753240598075"
LWA_LAYER_NAMES = {"arm64": "LambdaAdapterLayerArm64", "x86_64": "LambdaAdapterLayerX86"}
LWA_LAYER_NAME = LWA_LAYER_NAMES["arm64"]
# What the Web Adapter layer takes of Lambda's 250 MB (package and layers unzipped): an
# assumption, an upper bound. The layer is the adapter's one binary (/opt/extensions/lambda-adapter)
# and a bootstrap script; its release binary measured 4.7 MB, then 3.7 MB in the adapter's own
# pull requests (aws/aws-lambda-web-adapter #114 and #120, 2023). 10 MiB leaves it room to grow;
# Lambda's own check at deploy time has the exact figure.
LWA_LAYER_UNZIPPED_BYTES = 10 * 1024 * 1024
# Every origin runs on arm64 (Graviton), whatever its runtime.
ARCHITECTURE = "arm64"

# The runtimes a folder server may use, by family: how its dependencies get into the
# package by default (python: pip for Lambda's platform; node: npm ci; java and
# provided: the folder holds the built artefact already).
RUNTIME_FAMILIES = {
    "python3.13": "python", "python3.12": "python",
    "nodejs22.x": "node", "nodejs24.x": "node",
    "java21": "java",
    "provided.al2023": "provided",
}
RUNTIMES = tuple(RUNTIME_FAMILIES)
# Lambda SnapStart's managed runtimes among them: Java 11+, Python 3.12+ and .NET 8+, not
# Node.js or the OS-only provided.al2023 (https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html,
# "Supported features and limitations").
SNAPSTART_RUNTIMES = ("python3.12", "python3.13", "java21")
# Container images have SnapStart too when the image's runtime client coordinates the
# snapshot lifecycle (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-runtime-hooks-custom.html:
# Lambda's base images for Java 11+, Python 3.12+, .NET 8+ do it; any other base image needs a
# runtime client that does). In an origin image the Web Adapter is that client, and it takes
# part in the SnapStart lifecycle from release 1.1.0 (layer 30) on (its release notes; its
# fastapi-snapstart image example): so images are allowed with SnapStart exactly when the
# image's adapter is 1.1.0 or later (a built image gets LWA_VERSION of lwa_layer_version; a
# pipeline's image must carry that release itself).
# Lambda fails a restore whose Restore phase (after-restore hooks included) takes over 10 s
# (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-troubleshooting.html,
# SnapStartTimeoutException). After a restore the adapter (1.1.0+) rebuilds its client and
# re-runs the readiness check, which is unbounded unless AWS_LWA_READINESS_CHECK_TIMEOUT_SECONDS
# is set; the same bound applies to the check at the first start, before the snapshot.
SNAPSTART_READINESS_TIMEOUT_S = 8
READINESS_TIMEOUT_ENV = "AWS_LWA_READINESS_CHECK_TIMEOUT_SECONDS"
# What a folder of each family must hold when no install command is given.
DEFAULT_INSTALL = {
    "python": "requirements.txt, installed with pip for Lambda (manylinux aarch64 wheels only)",
    "node": "package.json and package-lock.json, installed with npm ci --omit=dev (pure JavaScript)",
    "java": "the built artefact (a .jar, or classes) already: there is no build step without an install command",
    "provided": "the built executable the command starts already: there is no build step without an install command",
}
# The generated entry point: a folder may not hold a file of that name (it would be replaced).
RUN_SH = "run.sh"
DOCKERFILE = "Dockerfile"


def runtime_family(runtime: str) -> str:
    return RUNTIME_FAMILIES[runtime]


def run_sh(command: str, runtime: str) -> bytes:
    """The entry point the adapter starts (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap, handler
    run.sh): from the package's root, with PORT set to the port the adapter forwards to,
    it execs the server's command (one POSIX simple command; $PORT is expanded): ``exec``
    stands where its program starts, after any NAME=value assignments (exported to it) and
    redirections (``components.shell_command``)."""
    lines = [
        "#!/bin/sh",
        "# Generated by mcp-edge (components/origin.py): the Lambda Web Adapter starts this, and",
        "# forwards each request to the server it starts, listening on 127.0.0.1:$PORT.",
        "set -e",
        'cd "${LAMBDA_TASK_ROOT:-$(dirname "$0")}"',
        f'export AWS_LWA_PORT="${{AWS_LWA_PORT:-{APP_PORT}}}"',
        'export PORT="$AWS_LWA_PORT"',
    ]
    if runtime_family(runtime) == "python":
        # The installed dependencies sit at the package's root, before the runtime's own.
        lines.append('export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"')
    lines.append(shell_command.parse(command).exec_line)
    return ("\n".join(lines) + "\n").encode()


def server_source_problems(source: Path, runtime: str, command: str, install: str | None) -> list[tuple[str, str]]:
    """What is wrong with a folder server, as (field, what is allowed) pairs: the folder must
    exist, hold only what can be packaged (no link out of it), hold what its runtime's install
    needs, leave run.sh to us, and the command must be one POSIX simple command. Shared by the
    stack checks and the component's."""
    problems: list[tuple[str, str]] = []
    parsed: shell_command.SimpleCommand | None = None
    if not command.strip():
        problems.append(("command", "must not be empty: the command that starts the server on $PORT, "
                                    "e.g. 'python3 server.py' or 'node app.mjs'"))
    elif "\n" in command or "\r" in command or "\0" in command:
        problems.append(("command", "must be one line (run.sh execs it)"))
    else:
        try:
            parsed = shell_command.parse(command)
        except shell_command.CommandError as exc:
            problems.append(("command", f"{exc} (run.sh execs it as one POSIX simple command, e.g. "
                                        "'FASTMCP_PORT=$PORT python3 server.py')"))
    if install is not None and (not install.strip() or "\0" in install):
        problems.append(("install", "must be a non-empty shell command (run in a copy of the folder)"))
    if runtime not in RUNTIME_FAMILIES:
        problems.append(("runtime", f"must be one of {', '.join(RUNTIMES)}"))
        return problems
    if not source.is_dir():
        problems.append(("source", "must be an existing folder (relative to the project root)"))
        return problems
    files, unpackaged = walk_folder(source)
    if unpackaged:
        problems.append(("source", f"holds what cannot be packaged: {'; '.join(unpackaged)}. {LINK_RULE}"))
    if (source / RUN_SH).exists():
        problems.append(("source", f"holds a {RUN_SH}: the package's {RUN_SH} is generated (it starts the command), "
                                   "so rename yours and name it in the command"))
    if install:
        return problems
    family = runtime_family(runtime)
    if family == "python":
        missing = [] if (source / "requirements.txt").is_file() else ["requirements.txt"]
    elif family == "node":
        missing = [f for f in ("package.json", "package-lock.json") if not (source / f).is_file()]
    elif family == "java":
        built = any(arcname.endswith((".jar", ".class")) for arcname, _ in files)
        missing = [] if built else ["a .jar or .class file"]
    else:
        # The program after any NAME=value; one named by an expansion ($HOME/...) is known only
        # when run.sh runs, and a command already refused names none.
        program = parsed.program_name if parsed is not None else None
        built = program is None or program.startswith("/") or (
            (source / program).is_file() and os.access(source / program, os.X_OK))
        missing = [] if built else [f"the executable {program!r} (marked executable)"]
    if missing:
        problems.append(("source", f"must hold {DEFAULT_INSTALL[family]} (missing: {', '.join(missing)}); "
                                   "or give an install command"))
    return problems


@functools.cache
def _folder_package_spec(source: Path, runtime: str, command: str, install: str) -> PackageSpec:
    family = runtime_family(runtime)
    python = family == "python"
    how: dict = {}
    if install:
        how = {"install": "command", "install_command": install}
    elif python:
        how = {"requirements": source / "requirements.txt"}
    elif family == "node":
        how = {"install": "npm"}
    return PackageSpec(
        name=f"mcp-origin-{runtime}",
        sources=(source,),
        architecture=ARCHITECTURE,
        python_version=runtime.removeprefix("python") if python else "3.13",
        extra_files={RUN_SH: run_sh(command, runtime)},
        executables=(RUN_SH,),
        keep_modes=True,
        layer_bytes=LWA_LAYER_UNZIPPED_BYTES,  # the function runs under the Web Adapter layer
        compile_bytecode=python,
        **how,
    )


def server_package_spec(server: "OriginServerArgs") -> PackageSpec:
    """The Lambda package of a folder server: the folder's files as they are, its installed
    dependencies, and the generated run.sh. Relative folders are taken from the working
    directory (the project root, under ``pulumi up``)."""
    return _folder_package_spec(Path(server["source"]).resolve(), server["runtime"], server["command"],
                                server.get("install") or "")


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

# What Lambda's active tracing needs on the execution role (the actions of the managed
# AWSXRayDaemonWriteAccess that send data; X-Ray has no resource-level permissions).
XRAY_WRITE_ACTIONS = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
DEFAULT_TRACING = settings.ORIGIN_TRACING.default

# Page at 80% of provisioned concurrency for 5 minutes: before it runs out and requests spill into cold starts.
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


def lwa_layer_arn(region: str, version: int, architecture: str = ARCHITECTURE) -> str:
    """The AWS Lambda Web Adapter layer for ``architecture`` in ``region``: layers are regional."""
    return f"arn:aws:lambda:{region}:{LWA_LAYER_ACCOUNT}:layer:{LWA_LAYER_NAMES[architecture]}:{version}"


def function_name_for(server_id: str, region: str, stack: str | None = None) -> str:
    # Lambda names are per region, so the same name in every region reads well in
    # the console and in alarms; the stack in it keeps stacks of one account apart.
    return physical_name(server_id, f"origin-{region}", limit=naming.LAMBDA_FUNCTION, stack=stack)


def url_host(url: str) -> str:
    from urllib.parse import urlparse

    host = urlparse(url).hostname
    if not host:
        raise ValueError(f"Function URL {url!r} has no host")
    return host


INVOKE_URL_ACTION = "lambda:InvokeFunctionUrl"
INVOKE_ACTION = "lambda:InvokeFunction"


def invoke_origins_policy(function_arns: Iterable[str], alias_arns: Iterable[str]) -> str:
    """The identity policy a caller's role (the edge gate's, a probe fleet's) needs to call these
    origins' Function URLs (AWS_IAM): ``lambda:InvokeFunctionUrl`` only through an
    IAM-authenticated URL, and ``lambda:InvokeFunction``, which AWS requires of a Function
    URL's caller as well; each on exactly these functions and aliases (the alias a URL is on),
    never a wildcard."""
    resources = sorted({*function_arns, *alias_arns})
    if not resources or any("*" in arn or "?" in arn for arn in resources):
        raise ValueError(f"an origin invoke policy names origin functions and aliases only, got {resources!r}")
    return json.dumps({"Version": POLICY_VERSION, "Statement": [
        {"Sid": "InvokeOriginFunctionUrls", "Effect": "Allow", "Action": [INVOKE_URL_ACTION], "Resource": resources,
         "Condition": {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}},
        {"Sid": "InvokeOriginFunctions", "Effect": "Allow", "Action": [INVOKE_ACTION], "Resource": resources},
    ]})


class OriginServerArgs(TypedDict):
    """The MCP server an origin runs: exactly one of ``source`` (a folder of code, with
    ``runtime`` and ``command``), ``image`` (a folder with a Dockerfile) or ``image_digest``.
    The server speaks stateless Streamable HTTP on 127.0.0.1:$PORT at ``path``."""

    source: NotRequired[str]
    """Folder of the server's code (relative to the working directory), shipped unchanged with its installed dependencies."""
    runtime: NotRequired[str]
    """With source: python3.13, python3.12, nodejs22.x, nodejs24.x, java21 or provided.al2023."""
    command: NotRequired[str]
    """With source: the command that starts the server (one POSIX simple command, NAME=value before the program allowed, exec'd from the package's root by run.sh with PORT set)."""
    install: NotRequired[str]
    """With source: a shell command that installs or builds in a copy of the folder (default: pip for requirements.txt, npm ci --omit=dev for package-lock.json; none for java21 and provided.al2023)."""
    image: NotRequired[str]
    """Folder with a Dockerfile (FROM an arm64 base, the Web Adapter copied into /opt/extensions), built and pushed to the origin's repository."""
    image_digest: NotRequired[pulumi.Input[str]]
    """Digest (sha256:...) of an image a pipeline pushed to the origin's repository (every origin region's)."""
    path: NotRequired[str]
    """Path the server serves MCP on (default /mcp)."""
    readiness_path: NotRequired[str]
    """Path the adapter polls (GET) until the server answers below 500 (default: path)."""


class OriginSizingArgs(TypedDict):
    """Capacity of one region's origin function; every field has a default."""

    memory_mb: NotRequired[int]
    """Memory of the function, 128-10240 MB (default 1024)."""
    timeout_seconds: NotRequired[int]
    """Timeout of the function, 1-900 seconds (default 120)."""
    reserved_concurrency: NotRequired[int]
    """Reserved concurrency of the function, 1-10000; unset (the default) reserves none. 0 is refused: Lambda
    would throttle every call."""
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
    """Inputs of one region's MCP origin."""

    region: str
    """AWS region of the origin."""
    server_id: str
    """Name of the MCP server: prefixes the function's name."""
    server: OriginServerArgs
    """What to run: a folder of code (source, runtime, command) or an image."""
    alert_topic_arn: NotRequired[pulumi.Input[str] | None]
    """SNS topic in the same region for the origin's alarms; without it no alarms are created."""
    sizing: NotRequired[OriginSizingArgs]
    """Memory, timeout, concurrency and auto scaling."""
    lwa_layer_version: NotRequired[int]
    """Version of the AWS Lambda Web Adapter layer, LambdaAdapterLayerArm64 (default 25; at least 23); with an image built here, the adapter image of the same release."""
    log_retention_days: NotRequired[int]
    """CloudWatch Logs retention, one of the values CloudWatch allows (default 30)."""
    tracing: NotRequired[bool]
    """Lambda active tracing (AWS X-Ray) on the function, with the role's permission to send segments (default true)."""
    cold_start: NotRequired[str]
    """How cold starts are avoided: provisioned (provisioned concurrency with auto scaling, the default), snapstart (Lambda SnapStart on published versions: python3.12+ and java21 folders, or an image whose Web Adapter is 1.1.0 or later; needs lwa_layer_version 30 or later, no provisioned sizing; the server must answer its readiness path within 8 s of starting and of a restore) or none (on-demand only)."""


PROVISIONED_SIZING = ("provisioned_min", "provisioned_max", "utilization_target", "scale_in_cooldown_seconds",
                      "scale_out_cooldown_seconds")
SERVER_KINDS = ("source", "image", "image_digest")


def cold_start_of(args: McpOriginArgs) -> str:
    return args.get("cold_start") or DEFAULT_COLD_START


def server_kind(server: OriginServerArgs) -> str:
    """source, image or image_digest: the one the server gives (the first, when several)."""
    return next((k for k in SERVER_KINDS if server.get(k) is not None), "")


def server_path(server: OriginServerArgs) -> str:
    return server.get("path") or settings.MCP_PATH.default


def lwa_layer_version_of(args: McpOriginArgs) -> int:
    return args.get("lwa_layer_version", DEFAULT_LWA_LAYER_VERSION)


def origin_sizing(args: McpOriginArgs) -> dict:
    """The sizing with every default filled in; without provisioned concurrency
    (snapstart, none) its minimum and maximum are 0."""
    sizing = {**DEFAULT_SIZING, **{k: v for k, v in (args.get("sizing") or {}).items() if v is not None}}
    if cold_start_of(args) != "provisioned":
        sizing.update(provisioned_min=0, provisioned_max=0)
    return sizing


def check_origin_args(name: str, args: McpOriginArgs) -> None:
    checks = ArgChecks("McpOrigin", name)
    if not checks.required(args, "region", "server_id", "server"):
        checks.done()
    checks.region("region", args["region"])
    checks.name_prefix("server_id", args["server_id"])
    sizing = origin_sizing(args)
    for key in ("memory_mb", "timeout_seconds", "reserved_concurrency", "provisioned_min", "provisioned_max"):
        if key == "reserved_concurrency" and sizing[key] is None:
            continue  # unset: no reservation
        checks.within(f"sizing.{key}", sizing[key], SIZING_SETTINGS[key])
    counts = (sizing["provisioned_min"], sizing["provisioned_max"], sizing["reserved_concurrency"])
    if all(isinstance(n, int) for n in counts) and not counts[0] <= counts[1] <= (counts[2] or counts[1]):
        checks.problems.append(
            f"sizing: provisioned_min {sizing['provisioned_min']} <= provisioned_max {sizing['provisioned_max']} <= "
            f"reserved_concurrency {sizing['reserved_concurrency']} does not hold (Lambda refuses provisioned "
            "concurrency above reserved concurrency; leave reserved_concurrency unset to reserve none)")
    target = settings.ORIGIN_UTILIZATION_TARGET
    checks.number("sizing.utilization_target", sizing["utilization_target"], target.low, target.high,  # type: ignore[arg-type]
                  low_open=True)
    for key in ("scale_in_cooldown_seconds", "scale_out_cooldown_seconds"):
        checks.within(f"sizing.{key}", sizing[key], SIZING_SETTINGS[key])
    checks.within("lwa_layer_version", lwa_layer_version_of(args), settings.LWA_LAYER_VERSION)
    check_server(checks, args)
    check_cold_start(checks, args)
    if not isinstance(args.get("tracing", DEFAULT_TRACING), bool):
        checks.problem("tracing", args.get("tracing"), "must be true or false")
    checks.one_of("log_retention_days", args.get("log_retention_days", settings.LOG_RETENTION_DAYS.default),
                  settings.LOG_RETENTION_DAYS.choices)
    checks.done()


def check_server(checks: ArgChecks, args: McpOriginArgs) -> None:
    server = args["server"]
    given = [k for k in SERVER_KINDS if server.get(k) is not None]
    if len(given) != 1:
        checks.problem("server", sorted(server), "must give exactly one of source (with runtime and command), image or "
                       f"image_digest (given: {', '.join(given) or 'none'})")
        return
    checks.mcp_path("server.path", server_path(server))
    if server.get("readiness_path") is not None:
        checks.mcp_path("server.readiness_path", server.get("readiness_path"))
    kind = given[0]
    folder_fields = ("runtime", "command", "install")
    if kind == "source":
        for field, allowed in server_source_problems(Path(server["source"]).resolve(), server.get("runtime", ""),
                                                     server.get("command", ""), server.get("install")):
            checks.problem(f"server.{field}", server.get(field), allowed)  # type: ignore[misc]
        return
    for field in folder_fields:
        if server.get(field) is not None:
            checks.problem(f"server.{field}", server.get(field), f"is for a folder server (source), not {kind}: "
                           "an image starts its server itself")  # type: ignore[misc]
    if kind == "image":
        folder = Path(server["image"]).resolve()
        if not (folder / DOCKERFILE).is_file():
            checks.problem("server.image", server["image"], "must be a folder holding a Dockerfile")
        layer = lwa_layer_version_of(args)
        if layer not in LWA_IMAGE_TAGS:
            checks.problem("lwa_layer_version", layer, "has no known Web Adapter image for server.image: one of "
                           f"{', '.join(map(str, LWA_IMAGE_TAGS))}")
    else:
        digest = server["image_digest"]
        if is_known(digest) and not re.fullmatch(IMAGE_DIGEST_PATTERN, str(digest)):
            checks.problem("server.image_digest", digest, "must be sha256: and 64 lower-case hex digits")


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
    server = args.get("server") or {}
    kind = server_kind(server)  # type: ignore[arg-type]
    if server.get("runtime") in RUNTIME_FAMILIES and server.get("runtime") not in SNAPSTART_RUNTIMES:
        checks.problem("cold_start", mode, f"needs a runtime Lambda SnapStart supports ({', '.join(SNAPSTART_RUNTIMES)}),"
                       f" not {server.get('runtime')}: use provisioned or none")
    layer = lwa_layer_version_of(args)
    if isinstance(layer, int) and layer < SNAPSTART_MIN_LWA_LAYER_VERSION:
        checks.problem("lwa_layer_version", layer, f"must be at least {SNAPSTART_MIN_LWA_LAYER_VERSION} with cold_start "
                       "'snapstart' (the first Web Adapter release, 1.1.0, that takes part in SnapStart's lifecycle"
                       + (", for the layer and for a built image's adapter)" if kind != "image_digest" else
                          "; a pushed image must carry that release of the adapter itself)"))
    if args.get("region") in SNAPSTART_UNAVAILABLE_REGIONS:
        checks.problem("region", args.get("region"), "has no Lambda SnapStart: use cold_start 'provisioned' or 'none' there")


def origin_environment(server: OriginServerArgs, cold_start: str = DEFAULT_COLD_START) -> dict[str, str]:
    """The function's environment: the Web Adapter's settings only, nothing for the server
    (a server's own settings belong to its folder or image)."""
    image = server_kind(server) != "source"
    snapstart = {READINESS_TIMEOUT_ENV: str(SNAPSTART_READINESS_TIMEOUT_S)} if cold_start == "snapstart" else {}
    return {
        # Zip: the layer's bootstrap wraps the runtime and starts run.sh; an image's
        # adapter extension starts with the image's own entry point.
        **({"PORT": str(APP_PORT)} if image else {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"}),
        "AWS_LWA_INVOKE_MODE": "response_stream",
        "AWS_LWA_PORT": str(APP_PORT),
        # Polled (GET) until it answers below 500; Lambda's init and the function's
        # timeout bound the wait, and under SnapStart the timeout below (a restore
        # re-runs the check, and Lambda allows the Restore phase 10 s).
        "AWS_LWA_READINESS_CHECK_PATH": server.get("readiness_path") or server_path(server),
        **snapstart,
        # SigV4 takes Authorization: the edge sends the bearer token in this header instead.
        "AWS_LWA_AUTHORIZATION_SOURCE": AUTHORIZATION_SOURCE_HEADER,
    }


class McpOrigin(pulumi.ComponentResource):
    """One region's MCP origin: any MCP server on Lambda (arm64, Lambda Web Adapter) behind a
    streaming Function URL on the alias live that only IAM principals may call (see the module
    docstring for who grants them)."""

    url: pulumi.Output[str]
    """The Function URL (https, with a trailing slash)."""
    host: pulumi.Output[str]
    """The Function URL's host: what the edge signs for and sends as Host."""
    alias_arn: pulumi.Output[str]
    """ARN of the live alias the Function URL serves (a caller's grant names it, with function_arn)."""
    function_name: pulumi.Output[str]
    """Name of the origin function."""
    function_arn: pulumi.Output[str]
    """ARN of the origin function (unqualified)."""
    region: pulumi.Output[str]
    """AWS region of the origin."""
    image_repository_url: pulumi.Output[str | None]
    """With an image: the URL of the origin's ECR repository (where a pipeline pushes the image)."""

    def __init__(self, name: str, args: McpOriginArgs, opts: pulumi.ResourceOptions | None = None):
        args = with_integers(args, McpOriginArgs)
        check_origin_args(name, args)  # before anything is registered
        super().__init__(component_type("McpOrigin"), name, None, component_options(opts, "mcpedge:origin:McpOrigin"))
        region, server_id, server = args["region"], args["server_id"], args["server"]
        sizing = origin_sizing(args)
        cold_start = cold_start_of(args)
        provisioned = sizing["provisioned_min"] > 0
        child = pulumi.ResourceOptions(parent=self)
        fn_name = function_name_for(server_id, region)

        kind = server_kind(server)
        image = kind != "source"
        if image:
            # The image by digest, in this region's repository (Lambda pulls only there).
            self._image = OriginImage(
                name, region=region, server_id=server_id, function_name=fn_name,
                context=Path(server["image"]).resolve() if kind == "image" else None,
                lwa_layer_version=lwa_layer_version_of(args), digest=server.get("image_digest"), parent=self)
            code: dict = {"package_type": "Image", "image_uri": self._image.uri}
            what = "container image"
        else:
            code = zip_code(server_package_spec(server), RUN_SH, runtime=server["runtime"],
                            layers=[lwa_layer_arn(region, lwa_layer_version_of(args))])
            what = server["runtime"]
        tracing = args.get("tracing", DEFAULT_TRACING)
        function = regional_function(
            name,
            region=region,
            function_name=fn_name,
            description=f"MCP origin of {server_id} in {region} ({what}, Lambda Web Adapter, streaming)",
            role_description=f"Execution role of the MCP origin {fn_name}: writes its own log group",
            code=code,
            memory_mb=sizing["memory_mb"],
            timeout_s=sizing["timeout_seconds"],
            environment=origin_environment(server, cold_start),
            log_retention_days=args.get("log_retention_days", settings.LOG_RETENTION_DAYS.default),
            # Least privilege: its own log group and, with active tracing, sending its
            # segments to X-Ray; nothing else (no VPC, no secret).
            statements=[(list(XRAY_WRITE_ACTIONS), ["*"])] if tracing else [],
            parent=self,
            policy_name=f"{name}-logs-policy",
            # An image's function waits for the repository policy that lets Lambda pull it.
            depends_on=self._image.policies if image else (),
            # None: no reservation (AWS refuses one that leaves under 100 unreserved).
            reserved_concurrent_executions=sizing["reserved_concurrency"],
            publish=True,
            # Every published version (the alias live points at one) starts from a snapshot.
            snap_start=aws.lambda_.FunctionSnapStartArgs(apply_on="PublishedVersions") if cold_start == "snapstart" else None,
            # Active: Lambda records an X-Ray segment per invocation (init, duration, errors);
            # the server gets the edge's traceparent in the request either way.
            tracing_config=aws.lambda_.FunctionTracingConfigArgs(mode="Active" if tracing else "PassThrough"),
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
            # Every request is SigV4-signed by a role granted invoke_origins_policy
            # (the edge gate's, the probes'); there is no resource-based permission.
            authorization_type="AWS_IAM",
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
            "functionArn": self.function_arn,
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
