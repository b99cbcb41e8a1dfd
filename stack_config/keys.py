"""The stack's keys: every key the project reads, declared once (type, default, description).

``Pulumi.yaml``'s ``config:`` block is rendered from ``KEYS`` (``python -m
stack_config.project_file --write``; a test fails when it is stale), so ``pulumi config``
documents the stack and ``stack_config.checks`` enforces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import settings
from components.settings import Setting

PROJECT = "mcp-edge"

# Keys whose values travel in URLs, names or headers: ASCII only.
ASCII_ONLY_KEYS = frozenset({
    "regions", "defaultRegion", "serverId", "mcpPath", "authIssuer", "authJwksUrl", "authAlgorithms", "authTokenUrl",
    "probeClientId", "probeClientSecretName", "probeClientSecret", "originUtilizationTarget", "originOverrides",
    "edgePriceClass", "customDomain", "certificateArn", "probeRegions", "alertEmail", "resultsTableHomeRegion",
    "originColdStart", "allowedOrigins",
})

# The demo MCP server: what a stack deploys when it sets no server. The one place its
# folder is named (Pulumi.prod.yaml names it too, explicitly).
DEMO_SERVER_SOURCE = "examples/demo"
# examples/demo/README.md gives the same command (a test holds the two together).
DEMO_SERVER_COMMAND = ("python3 -m uvicorn demo_server.app:app --host 127.0.0.1 --port $PORT --loop asyncio "
                       "--http httptools --lifespan on --no-access-log --no-server-header --log-level warning "
                       "--timeout-keep-alive 75")
DEMO_SERVER: dict[str, Any] = {
    "source": DEMO_SERVER_SOURCE,
    "runtime": "python3.13",
    "command": DEMO_SERVER_COMMAND,
    "path": "/mcp",
}


_PULUMI_TYPES = {str: "string", int: "integer", bool: "boolean", tuple: "array", list: "array", dict: "object"}
OBJECT = "object"
"""A key whose value is a YAML mapping. Pulumi's project config declares only string,
integer, boolean and array keys, so ``Pulumi.yaml`` lists object keys in a comment
(``stack_config.project_file``) and ``stack_config.checks`` checks them."""


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # Pulumi project config type: string | integer | boolean | array; object (declared untyped)
    default: Any  # None: required, every stack must set it
    description: str
    secret: bool = False
    optional: bool = False  # with default None: may be left unset (the program reads None), not required

    @classmethod
    def declared(cls, name: str, setting: Setting, as_type: str | None = None) -> ConfigKey:
        """The key of a setting the components declare (``components/settings.py``): its
        default and description are the setting's; ``as_type`` only where the key is written
        as another type than the default's (a number the CLI keeps as a string)."""
        default = setting.default
        if default is None:  # optional: unset means something of its own (the description says what)
            assert as_type is not None, "a setting without a default needs as_type"
            return cls(name, as_type, None, setting.describe(), optional=True)
        kind = as_type or _PULUMI_TYPES[type(default)]
        if isinstance(default, tuple):
            default = list(default)
        elif isinstance(default, dict):
            default = dict(default)
        elif kind == "string":
            default = str(default)
        return cls(name, kind, default, setting.describe())


KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("server", "object", DEMO_SERVER,
              "The MCP server every origin region runs (an object), exactly one of: a folder of code (source: a folder "
              "relative to the stack file's folder (else to the project root), or absolute; runtime: python3.13, python3.12, nodejs22.x, nodejs24.x, java21 or "
              "provided.al2023; command: one POSIX simple command that starts the server on $PORT (NAME=value before the program allowed), exec'd by a generated run.sh; "
              "install: optional shell command run in a copy of the folder, by default pip for requirements.txt or "
              "npm ci --omit=dev for package-lock.json; readinessPath: optional, default path, reached through the edge by the probes only), image (a folder with a "
              "Dockerfile, built for arm64) or imageDigest (sha256:..., an image a pipeline pushed to every origin "
              "region's repository); and for all: path (where it serves MCP, default /mcp), toolScopes (tool name "
              "-> the OAuth scopes a call needs, checked at the edge) and getStream (true only for a server that "
              "streams on GET: the edge then forwards GET on the MCP path instead of answering 405, and each open "
              "stream holds an origin invocation, billed, until the origin's timeout; default false). The server "
              "speaks stateless Streamable HTTP; nothing of ours runs in it."),
    ConfigKey("regions", "array", ["us-east-1"], "AWS regions with an MCP origin (and a probe fleet unless probeRegions says otherwise)."),
    ConfigKey("defaultRegion", "string", "", "Region for viewers whose country is unknown; empty means the first of regions."),
    ConfigKey.declared("serverId", settings.SERVER_ID),
    ConfigKey.declared("mcpPath", settings.MCP_PATH),
    ConfigKey("authIssuer", "string", None, "OAuth issuer (https URL) whose tokens the MCP server accepts; the JWT iss claim."),
    ConfigKey("authAudience", "string", None, "Audience the tokens must carry (the aud claim), usually the public MCP URL."),
    ConfigKey("authJwksUrl", "string", None, "https URL of the issuer's JSON Web Key Set."),
    ConfigKey.declared("authAlgorithms", settings.JWT_ALGORITHMS),
    ConfigKey.declared("authLeewaySeconds", settings.JWT_LEEWAY_S),
    ConfigKey("authScopes", "array", [], "OAuth scopes the MCP server advertises (protected resource metadata scopes_supported): the minimal set a client asks for; tools needing more answer 403 insufficient_scope."),
    ConfigKey("authTokenUrl", "string", "", "OAuth token endpoint (https) the probes use for client credentials; empty: derived as <issuer>/oauth/token."),
    ConfigKey("probeClientId", "string", "mcp-edge-probe", "OAuth client id the probes authenticate as."),
    ConfigKey("probeClientSecretName", "string", "mcp-edge/probe-client-secret", "Secrets Manager secret (in each probe region) holding the probes' client secret, when it exists already (probeClientSecret unset)."),
    ConfigKey("probeClientSecret", "string", "", "The probes' OAuth client secret (set with --secret): the stack creates the Secrets Manager secret <serverId>-<stack>-probe-client-secret holding it in every probe region; empty: probeClientSecretName exists already.", secret=True),
    ConfigKey.declared("originMemoryMb", settings.ORIGIN_MEMORY_MB),
    ConfigKey.declared("originTimeoutSeconds", settings.ORIGIN_TIMEOUT_S),
    ConfigKey.declared("originReservedConcurrency", settings.ORIGIN_RESERVED_CONCURRENCY, as_type="integer"),
    ConfigKey.declared("originProvisionedMin", settings.ORIGIN_PROVISIONED_MIN),
    ConfigKey.declared("originProvisionedMax", settings.ORIGIN_PROVISIONED_MAX),
    ConfigKey.declared("originUtilizationTarget", settings.ORIGIN_UTILIZATION_TARGET, as_type="string"),
    ConfigKey.declared("originScaleInCooldownSeconds", settings.ORIGIN_SCALE_IN_COOLDOWN_S),
    ConfigKey.declared("originScaleOutCooldownSeconds", settings.ORIGIN_SCALE_OUT_COOLDOWN_S),
    ConfigKey("originOverrides", "array", [], "Per-region origin sizing, each 'REGION:key=value[,key=value]' with keys memoryMb, timeoutSeconds, reservedConcurrency, provisionedMin, provisionedMax."),
    ConfigKey.declared("originColdStart", settings.COLD_START),
    ConfigKey.declared("originTracing", settings.ORIGIN_TRACING),
    ConfigKey.declared("lwaLayerVersion", settings.LWA_LAYER_VERSION),
    ConfigKey.declared("logRetentionDays", settings.LOG_RETENTION_DAYS),
    ConfigKey.declared("edgePriceClass", settings.PRICE_CLASS),
    ConfigKey.declared("edgeOriginReadTimeoutSeconds", settings.EDGE_ORIGIN_READ_TIMEOUT_S),
    ConfigKey.declared("edgeOriginKeepaliveSeconds", settings.EDGE_ORIGIN_KEEPALIVE_S),
    ConfigKey.declared("allowedOrigins", settings.ALLOWED_ORIGINS),
    ConfigKey.declared("customDomain", settings.DNS_NAME),
    ConfigKey("certificateArn", "string", "", "ACM certificate (us-east-1) for customDomain; required with it."),
    # The edge's AWS WAF web ACL (components/edge_firewall.py).
    ConfigKey.declared("wafEnabled", settings.WAF_ENABLED),
    ConfigKey.declared("wafTokenLimit", settings.WAF_TOKEN_LIMIT),
    ConfigKey.declared("wafAnonymousIpLimit", settings.WAF_ANONYMOUS_IP_LIMIT),
    ConfigKey.declared("wafIpLimit", settings.WAF_IP_LIMIT),
    ConfigKey.declared("wafToolLimits", settings.WAF_TOOL_LIMITS),
    ConfigKey.declared("wafWindowSeconds", settings.WAF_WINDOW_SECONDS),
    ConfigKey.declared("wafManagedRules", settings.WAF_MANAGED_RULES),
    ConfigKey.declared("wafBodyInspectionKb", settings.WAF_BODY_INSPECTION_KB),
    ConfigKey("probeRegions", "array", [], "Regions that run probe fleets; empty means every origin region."),
    ConfigKey("resultsTableHomeRegion", "string", "", "Region the results table (a DynamoDB global table) is created in, with a replica in every other probe region; empty means the first of probeRegions. Set it once and keep it: a new home replaces the table."),
    ConfigKey.declared("probeIntervalSeconds", settings.PROBE_INTERVAL_S),
    ConfigKey.declared("probeTimeoutSeconds", settings.PROBE_TIMEOUT_S),
    ConfigKey.declared("probeDeadlineSeconds", settings.PROBE_DEADLINE_S),
    ConfigKey.declared("probeDegradedLatencyMs", settings.PROBE_DEGRADED_LATENCY_MS),
    ConfigKey.declared("probeHistoryTtlDays", settings.PROBE_HISTORY_TTL_DAYS),
    ConfigKey.declared("consumerTimeoutSeconds", settings.CONSUMER_TIMEOUT_S),
    ConfigKey.declared("alarmOriginErrorRatePercent", settings.ALARM_ORIGIN_ERROR_RATE_PERCENT),
    ConfigKey.declared("alarmOriginMinInvocations", settings.ALARM_ORIGIN_MIN_INVOCATIONS),
    ConfigKey("alertEmail", "string", "", "Optional e-mail address subscribed to the alert topic."),
    ConfigKey.declared("failoverQuorum", settings.HEALTH_QUORUM),
    ConfigKey.declared("failoverFailureThreshold", settings.HEALTH_FAILURE_THRESHOLD),
    ConfigKey.declared("failoverRecoveryThreshold", settings.HEALTH_RECOVERY_THRESHOLD),
    # Several servers instead of server (stack_config/servers.py).
    ConfigKey("servers", "object", None,
              "Several MCP servers behind the one edge (an object: name -> server), instead of server: each name "
              "1-30 lower-case letters, digits or '-' starting with a letter, served at /<name>/mcp; each entry takes "
              "what server takes, plus regions (a subset of regions, default all), audience (the aud its tokens carry, "
              "default its resource URL https://<domain>/<name>/mcp) and overrides of the origin sizing (memoryMb, "
              "provisionedMin, provisionedMax, reservedConcurrency, coldStart); wafToolLimits then names each limit "
              "<server>/<tool>. Checked, but not deployable yet: a stack that sets it is refused "
              "(docs/design/many-servers.md).", optional=True),
)
KEY_BY_NAME = {k.name: k for k in KEYS}
