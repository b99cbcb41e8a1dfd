"""The local topology, derived from the program itself.

``build_plan(options)`` runs ``__main__.py`` for the stack under Pulumi mocks (the same
run the tests use) and reads what it would deploy. The program's ``topology`` stack
output (``TOPOLOGY_VERSION``) names each part by identity: the distribution, the
CloudFront Function, the router, the origin request policy, each region's origin
function, each fleet's functions, queues, schedules and event source mappings, the
results table and the alert topics; the plan takes those resources' inputs (code,
environment, async-invoke configuration, schedule inputs, mapping settings, queue and
table attributes), never guessing a part by resource type or handler name. It then
maps each onto loopback:

- the edge code is checked to be exactly what the renderers produce for this stack,
  then rendered again with the local values (issuer, audience, public host, origin
  targets), so the local edge runs the shipped code with only those constants changed;
- function environments keep every value the program sets, except those that point
  at AWS-only things (see ``LOCAL_DIFFERENCES``);
- schedule inputs keep their shape; their endpoints move to the local edge/origins.

The plan is plain data (JSON in the run directory): every child process reads it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from components.probe_rounds import Invocation, interval_of, run_definition
from functions.contract import ProbeEnv
from local.aws.function_url import function_url_host
from local.cloudfront.differences import EDGE_DIFFERENCES
from local.cloudfront.events import OriginConfig
from local.cloudfront.proxy import EdgeSettings, OriginRequestPolicy
from local.cloudfront.request_limits import NOT_APPLIED
from local.files import write_private
from local.firewall import NOT_EMULATED as WAF_NOT_EMULATED
from local.oauth.issuer import DEFAULT_TOKEN_LIFETIME_S, IssuerSettings, new_client_secret
from local.origins import ServerSpec, server_spec
from local.supervisor import free_ports
from stack_config.loading import PROJECT_ROOT, load_from_stack_file, resolve_stack_file, stack_name_of
from stack_config.model import StackConfig

if TYPE_CHECKING:  # the program and its renderers load only when a plan is built
    from devkit.mock_program import ProgramRun, Resource

LOOPBACK = "127.0.0.1"
DEFAULT_EDGE_PORT = 8400
DEFAULT_BASE_PORT = 8401
ORIGIN_PORT_OFFSET = 10
FUNCTION_URL_PORT_OFFSET = 30  # each region's local Function URL, in front of its origin
DEFAULT_ORIGIN_INSTANCES = 2  # the fewest that make a stateful server fail, at twice one's memory
DEV_CLIENT_ID = "local-dev"
FUNCTIONS_ROOT = PROJECT_ROOT / "functions"
# Lambda's own variables the local runner sets for each function (the runtime sets them on AWS).
FAKE_AWS_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
# Variables of the Lambda Web Adapter: locally uvicorn is started directly.
_SECRET_SIG = "4dabf18193072939515e22adb298388d"
# The version of the program's `topology` output this module reads (see __main__.py).
TOPOLOGY_VERSION = 1
LAMBDA = "aws:lambda/function:Function"

# What differs from AWS, and why (printed by `python -m local up --explain`, and in the docs).
LOCAL_DIFFERENCES = (
    "Plain http on 127.0.0.1 instead of https: no certificates to make or trust on a developer machine.",
    *EDGE_DIFFERENCES,
    "The issuer is the local development issuer (http://127.0.0.1:<port>/), not the stack's authIssuer: the "
    "stack's authorization server is not reachable or usable without its real client secrets. The viewer "
    "function has it rendered in.",
    "The token audience and the protected resource are the local edge's MCP URL, not authAudience: clients "
    "ask for a token for the URL they connect to (RFC 8707), and the metadata must name that URL.",
    "The viewer function renders the local edge's host (http) into WWW-Authenticate instead of the custom domain.",
    "The edge's origin-request function is the program's own package (the gate and its wheels), with its router "
    "rendered for local targets (http, 127.0.0.1, each region's local Function URL) and its constants for the "
    "dev issuer (issuer, audience, JWKS URL, resource); the tool scopes, algorithms and every other constant are "
    "the stack's. It runs in the local edge's process and signs with the emulator's fake credentials.",
    "Each origin's Function URL is local/aws/function_url.py: it verifies SigV4 (service lambda, the region, "
    "the emulator's fake credentials, 15 minutes of clock skew) and the payload hash, answers 403 to anything "
    "else, and forwards to the origin process with the headers as received, but for Host: the server gets the "
    "Function URL's own (<url-id>.lambda-url.<region>.on.aws, the program's fake url-id), as on AWS.",
    "Each origin runs as 2 processes of the server (--origin-instances), and its Function URL sends each request "
    "to the next one in turn; Lambda sends a request to whichever execution environment is free and starts "
    "more under load. Either way, a server keeping sessions in memory sees requests of sessions it never began.",
    "Each origin is the server's package built for this machine (the stack's server folder with its "
    "dependencies installed beside it: pip wheels for this machine's platform and the runtime's Python "
    "version, npm ci --omit=dev for Node.js), started through the same generated run.sh with the function's "
    "environment (the Web Adapter's settings as plain variables, PORT and AWS_LWA_PORT the local port). Python "
    "servers run on this machine's interpreter of the runtime's version; Node.js servers on this machine's node "
    "(Node 20 here; Lambda runs Node 22 for nodejs22.x and 24 for nodejs24.x).",
    "The dev issuer approves an authorization request at once when its redirect URI is on loopback (no login; "
    "any other redirect URI, or every request with --consent, gets a consent page) "
    "for the one local user, and grants the stack's authScopes (mcp when it names none) plus every scope the "
    "server's toolScopes names.",
    "CloudFront-Viewer-Country comes from the request's own CloudFront-Viewer-Country header (or the default "
    "country); on AWS CloudFront sets it from the viewer's IP and overwrites any the viewer sent.",
    "Probe rounds: each fleet's Step Functions Express workflow (started by its schedule every minute) is run "
    "once at start-up to learn its interval and invocations; then each target's probe runs on its own timer at that "
    "interval (the same asynchronous invocations, without the minute's fan-out or Scheduler's start delay).",
    "One probe process per region runs invocations one after another (one execution environment); on AWS "
    "concurrent invocations get their own environments.",
    "The stack's CloudFront KeyValueStore (region health) is local/cloudfront/key_value_store.py, a file the local edge "
    "rereads when it changes; on AWS a published change reaches every edge location within seconds. The "
    "consumers send its API requests there (HEALTH_STORE_ENDPOINT_URL), signed with SigV4A as on AWS.",
    "The results table's replicas are copies in each probe region of the emulator; only alert claims (which every "
    "consumer writes in the home region's copy, as on AWS) and region-health streaks are replicated between them "
    "(what consumers read across regions), each region's "
    "outcomes stay in its own copy, "
    "where the status page reads them. Alert e-mail subscriptions are not sent: alerts show on the status page "
    "and in a local queue subscribed to each alert topic.",
    "A message a consumer fails is retried after --retry-delay seconds (default 5), not after the queue's "
    "visibility timeout (6x the consumer timeout), so failures and recoveries show within a probe interval.",
    "The local edge applies CloudFront's request limits (request line and headers 20,480 bytes, URL 8,192 "
    "bytes: 413) and its origin response timeout between packets (the program's originReadTimeout, as the "
    "router sets it: 504 when the origin is silent that long). Limits it does not apply, and why:",
    *(f"Not applied: {line}" for line in NOT_APPLIED),
    "The distribution's AWS WAF web ACL (the program's rules, read from its WebAcl resource) runs at the local "
    "edge before the viewer function, as on CloudFront: every client is 127.0.0.1, so the per-IP rules count "
    "every local client together. Where the emulation differs from WAF:",
    *(f"WAF: {line}" for line in WAF_NOT_EMULATED),
)
WEB_ACL = "aws:wafv2/webAcl:WebAcl"
WEB_ACL_BLOCK_LOG = "web-acl-blocks.json"


class PlanError(RuntimeError):
    """The program's resources cannot be mapped onto a local topology."""


