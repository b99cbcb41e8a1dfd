"""The stack's typed records: what ``stack_config.checks`` makes of valid raw values.

Each record is the stack's view of one concern; the program turns them into each
component's own typed args (``__main__.py``), whose shape is the component's contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from edge.firewall_rules import FirewallSettings
from edge.viewer_function import ViewerFunctionSettings
from functions.contract import HEALTH_FAILURE_ROUNDS_DEFAULT, HEALTH_RECOVERY_ROUNDS_DEFAULT, majority


@dataclass(frozen=True)
class OriginSizing:
    memory_mb: int
    timeout_s: int
    reserved_concurrency: int  # 0: none reserved (originReservedConcurrency unset)
    provisioned_min: int
    provisioned_max: int

    @property
    def provisioned(self) -> bool:
        return self.provisioned_min > 0


@dataclass(frozen=True)
class ServerConfig:
    """``mcp-edge:server``: the MCP server every origin runs, a folder of code (``source``,
    ``runtime``, ``command``, ``install``) or an image (``image`` or ``image_digest``).
    Folders are as the program reads them: relative to the project root (the program's
    working directory), or absolute (a folder named from a stack file elsewhere)."""

    path: str = "/mcp"
    source: str | None = None
    runtime: str | None = None
    command: str | None = None
    install: str | None = None
    readiness_path: str | None = None
    image: str | None = None
    image_digest: str | None = None
    # The server streams on GET (getStream): the gate forwards GET on the MCP path instead of a 405.
    get_stream: bool = False
    # Tool name -> the OAuth scopes a tools/call of it needs (checked at the edge).
    tool_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def kind(self) -> str:
        """source, image or imageDigest."""
        return "source" if self.source else "image" if self.image else "imageDigest"


@dataclass(frozen=True)
class AutoScaling:
    utilization_target: float
    scale_in_cooldown_s: int
    scale_out_cooldown_s: int


@dataclass(frozen=True)
class AuthConfig:
    issuer: str
    audience: str
    jwks_url: str
    algorithms: tuple[str, ...]
    leeway_s: int
    token_url: str
    probe_client_id: str
    probe_client_secret_name: str
    scopes: tuple[str, ...] = ()  # advertised in the protected resource metadata
    # probeClientSecret is set: the stack creates probe_client_secret_name (a name of its own) holding it.
    creates_probe_client_secret: bool = False


@dataclass(frozen=True)
class EdgeConfig:
    price_class: str
    origin_read_timeout_s: int
    origin_keepalive_s: int
    custom_domain: str | None
    certificate_arn: str | None
    # Browser origins allowed on the MCP path (allowedOrigins); none: browsers are refused.
    allowed_origins: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeConfig:
    regions: tuple[str, ...]
    interval_s: int  # seconds between probe rounds
    timeout_s: int
    deadline_s: int
    degraded_latency_ms: int
    history_ttl_days: int
    consumer_timeout_s: int
    alert_email: str | None
    # Where the results table lives (its replicas are in the other probe regions).
    table_home_region: str = ""


@dataclass(frozen=True)
class FailoverConfig:
    """Region health votes (functions/results/health.py): who must agree, after how many rounds."""

    quorum: int = 0  # 0: a majority of the probe regions
    failure_threshold: int = HEALTH_FAILURE_ROUNDS_DEFAULT
    recovery_threshold: int = HEALTH_RECOVERY_ROUNDS_DEFAULT

    def quorum_of(self, probe_regions: int) -> int:
        """The quorum in effect for this many probe regions."""
        return self.quorum or majority(probe_regions)


@dataclass(frozen=True)
class AlarmConfig:
    """Thresholds of the operations dashboard's alarm on a region failing while its probes succeed."""

    origin_error_rate_percent: int = 5
    origin_min_invocations: int = 20


@dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    regions: tuple[str, ...]
    default_region: str
    server_id: str
    mcp_path: str
    auth: AuthConfig
    origin: OriginSizing
    origin_overrides: Mapping[str, OriginSizing]
    autoscaling: AutoScaling
    lwa_layer_version: int
    log_retention_days: int
    edge: EdgeConfig
    probes: ProbeConfig
    server: ServerConfig = ServerConfig()
    failover: FailoverConfig = FailoverConfig()
    cold_start: str = "provisioned"  # COLD_START_MODES
    origin_tracing: bool = True  # Lambda active tracing (X-Ray) on the origins
    alarms: AlarmConfig = AlarmConfig()
    firewall: FirewallSettings | None = None  # the edge's web ACL; None: wafEnabled is false

    def origin_for(self, region: str) -> OriginSizing:
        """Origin sizing for one region: the stack's, with that region's overrides."""
        return self.origin_overrides.get(region, self.origin)


    def viewer_function_settings(self) -> ViewerFunctionSettings:
        """What the viewer-request CloudFront Function is rendered from, for this stack."""
        return ViewerFunctionSettings(
            mcp_path=self.mcp_path,
            issuer=self.auth.issuer,
            audience=self.auth.audience,
            algorithms=tuple(self.auth.algorithms),
            leeway_s=self.auth.leeway_s,
            regions=tuple(self.regions),
            public_host=self.edge.custom_domain,
            scopes=tuple(self.auth.scopes),
            allowed_origins=tuple(self.edge.allowed_origins),
        )