def unwrap_secrets(value: Any) -> Any:
    """Plain values from mock inputs, where Pulumi marks secrets as {sig: ..., value: ...}."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG) is not None and "value" in value:
            return unwrap_secrets(value["value"])
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value


def probe_rounds_of(definition_json: str, execution_input: str | None = None) -> tuple[int, list[Invocation]]:
    """Seconds between rounds and the invocations of one round: the stack's rounds workflow
    (its Step Functions definition, as the program renders it) executed, never read back
    from a setting."""
    try:
        definition = json.loads(definition_json)
        invocations = run_definition(definition, json.loads(execution_input or "{}"))
        interval = interval_of(definition)
    except (ValueError, KeyError, TypeError) as exc:
        raise PlanError(f"the program's probe rounds workflow cannot be run: {exc}") from None
    first = min(i.at_s for i in invocations)
    return interval, [i for i in invocations if i.at_s == first]


@dataclass(frozen=True)
class Ports:
    edge: int
    issuer: int
    moto: int
    status: int
    origins: dict[str, int]
    kvs: int = 0  # the CloudFront KeyValueStore emulator (region health)
    # Region -> the local Function URL in front of that region's origin (local/aws/function_url.py).
    function_urls: dict[str, int] = field(default_factory=dict)

    @classmethod
    def assign(cls, regions: tuple[str, ...], edge_port: int, base_port: int) -> Ports:
        return cls(
            edge=edge_port,
            issuer=base_port,
            moto=base_port + 1,
            status=base_port + 2,
            kvs=base_port + 3,
            origins={r: base_port + ORIGIN_PORT_OFFSET + i for i, r in enumerate(regions)},
            function_urls={r: base_port + FUNCTION_URL_PORT_OFFSET + i for i, r in enumerate(regions)},
        )

    @classmethod
    def free(cls, regions: tuple[str, ...]) -> Ports:
        """Ports free right now, for a run beside others (tests, benchmarks)."""
        edge, issuer, moto, status, kvs, *rest = free_ports(5 + 2 * len(regions))
        return cls(edge=edge, issuer=issuer, moto=moto, status=status, kvs=kvs,
                   origins=dict(zip(regions, rest[:len(regions)], strict=True)),
                   function_urls=dict(zip(regions, rest[len(regions):], strict=True)))

    def urls(self) -> dict[str, int]:
        """Region -> the port the edge sends that region's requests to: its local Function URL."""
        missing = [r for r in self.origins if r not in self.function_urls]
        if missing:
            raise PlanError(f"no local Function URL port for region(s) {', '.join(missing)}")
        return dict(self.function_urls)

    def all(self) -> list[int]:
        return [self.edge, self.issuer, self.moto, self.status, *([self.kvs] if self.kvs else []),
                *self.origins.values(), *self.function_urls.values()]


@dataclass(frozen=True)
class Options:
    stack: str = "prod"
    edge_port: int = DEFAULT_EDGE_PORT
    base_port: int = DEFAULT_BASE_PORT
    probe_interval_s: float | None = None  # None: the stack's schedule
    default_country: str | None = None
    retry_delay_s: float = 5.0
    run_dir: Path | None = None
    ports: Ports | None = None  # every port given explicitly (tests pick free ones)
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S  # the dev issuer's access tokens
    consent: bool = False  # the dev issuer shows a consent page
    trusted_ca_file: str | None = None  # extra CA the dev issuer trusts for client metadata documents
    # Processes of the server per origin region; requests take them in turn, as Lambda's
    # execution environments: a server that keeps sessions in memory fails here as on AWS.
    origin_instances: int = DEFAULT_ORIGIN_INSTANCES

    def resolved_run_dir(self) -> Path:
        return self.run_dir or default_run_dir(self.stack)


def default_run_dir(stack: str) -> Path:
    """Where a running topology keeps its state unless told otherwise: ``.local/<stack>``,
    for a stack name or a stack file's path (``/abs/path/Pulumi.x.yaml``: ``.local/x``)."""
    return PROJECT_ROOT / ".local" / stack_name_of(resolve_stack_file(stack))


def plan_file_in(run_dir: Path) -> Path:
    """The plan a running topology's processes read (and the CLI's later commands)."""
    return run_dir / "plan.json"


@dataclass(frozen=True)
class QueueSpec:
    name: str
    region: str
    attributes: dict[str, str]

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{self.region}:123456789012:{self.name}"


@dataclass(frozen=True)
class TableSpec:
    name: str
    region: str  # home region
    replica_regions: list[str]
    hash_key: str
    range_key: str | None
    attributes: list[dict[str, str]]
    ttl_attribute: str | None
    stream_view_type: str | None

    @property
    def copy_regions(self) -> list[str]:
        """Every region holding a copy: the home region first, then the replicas."""
        return [self.region, *self.replica_regions]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    region: str

    @property
    def arn(self) -> str:
        return f"arn:aws:sns:{self.region}:123456789012:{self.name}"


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    interval_s: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class EventSourceSpec:
    queue_arn: str
    batch_size: int
    batching_window_s: float
    report_batch_item_failures: bool
    maximum_concurrency: int | None


@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda function in one region, with how it is triggered."""

    name: str
    region: str
    handler: str  # as on Lambda, e.g. probe.handler.handler (module at the zip root)
    environment: dict[str, str] = field(repr=False)
    timeout_s: int
    memory_mb: int
    schedules: list[ScheduleSpec] = field(default_factory=list)
    event_sources: list[EventSourceSpec] = field(default_factory=list)
    max_retries: int = 2
    max_event_age_s: int = 21600
    on_success: str | None = None  # queue ARN
    on_failure: str | None = None

    @property
    def service_name(self) -> str:
        return f"{self.name}-{self.region}"

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:123456789012:function:{self.name}"


@dataclass(frozen=True)
class OriginSpec:
    """A region's origin: ``instances`` processes of the server (the first on ``port``, the
    others on ``extra_ports``), behind its local Function URL, whose Host is ``host``."""

    region: str
    port: int
    environment: dict[str, str] = field(repr=False)
    readiness_path: str
    extra_ports: list[int] = field(default_factory=list)
    host: str = ""

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def ports(self) -> list[int]:
        """Every instance's port, the first one's first."""
        return [self.port, *self.extra_ports]

    @property
    def urls(self) -> list[str]:
        return [f"http://{LOOPBACK}:{port}" for port in self.ports]


@dataclass(frozen=True)
class HealthStoreSpec:
    """The stack's CloudFront KeyValueStore (region health), served by local/cloudfront/key_value_store.py
    from ``file``, which the local edge reads as CloudFront's edge reads the store."""

    arn: str
    file: str
    items: dict[str, str]  # what the program seeds (its KeyvaluestoreKey resources)


@dataclass(frozen=True)
class LocalPlan:
    stack: str
    server_id: str
    mcp_path: str
    regions: list[str]
    default_region: str
    probe_regions: list[str]
    run_dir: str
    ports: Ports
    issuer: IssuerSettings
    origins: list[OriginSpec]
    edge: EdgeSettings
    functions: list[FunctionSpec]
    queues: list[QueueSpec]
    tables: list[TableSpec]
    topics: list[TopicSpec]
    secrets: dict[str, dict[str, str]]  # region -> name -> value
    retry_delay_s: float
    default_country: str | None
    health_store: HealthStoreSpec | None = None
    # The stack's server (local.origins.server_document): what every region's origin runs.
    server: dict[str, Any] = field(default_factory=dict)

    # --- URLs ---------------------------------------------------------------------
    @property
    def edge_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.edge}"

    @property
    def mcp_url(self) -> str:
        return self.edge_url + self.mcp_path

    @property
    def moto_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.moto}"

    @property
    def kvs_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.kvs}"

    @property
    def status_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.status}/"

    @property
    def plan_file(self) -> Path:
        return plan_file_in(Path(self.run_dir))

    def aws_environment(self, region: str) -> dict[str, str]:
        """What points boto3 (the handlers' and ours) at the emulator, as that region."""
        return {
            **FAKE_AWS_CREDENTIALS,
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "AWS_ENDPOINT_URL": self.moto_url,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    # --- (de)serialisation ----------------------------------------------------------
    def to_json(self) -> str:
        doc = dataclasses.asdict(self)
        doc["issuer"] = json.loads(self.issuer.to_json())
        doc["edge"] = json.loads(self.edge.to_json())
        return json.dumps(doc, indent=1)

    @classmethod
    def from_json(cls, text: str) -> LocalPlan:
        doc = json.loads(text)
        doc["ports"] = Ports(**doc["ports"])
        doc["issuer"] = IssuerSettings(**doc["issuer"])
        doc["edge"] = EdgeSettings.from_json(json.dumps(doc["edge"]))
        doc["origins"] = [OriginSpec(**o) for o in doc["origins"]]
        doc["functions"] = [
            FunctionSpec(**{**f, "schedules": [ScheduleSpec(**s) for s in f["schedules"]],
                            "event_sources": [EventSourceSpec(**e) for e in f["event_sources"]]})
            for f in doc["functions"]
        ]
        doc["queues"] = [QueueSpec(**q) for q in doc["queues"]]
        doc["tables"] = [TableSpec(**t) for t in doc["tables"]]
        doc["topics"] = [TopicSpec(**t) for t in doc["topics"]]
        if doc.get("health_store"):
            doc["health_store"] = HealthStoreSpec(**doc["health_store"])
        return cls(**doc)

    def write(self) -> Path:
        """Write the plan where children find it; readable by this user only (it holds secrets)."""
        path = self.plan_file
        write_private(path, self.to_json())
        return path

    @classmethod
    def read(cls, path: str | Path) -> LocalPlan:
        try:
            return cls.from_json(Path(path).read_text())
        except (KeyError, TypeError, ValueError) as exc:
            # A topology started by another version of this code (or a damaged file).
            raise PlanError(f"{path} is not a plan this version can read ({type(exc).__name__}: {exc}): "
                            "stop the running topology and start it again with scripts/run-local") from None


def token_for(plan: LocalPlan, client_id: str = DEV_CLIENT_ID, scope: str | None = None) -> str:
    """A bearer token for ``client_id`` from the running dev issuer (client credentials;
    ``scope`` space-separated, default the issuer's default scopes)."""
    import httpx

    from local.oauth.issuer import request_token

    secret = plan.issuer.clients.get(client_id)
    if secret is None:
        raise SystemExit(f"the dev issuer has no client {client_id!r} (clients: {', '.join(plan.issuer.clients)})")
    try:
        return str(request_token(plan.issuer.token_url, client_id, secret, plan.issuer.audience,
                                 scope=scope)["access_token"])
    except httpx.TransportError as exc:
        raise SystemExit(f"the dev issuer at {plan.issuer.token_url} does not answer ({type(exc).__name__}): "
                         f"is scripts/run-local{'' if plan.stack == 'prod' else ' --stack ' + plan.stack} running?") from None


# --- reading the program -----------------------------------------------------------------


def topology_of(run: ProgramRun) -> dict[str, Any]:
    """The program's description of its topology (the ``topology`` stack output)."""
    topology = run.outputs.get("topology")
    if not isinstance(topology, dict) or topology.get("version") != TOPOLOGY_VERSION:
        raise PlanError(f"the program exports no topology output of version {TOPOLOGY_VERSION} "
                        f"(found {type(topology).__name__}): this version of local/ cannot read it")
    return topology


def _part(run: ProgramRun, typ: str, key: str, value: Any) -> Resource:
    """The resource the topology names (by ARN or id)."""
    try:
        return run.find(typ, key, value)
    except AssertionError:
        raise PlanError(f"the topology names {value!r} ({typ}), which the program does not create once") from None


def _function_by_arn(run: ProgramRun, arn: str) -> Resource:
    region = arn.split(":")[3]
    name = arn.split(":function:")[-1].split(":")[0]
    for r in run.of_type(LAMBDA):
        if r.region == region and r.get("name") == name:
            return r
    raise PlanError(f"no Lambda function for {arn} in the program")


def secret_name_of(arn: str) -> str:
    """A Secrets Manager secret's name from its ARN (which appends "-" and 6 characters)."""
    match = re.fullmatch(r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:(.+)-[A-Za-z0-9]{6}", arn)
    if match is None:
        raise PlanError(f"{arn!r} is not a Secrets Manager secret ARN")
    return match.group(1)


def _env(resource: Resource) -> dict[str, str]:
    env = unwrap_secrets(resource.inputs.get("environment") or {})
    return {k: str(v) for k, v in (env.get("variables") or {}).items()}


def shipped_router_source(router: Resource) -> str:
    """The router module inside the package the program uploads."""
    archive = router.inputs["code"]
    path = Path(getattr(archive, "path", ""))
    module = str(router.inputs["handler"]).rpartition(".")[0] + ".py"
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as zf:
        return zf.read(module).decode("utf-8")


def _check_same(what: str, shipped: str, rendered: str) -> None:
    if shipped != rendered:
        raise PlanError(
            f"the program's {what} is not what the renderer produces for this stack, so the local edge could "
            "not run what ships; render it only through edge/ (see local/plan.py)"
        )


def _local_viewer_code(config: StackConfig, run: ProgramRun, issuer: str, audience: str, edge_port: int) -> str:
    from edge.viewer_function import render_viewer_function

    stack_settings = config.viewer_function_settings()
    viewer = _part(run, "aws:cloudfront/function:Function", "arn", topology_of(run)["edge"]["viewerFunctionArn"])
    _check_same("CloudFront Function code", viewer["code"], render_viewer_function(stack_settings))
    local = dataclasses.replace(stack_settings, issuer=issuer, audience=audience,
                                public_host=f"{LOOPBACK}:{edge_port}", public_scheme="http")
    return render_viewer_function(local)


def shipped_gate_config(constants_source: str) -> dict[str, Any]:
    """The ``GATE_CONFIG`` literal of a rendered ``edge_gate/constants.py``."""
    import ast

    for node in ast.parse(constants_source).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "GATE_CONFIG" and node.value:
            value = ast.literal_eval(node.value)
            if isinstance(value, dict):
                return value
    raise PlanError("the shipped edge_gate/constants.py holds no rendered GATE_CONFIG")


def gate_settings_of(config: Mapping[str, Any], **local: Any) -> Any:
    """The ``GateSettings`` a rendered ``GATE_CONFIG`` came from, with ``local`` replacing
    fields (the issuer, audiences, key set URL, resource and authorization servers)."""
    from edge.gate_package import GateSettings

    scoped = config.get("scoped_methods") or {}
    metadata = config["resource_metadata"]
    settings = GateSettings(
        server_id=config.get("server_id", ""),
        issuer=config["issuer"], audiences=tuple(config["audiences"]), jwks_url=config["jwks_url"],
        resource=metadata["resource"], authorization_servers=tuple(metadata["authorization_servers"]),
        jwks=config["jwks"], algorithms=tuple(config["algorithms"]), leeway_s=config["leeway_s"],
        base_scopes=tuple(config["base_scopes"]), tool_scopes=scoped.get("tools/call", {}),
        resource_scopes=scoped.get("resources/read", {}), prompt_scopes=scoped.get("prompts/get", {}),
        scopes_supported=tuple(metadata["scopes_supported"]),
        jwks_refresh_cooldown_s=config["jwks_refresh_cooldown_s"], jwks_max_backoff_s=config["jwks_max_backoff_s"],
        jwks_fetch_timeout_s=config["jwks_fetch_timeout_s"], metadata_max_age_s=config["metadata_max_age_s"],
        authorization_header=config["authorization_header"], subject_header=config["subject_header"],
        client_id_header=config["client_id_header"], scopes_header=config["scopes_header"],
        probe_client_id=config.get("probe_client_id", ""),
        metric_tools=tuple(config.get("metric_tools", ())),
        allowed_origins=tuple(config.get("allowed_origins", ())),
        rate_limited_tools=tuple(config.get("rate_limited_tools", ())),
        waf_body_inspection_kb=config.get("waf_body_inspection_bytes", 16 * 1024) // 1024,
    )
    routes = config.get("routes") or {}
    for path, route in routes.items():
        if route.get("kind") == "mcp":  # the public path, and the server's own path it maps onto
            settings = dataclasses.replace(settings, mcp_path=path, get_stream=bool(route.get("get_stream")),
                                           origin_path=str(route.get("origin_path") or ""))
        elif route.get("kind") == "readiness":
            settings = dataclasses.replace(settings, readiness_path=path)
    return dataclasses.replace(settings, **local)


def _local_gate(config: StackConfig, run: ProgramRun, distribution: Resource, url_ports: Mapping[str, int],
                issuer: IssuerSettings, audience: str, run_dir: Path) -> tuple[str, str, bool]:
    """The origin-request function's package folder for the local edge: the program's own zip,
    extracted, with ``geo_router.py`` and ``edge_gate/constants.py`` rendered again with the
    local origin targets (each region's local Function URL) and the local issuer; every other
    byte (the gate's code, its wheels) as shipped. Checked first: the shipped files are what
    the renderers produce from the stack, so the local values are the only change."""
    from devkit.shipped import extract_package
    from edge.gate_package import GATE_PACKAGE, edge_gate_package
    from edge.router import ROUTER_MODULE, OriginTarget, render_router

    associations = distribution["defaultCacheBehavior"].get("lambdaFunctionAssociations") or []
    origin_request = [a for a in associations if a.get("eventType") == "origin-request"]
    if len(origin_request) != 1:
        raise PlanError("the distribution has no origin-request Lambda@Edge association to emulate")
    topology = topology_of(run)
    if origin_request[0]["lambdaArn"] != topology["edge"]["routerFunctionArn"]:
        raise PlanError("the distribution's origin-request function is not the one the topology names")
    function = _function_by_arn(run, origin_request[0]["lambdaArn"])
    if not str(function.inputs.get("runtime", "")).startswith("python"):
        raise PlanError(f"the edge function runs on {function.inputs.get('runtime')}; the local edge runs Python only")
    handler = str(function.inputs["handler"])
    hosts = {region: origin["host"] for region, origin in topology["origins"].items()}
    router_options: dict[str, Any] = {"read_timeout_s": config.edge.origin_read_timeout_s,
                                      "keepalive_timeout_s": config.edge.origin_keepalive_s}
    archive = Path(getattr(function.inputs["code"], "path", ""))
    with zipfile.ZipFile(io.BytesIO(archive.read_bytes())) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    constants = f"{GATE_PACKAGE}/constants.py"
    if constants not in entries:
        raise PlanError(f"the edge function's package holds no {constants}: not the edge gate")
    shipped = {name: data.decode("utf-8") for name, data in entries.items()
               if name == f"{ROUTER_MODULE}.py" or (name.startswith(f"{GATE_PACKAGE}/") and name.endswith(".py"))}
    stack_settings = gate_settings_of(shipped_gate_config(shipped[constants]), mcp_path=config.mcp_path)
    stack_files = edge_gate_package({r: OriginTarget(hosts[r]) for r in config.regions}, config.default_region,
                                    gate=stack_settings, **router_options).files
    _check_same("Lambda@Edge gate", json.dumps(shipped, sort_keys=True), json.dumps(stack_files, sort_keys=True))
    local_settings = dataclasses.replace(
        stack_settings, issuer=issuer.issuer, audiences=(audience,), jwks_url=issuer.jwks_url, resource=audience,
        authorization_servers=(issuer.issuer,), jwks={"keys": []},
        # What the dev issuer grants when a client names no scope: clients ask for it first and
        # step up to a tool's scopes when the edge answers 403 insufficient_scope.
        scopes_supported=tuple(issuer.default_scopes))
    local_files = edge_gate_package({r: OriginTarget(LOOPBACK, url_ports[r], "http") for r in config.regions},
                                    config.default_region, gate=local_settings, **router_options).files
    if render_router({r: OriginTarget(hosts[r]) for r in config.regions}, config.default_region,
                     **router_options) != shipped[f"{ROUTER_MODULE}.py"]:
        raise PlanError("the shipped geo_router.py is not the stack's rendering")
    changed = {name: text for name, text in local_files.items() if shipped.get(name) != text}
    folder = extract_package(archive, run_dir / "edge-function", changed)
    return str(folder), handler, bool(origin_request[0].get("includeBody"))


def _policy(run: ProgramRun) -> OriginRequestPolicy:
    policy = _part(run, "aws:cloudfront/originRequestPolicy:OriginRequestPolicy", "id",
                   topology_of(run)["edge"]["originRequestPolicyId"])
    headers = policy["headersConfig"]
    cookies = policy["cookiesConfig"]
    queries = policy["queryStringsConfig"]
    return OriginRequestPolicy(
        header_behavior=headers["headerBehavior"],
        header_items=tuple((headers.get("headers") or {}).get("items") or ()),
        cookie_behavior=cookies["cookieBehavior"],
        cookie_items=tuple((cookies.get("cookies") or {}).get("items") or ()),
        query_string_behavior=queries["queryStringBehavior"],
        query_string_items=tuple((queries.get("queryStrings") or {}).get("items") or ()),
    )


def _removed_response_headers(run: ProgramRun, distribution: Resource) -> tuple[str, ...]:
    """The headers the default behaviour's response headers policy removes (none without a policy)."""
    policy_id = distribution["defaultCacheBehavior"].get("responseHeadersPolicyId")
    if not policy_id:
        return ()
    policy = _part(run, "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy", "id", policy_id)
    items = (policy.inputs.get("removeHeadersConfig") or {}).get("items") or []
    return tuple(item["header"] for item in items)


def _default_origin(run: ProgramRun, distribution: Resource, origin_ports: Mapping[str, int]) -> OriginConfig:
    origins = unwrap_secrets(distribution.inputs["origins"])
    target = distribution["defaultCacheBehavior"]["targetOriginId"]
    (origin,) = [o for o in origins if o["originId"] == target]
    region_by_host = {origin["host"]: region for region, origin in topology_of(run)["origins"].items()}
    region = region_by_host.get(origin["domainName"])
    if region is None:
        raise PlanError(f"the default origin {origin['domainName']} is none of the program's Function URL hosts")
    custom = origin["customOriginConfig"]
    headers = {h["name"]: h["value"] for h in origin.get("customHeaders") or []}
    return OriginConfig(
        domain_name=LOOPBACK, port=origin_ports[region], protocol="http",
        read_timeout_s=int(custom.get("originReadTimeout", 30)),
        keepalive_timeout_s=int(custom.get("originKeepaliveTimeout", 5)),
        custom_headers=headers, ssl_protocols=tuple(custom.get("originSslProtocols") or ("TLSv1.2",)),
    )


def _queues(run: ProgramRun) -> list[QueueSpec]:
    # Redrive allow policies name the queue they belong to.
    allow = {r["queueUrl"].rsplit("/", 1)[-1] + "@" + r.region: r["redriveAllowPolicy"]
             for r in run.of_type("aws:sqs/redriveAllowPolicy:RedriveAllowPolicy")}
    queues = []
    arns = [arn for fleet in topology_of(run)["probeFleets"].values() for arn in fleet["queueArns"]]
    for q in (_part(run, "aws:sqs/queue:Queue", "arn", arn) for arn in arns):
        attributes = {
            "VisibilityTimeout": str(int(q.get("visibilityTimeoutSeconds", 30))),
            "MessageRetentionPeriod": str(int(q.get("messageRetentionSeconds", 345600))),
        }
        if q.get("redrivePolicy"):
            attributes["RedrivePolicy"] = str(q["redrivePolicy"])
        if q.get("sqsManagedSseEnabled") is not None:
            attributes["SqsManagedSseEnabled"] = str(bool(q["sqsManagedSseEnabled"])).lower()
        if f"{q['name']}@{q.region}" in allow:
            attributes["RedriveAllowPolicy"] = allow[f"{q['name']}@{q.region}"]
        queues.append(QueueSpec(name=q["name"], region=q.region, attributes=attributes))
    # Redrive targets first: a queue's dead-letter target must exist when it is created.
    queues.sort(key=lambda q: "RedrivePolicy" in q.attributes)
    return queues


def _tables(run: ProgramRun) -> list[TableSpec]:
    tables = []
    for t in [_part(run, "aws:dynamodb/table:Table", "arn", topology_of(run)["resultsTableArn"])]:
        ttl = t.get("ttl") or {}
        tables.append(TableSpec(
            name=t["name"], region=t.region,
            replica_regions=[r["regionName"] for r in t.get("replicas") or []],
            hash_key=t["hashKey"], range_key=t.get("rangeKey"),
            attributes=[{"name": a["name"], "type": a["type"]} for a in t["attributes"]],
            ttl_attribute=ttl.get("attributeName") if ttl.get("enabled") else None,
            stream_view_type=t.get("streamViewType") if t.get("streamEnabled") else None,
        ))
    return tables


def _endpoint_map(run: ProgramRun, edge_mcp_url: str, origin_ports: Mapping[str, int]) -> dict[str, str]:
    """Program URL prefix -> local URL prefix, for the probe targets."""
    topology = topology_of(run)
    mapping = {topology["edge"]["mcpUrl"]: edge_mcp_url}
    if topology["edge"].get("distributionMcpUrl"):  # what the probes target
        mapping[topology["edge"]["distributionMcpUrl"]] = edge_mcp_url
    for region, origin in topology["origins"].items():
        # The program's Function URL is the local Function URL in front of the origin.
        mapping[origin["url"].rstrip("/")] = f"http://{LOOPBACK}:{origin_ports[region]}"
    return mapping


def _localize_endpoint(payload: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    endpoint = payload.get("endpoint")
    if not isinstance(endpoint, str):
        return payload
    for prefix in sorted(mapping, key=len, reverse=True):
        if endpoint == prefix or endpoint.startswith(prefix.rstrip("/") + "/"):
            return {**payload, "endpoint": mapping[prefix] + endpoint[len(prefix.rstrip("/")):]}
    raise PlanError(f"probe endpoint {endpoint} is neither the edge nor an origin of the program")


def _functions(run: ProgramRun, endpoint_map: Mapping[str, str], probe_interval_s: float | None) -> list[FunctionSpec]:
    by_key: dict[tuple[str, str], dict[str, Any]] = {}

    def entry(resource: Resource) -> dict[str, Any]:
        key = (resource["name"], resource.region)
        if key not in by_key:
            by_key[key] = {
                "name": resource["name"], "region": resource.region, "handler": resource["handler"],
                "environment": _env(resource), "timeout_s": int(resource.get("timeout", 3)),
                "memory_mb": int(resource.get("memorySize", 128)), "schedules": [], "event_sources": [],
            }
        return by_key[key]

    topology = topology_of(run)
    fleets = topology["probeFleets"].values()
    schedules = [_part(run, "aws:scheduler/schedule:Schedule", "arn", arn) for f in fleets for arn in f["scheduleArns"]]
    mappings = [_part(run, "aws:lambda/eventSourceMapping:EventSourceMapping", "arn", arn)
                for f in fleets for arn in f["eventSourceMappingArns"]]
    for schedule in schedules:
        if schedule.get("state", "ENABLED") != "ENABLED":
            continue
        # The schedule starts the rounds workflow every minute; locally each target's probe runs
        # on its own timer at the workflow's interval (the same invocations, without the minute's fan-out).
        target = schedule["target"]
        machine = _part(run, "aws:sfn/stateMachine:StateMachine", "arn", target["arn"])
        interval, invocations = probe_rounds_of(machine["definition"], target.get("input"))
        for invocation in invocations:
            fn = entry(_function_by_arn(run, invocation.function_arn))
            payload = _localize_endpoint(dict(invocation.payload), endpoint_map)
            label = f"{payload.get('target')}-{payload.get('targetRegion')}"
            fn["schedules"].append(ScheduleSpec(name=f"{schedule['name']}/{label}",
                                                interval_s=float(probe_interval_s or interval), payload=payload))

    for mapping in mappings:
        fn = entry(_function_by_arn(run, mapping["functionName"]))
        scaling = mapping.get("scalingConfig") or {}
        fn["event_sources"].append(EventSourceSpec(
            queue_arn=mapping["eventSourceArn"],
            batch_size=int(mapping.get("batchSize", 10)),
            batching_window_s=float(mapping.get("maximumBatchingWindowInSeconds", 0)),
            report_batch_item_failures="ReportBatchItemFailures" in (mapping.get("functionResponseTypes") or []),
            maximum_concurrency=int(scaling["maximumConcurrency"]) if scaling.get("maximumConcurrency") else None,
        ))

    # Async-invoke configurations name the function they configure.
    for invoke in run.of_type("aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig"):
        key = (invoke["functionName"].split(":function:")[-1].split(":")[0], invoke.region)
        if key not in by_key:
            continue  # not triggered by anything the local run drives
        destinations = invoke.get("destinationConfig") or {}
        by_key[key].update(
            max_retries=int(invoke.get("maximumRetryAttempts", 2)),
            max_event_age_s=int(invoke.get("maximumEventAgeInSeconds", 21600)),
            on_success=(destinations.get("onSuccess") or {}).get("destination"),
            on_failure=(destinations.get("onFailure") or {}).get("destination"),
        )
    return [FunctionSpec(**f) for f in by_key.values()]


def tool_scopes(server: ServerSpec) -> tuple[str, ...]:
    """Every scope the stack's server.toolScopes names (the dev issuer grants them)."""
    return tuple(dict.fromkeys(scope for needed in server.tool_scopes.values() for scope in needed))


def server_document(server: ServerSpec) -> dict[str, Any]:
    """The server spec as the plan file holds it (the stack file's keys)."""
    doc: dict[str, Any] = {"source": str(server.source), "runtime": server.runtime, "command": server.command,
                           "path": server.path, "toolScopes": {k: list(v) for k, v in server.tool_scopes.items()}}
    if server.install:
        doc["install"] = server.install
    if server.readiness_path:
        doc["readinessPath"] = server.readiness_path
    return doc


def _extra_ports(count: int, taken: set[int]) -> list[int]:
    """``count`` ports free now and not in ``taken`` (which grows by them)."""
    chosen: list[int] = []
    while len(chosen) < count:
        chosen += [p for p in free_ports(count - len(chosen)) if p not in taken and p not in chosen]
    taken.update(chosen)
    return chosen


def _origins(run: ProgramRun, config: StackConfig, ports: Ports, server: ServerSpec,
             instances: int = DEFAULT_ORIGIN_INSTANCES) -> list[OriginSpec]:
    """Each region's origin: the function's environment as the program sets it (the Web
    Adapter's settings included, which ``local.origins`` passes as plain variables), with
    what names AWS-only things left out; ``instances`` processes of it (the first on the
    region's port, the others on ports free now), and the Host of the program's Function URL."""
    if instances < 1:
        raise PlanError(f"origin instances = {instances}: at least 1 (2 makes a stateful server fail as on Lambda)")
    described = topology_of(run)["origins"]
    origins = []
    taken = set(ports.all())
    for region in config.regions:
        if region not in described:
            raise PlanError(f"the program's topology has no origin in {region}")
        env = _env(_function_by_arn(run, described[region]["functionArn"]))
        readiness = env.get("AWS_LWA_READINESS_CHECK_PATH") or server.readiness_path or "/"
        # The exec wrapper is the adapter's own start-up (run.sh is started directly here);
        # the secret's id names a Secrets Manager secret this run has no copy of.
        for name in ("AWS_LAMBDA_EXEC_WRAPPER",):
            env.pop(name, None)
        env.update({"AWS_REGION": region, "AWS_DEFAULT_REGION": region})
        # The program's Function URL host; a stable one of the same shape should it name none.
        host = urlsplit(described[region].get("url") or "").hostname or function_url_host(
            hashlib.sha256(f"{config.server_id}|{region}".encode()).hexdigest()[:32], region)
        origins.append(OriginSpec(region=region, port=ports.origins[region], environment=env,
                                  readiness_path=readiness, extra_ports=_extra_ports(instances - 1, taken),
                                  host=host))
    return origins


def _health_store(run: ProgramRun, run_dir: Path) -> HealthStoreSpec | None:
    """The program's region-health store and the keys it seeds, if it has one."""
    arn = topology_of(run)["edge"].get("healthStoreArn")
    if not arn:
        return None
    _part(run, "aws:cloudfront/keyValueStore:KeyValueStore", "arn", arn)
    items = {str(k["key"]): str(unwrap_secrets(k.inputs["value"]))
             for k in run.of_type("aws:cloudfront/keyvaluestoreKey:KeyvaluestoreKey") if k["keyValueStoreArn"] == arn}
    return HealthStoreSpec(arn=arn, file=str(run_dir / "region-health-store.json"), items=items)


def web_acl_inputs(run: ProgramRun) -> dict[str, Any] | None:
    """The inputs of the web ACL the topology names (what WAF evaluates), or None without one."""
    arn = topology_of(run)["edge"].get("webAclArn")
    if not arn:
        return None
    acl = _part(run, WEB_ACL, "arn", arn)
    if acl.get("scope") != "CLOUDFRONT":
        raise PlanError(f"the distribution's web ACL {arn} has scope {acl.get('scope')!r}, not CLOUDFRONT")
    return {k: unwrap_secrets(acl.inputs[k]) for k in ("rules", "customResponseBodies", "associationConfig",
                                                        "defaultAction") if k in acl.inputs}


def build_plan(options: Options, run: ProgramRun | None = None) -> LocalPlan:
    """Run the program under mocks and map what it deploys onto loopback."""
    from devkit.mock_program import run_program

    config = load_from_stack_file(options.stack)
    server = server_spec(config)
    stack_file = resolve_stack_file(options.stack)  # a stack name, or a stack file's path anywhere
    run = run or run_program(stack_name_of(stack_file), stack_file=stack_file)
    ports = options.ports or Ports.assign(config.regions, options.edge_port, options.base_port)
    missing = [r for r in config.regions if r not in ports.origins]
    if missing:
        raise PlanError(f"no origin port for region(s) {', '.join(missing)}")
    run_dir = options.resolved_run_dir()
    edge_url = f"http://{LOOPBACK}:{ports.edge}"
    audience = edge_url + config.mcp_path

    issuer_base = f"http://{LOOPBACK}:{ports.issuer}"
    clients = {config.auth.probe_client_id: new_client_secret(), DEV_CLIENT_ID: new_client_secret()}
    advertised = config.auth.scopes or ("mcp",)
    issuer = IssuerSettings(
        issuer=issuer_base + (urlsplit(config.auth.issuer).path or "/"),
        audience=audience,
        token_path=urlsplit(config.auth.token_url).path or "/oauth/token",
        jwks_path=urlsplit(config.auth.jwks_url).path or "/.well-known/jwks.json",
        key_file=str(run_dir / "issuer-key.pem"),
        clients=clients,
        token_lifetime_s=options.token_lifetime_s,
        scopes=tuple(dict.fromkeys((*advertised, *tool_scopes(server)))),
        default_scopes=advertised,
        consent=options.consent,
        trusted_ca_file=options.trusted_ca_file,
    )
    distribution = _part(run, "aws:cloudfront/distribution:Distribution", "id",
                         topology_of(run)["edge"]["distributionId"])
    gate_folder, gate_handler, include_body = _local_gate(config, run, distribution, ports.urls(), issuer, audience,
                                                          run_dir)
    health_store = _health_store(run, run_dir)
    edge = EdgeSettings(
        viewer_function_code=_local_viewer_code(config, run, issuer.issuer, audience, ports.edge),
        router_source="",
        router_handler=gate_handler,
        function_package=gate_folder,
        include_body=include_body,
        default_origin=_default_origin(run, distribution, ports.urls()),
        policy=_policy(run),
        default_country=options.default_country,
        distribution_domain=LOOPBACK,
        health_store_file=health_store.file if health_store else None,
        web_acl=web_acl_inputs(run),
        web_acl_block_log=str(run_dir / WEB_ACL_BLOCK_LOG),
        removed_response_headers=_removed_response_headers(run, distribution),
    )

    # Values in function environments that name AWS-only things, mapped to local ones.
    function_env = {
        "TOKEN_URL": issuer.token_url,
        "TOKEN_AUDIENCE": audience,
    }
    functions = _functions(run, _endpoint_map(run, audience, ports.urls()), options.probe_interval_s)
    secrets_by_region: dict[str, dict[str, str]] = {region: {} for region in config.probes.regions}
    for fn in functions:
        if client_secret_name := fn.environment.get(ProbeEnv.CLIENT_SECRET_NAME):
            # The name the program gives the probe (probeClientSecretName, or the one it creates).
            secrets_by_region.setdefault(fn.region, {})[client_secret_name] = clients[config.auth.probe_client_id]
        for key, value in function_env.items():
            if key in fn.environment:
                fn.environment[key] = value
        if health_store and fn.environment.get("HEALTH_STORE_ARN") == health_store.arn:
            # boto3 derives the KeyValueStore API's host from the ARN; locally it is the emulator.
            fn.environment["HEALTH_STORE_ENDPOINT_URL"] = f"http://{LOOPBACK}:{ports.kvs}"

    return LocalPlan(
        stack=options.stack,
        server_id=config.server_id,
        mcp_path=config.mcp_path,
        regions=list(config.regions),
        default_region=config.default_region,
        probe_regions=list(config.probes.regions),
        run_dir=str(run_dir),
        ports=ports,
        issuer=issuer,
        origins=_origins(run, config, ports, server, options.origin_instances),
        edge=edge,
        functions=functions,
        queues=_queues(run),
        tables=_tables(run),
        topics=[TopicSpec(name=t["name"], region=t.region)
                for t in (_part(run, "aws:sns/topic:Topic", "arn", arn) for arn in topology_of(run)["alertTopicArns"].values())],
        secrets=secrets_by_region,
        health_store=health_store,
        retry_delay_s=options.retry_delay_s,
        default_country=options.default_country,
        server=server_document(server),
    )
