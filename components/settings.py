"""The settings a stack passes to the components, each fact declared once.

A ``Setting`` holds one setting's default, its bounds, choices or pattern, and the
sentence that describes it. The components' arg checks (``components/validation.py``)
and defaults read it, and the stack config's key table (``stack_config/keys.py``)
declares its key from it, so ``Pulumi.yaml`` and the configuration reference say what
the components enforce.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from components.probe_rounds import INTERVALS
from edge.firewall_rules import (
    BODY_INSPECTION_KB,
    EVALUATION_WINDOWS,
    MAX_TOOL_LIMITS,
    RATE_LIMIT_RANGE,
    FirewallSettings,
)
from edge.protocol import (
    EDGE_READ_TIMEOUT_FOR_STREAMING_S,
    EDGE_READ_TIMEOUT_MAX_S,
    EDGE_READ_TIMEOUT_MIN_S,
    EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S,
)
from edge.viewer_function import ORIGIN_PATTERN, ORIGIN_RULE
from functions.contract import HEALTH_FAILURE_ROUNDS_DEFAULT, HEALTH_RECOVERY_ROUNDS_DEFAULT, PROBE_INTERVAL_S_DEFAULT


@dataclass(frozen=True)
class Setting:
    """One setting: its default, what it allows, and a description.

    ``description`` may name ``{low}`` and ``{high}``, filled in by ``describe()``.
    ``unit`` follows the bounds in error messages (`` seconds (Lambda's timeout limits)``).
    """

    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    unit: str = ""
    choices: tuple[Any, ...] = ()
    pattern: re.Pattern[str] | None = None
    rule: str = ""  # what ``pattern`` allows, in words, after "must be"

    def describe(self) -> str:
        return self.description.format(low=self.low, high=self.high)

    def matches(self, value: Any) -> bool:
        assert self.pattern is not None
        return isinstance(value, str) and self.pattern.fullmatch(value) is not None


# --- shared by several components -------------------------------------------------------

SERVER_ID = Setting(
    "mcp-edge", "Name of the MCP server, used in resource names, probe targets and metrics.",
    pattern=re.compile(r"[a-z0-9][a-z0-9-]{0,30}"),
    rule="1-31 lower-case letters, digits or '-', starting with a letter or digit (it prefixes resource names)")
MCP_PATH = Setting(
    "/mcp", "Public path of the MCP endpoint on the edge; the gate maps it onto the server's own path.",
    pattern=re.compile(r"/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]"), rule="an absolute path like /mcp, no trailing slash")
# A custom domain (the edge's alternate name, the origins' public resource URL).
DNS_NAME = Setting(
    "", "Optional custom domain for the distribution, e.g. mcp.example.com.",
    pattern=re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}"),
    rule="a lower-case DNS name like mcp.example.com")
# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy).
LOG_RETENTION_DAYS = Setting(
    30, "CloudWatch Logs retention for every function, one of the values CloudWatch allows.",
    choices=(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
             2557, 2922, 3288, 3653))
LAMBDA_TIMEOUT_UNIT = " seconds (Lambda's timeout limits)"

# --- the bearer-token rules (components/tokens.py) ----------------------------------------

# Algorithms an origin may accept; symmetric HS* never (the JWKS holds public keys).
JWT_ALGORITHMS = Setting(
    ("RS256", "ES256"), "JWT signature algorithms accepted; asymmetric only.",
    choices=("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"))
JWT_LEEWAY_S = Setting(30, "Clock skew allowed on exp and nbf, {low}-{high} seconds.", low=0, high=300,
                       unit=" seconds")

# --- an origin (components/origin.py) ------------------------------------------------------

ORIGIN_MEMORY_MB = Setting(1024, "Memory of each origin function, {low}-{high} MB.", low=128, high=10240,
                           unit=" MB (Lambda's memory limits)")
ORIGIN_TIMEOUT_S = Setting(120, "Timeout of each origin function, {low}-{high} seconds.", low=1, high=900,
                           unit=LAMBDA_TIMEOUT_UNIT)
# None: no reservation (the function draws on the region's unreserved pool). 0 is refused:
# Lambda takes it as "throttle every invocation", a function that can never run.
ORIGIN_RESERVED_CONCURRENCY = Setting(
    None, "Reserved concurrency of each origin function, {low}-{high}; unset reserves none (the region's unreserved "
    "pool, where AWS keeps at least 100). 0 is refused: Lambda would throttle every call.", low=1, high=10000,
    unit=" (unset reserves none; 0 would throttle every call: remove the key instead)")
ORIGIN_PROVISIONED_MIN = Setting(
    2, "Minimum provisioned concurrency on the live alias; 0 turns provisioned concurrency off.", low=0, high=10000)
ORIGIN_PROVISIONED_MAX = Setting(
    20, "Maximum provisioned concurrency auto scaling may reach; at most originReservedConcurrency when that is set.",
    low=0, high=10000)
ORIGIN_UTILIZATION_TARGET = Setting(
    0.7, "Target provisioned-concurrency utilization for auto scaling, in ({low}, {high}].", low=0, high=1)
ORIGIN_SCALE_IN_COOLDOWN_S = Setting(300, "Auto scaling scale-in cooldown, seconds.", low=0, high=86400,
                                     unit=" seconds")
ORIGIN_SCALE_OUT_COOLDOWN_S = Setting(30, "Auto scaling scale-out cooldown, seconds.", low=0, high=86400,
                                      unit=" seconds")
ORIGIN_TRACING = Setting(
    True, "Lambda active tracing (AWS X-Ray) on every origin function: a segment per invocation (init, duration, "
    "errors) beside the traceparent the edge passes to the server; false turns it off (X-Ray bills traces beyond its "
    "free tier).")
# The Web Adapter relays SnapStart's before-checkpoint / after-restore events to the app
# over HTTP from release 1.1.0, published as layer version 30 (29 was withdrawn).
SNAPSTART_MIN_LWA_LAYER_VERSION = 30
COLD_START = Setting(
    "provisioned", "How origins avoid cold starts: provisioned (provisioned concurrency with auto scaling), snapstart "
    f"(Lambda SnapStart on published versions: needs lwaLayerVersion {SNAPSTART_MIN_LWA_LAYER_VERSION} or later and no "
    "provisioned-concurrency keys) or none (on-demand only).", choices=("provisioned", "snapstart", "none"))
# The adapter restores the viewer's bearer token into Authorization from a side header
# (AWS_LWA_AUTHORIZATION_SOURCE) from release 0.8.4, published as layer version 23.
AUTHORIZATION_SOURCE_MIN_LWA_LAYER_VERSION = 23
LWA_LAYER_VERSION = Setting(
    25, "Version of the AWS Lambda Web Adapter layer (LambdaAdapterLayerArm64), {low}-{high}: "
    f"{AUTHORIZATION_SOURCE_MIN_LWA_LAYER_VERSION} (release 0.8.4) is the first that restores the bearer token from "
    "the edge's side header (AWS_LWA_AUTHORIZATION_SOURCE).",
    low=AUTHORIZATION_SOURCE_MIN_LWA_LAYER_VERSION, high=1000)

# --- the edge (components/edge.py) ---------------------------------------------------------

PRICE_CLASS = Setting("PriceClass_All", "CloudFront price class: PriceClass_All, PriceClass_200 or PriceClass_100.",
                      choices=("PriceClass_All", "PriceClass_200", "PriceClass_100"))
# CloudFront's origin read timeout (its bounds and why: edge/protocol.py).
EDGE_ORIGIN_READ_TIMEOUT_S = Setting(
    60, "CloudFront origin response (read) timeout between packets, {low}-{high} seconds (CloudFront's range; above "
    f"{EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S} only after an increase of the account's 'Response timeout per origin' "
    "quota, which review.preflight checks); at least "
    f"{EDGE_READ_TIMEOUT_FOR_STREAMING_S} when an origin timeout exceeds it, so that long calls stream with keep-alives.",
    low=EDGE_READ_TIMEOUT_MIN_S, high=EDGE_READ_TIMEOUT_MAX_S,
    unit=f" seconds (CloudFront's origin response timeout; above {EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S} after a "
         "quota increase)")
EDGE_ORIGIN_KEEPALIVE_S = Setting(5, "CloudFront origin keep-alive timeout, {low}-{high} seconds.", low=1, high=60,
                                  unit=" seconds (CloudFront's limits)")
# The MCP transport spec: a server must validate Origin and answer 403 to an invalid one.
ALLOWED_ORIGINS = Setting(
    (), "Browser origins (scheme://host[:port], e.g. https://app.example.com) whose requests to the MCP path the edge "
    "lets through; any other Origin gets 403 (null only when listed). Requests without Origin are not a browser's "
    "and pass. Empty: no browser origin is allowed.", pattern=ORIGIN_PATTERN, rule=ORIGIN_RULE)

# --- the edge's AWS WAF web ACL (components/edge_firewall.py, edge/firewall_rules.py) ------

_FIREWALL = FirewallSettings()  # the rules' own defaults: one source for the keys and the component
_RATE_UNIT = " requests per evaluation window (WAF's rate-based rule limits)"
WAF_ENABLED = Setting(
    True, "Put an AWS WAF web ACL (us-east-1, scope CLOUDFRONT) in front of the distribution: per-token, per-IP and "
    "per-tool rate limits answered with a JSON-RPC 429, and the AWS managed rules that cannot break MCP.")
WAF_TOKEN_LIMIT = Setting(
    _FIREWALL.token_limit, "Requests per bearer token per wafWindowSeconds on the MCP path, {low}-{high}.",
    low=RATE_LIMIT_RANGE[0], high=RATE_LIMIT_RANGE[1], unit=_RATE_UNIT)
WAF_ANONYMOUS_IP_LIMIT = Setting(
    _FIREWALL.anonymous_ip_limit, "Requests per client IP per wafWindowSeconds without a bearer token or to "
    "/.well-known/ (the OAuth metadata), {low}-{high}.", low=RATE_LIMIT_RANGE[0], high=RATE_LIMIT_RANGE[1],
    unit=_RATE_UNIT)
WAF_IP_LIMIT = Setting(
    _FIREWALL.ip_limit, "Requests per client IP per wafWindowSeconds, every request (a forged token included), "
    "{low}-{high}; at least wafTokenLimit and wafAnonymousIpLimit.", low=RATE_LIMIT_RANGE[0],
    high=RATE_LIMIT_RANGE[1], unit=_RATE_UNIT)
WAF_TOOL_LIMITS = Setting(
    {}, "Tool name -> tools/call requests per bearer token per wafWindowSeconds (each {low}-{high}; at most "
    f"{MAX_TOOL_LIMITS} tools), matched by the Mcp-Name header and the JSON body's params.name.",
    low=RATE_LIMIT_RANGE[0], high=RATE_LIMIT_RANGE[1], unit=_RATE_UNIT)
WAF_WINDOW_SECONDS = Setting(
    _FIREWALL.window_seconds, "Evaluation window of every rate limit, seconds (WAF's windows: "
    f"{', '.join(map(str, EVALUATION_WINDOWS))}); also the Retry-After a limited client gets.",
    choices=EVALUATION_WINDOWS)
WAF_MANAGED_RULES = Setting(
    _FIREWALL.managed_rules, "Add the AWS managed rule groups (IP reputation, known bad inputs, common rule set), "
    "their body rules counting instead of blocking so tool arguments pass.")
WAF_BODY_INSPECTION_KB = Setting(
    _FIREWALL.body_inspection_kb, "KB of a request body CloudFront forwards to WAF: "
    f"{', '.join(map(str, BODY_INSPECTION_KB))} (over 16 WAF bills each request inspected further).",
    choices=BODY_INSPECTION_KB)

# --- the operations dashboard's alarms (components/operations_dashboard.py) -----------------

ALARM_ORIGIN_ERROR_RATE_PERCENT = Setting(
    5, "Alarm when an origin region's invocation error rate (Lambda Errors / Invocations) stays above this percentage "
    "for 10 minutes while its probes still succeed, {low}-{high}.", low=1, high=100, unit=" percent")
ALARM_ORIGIN_MIN_INVOCATIONS = Setting(
    20, "Invocations in 5 minutes below which that alarm does not judge an origin region's error rate, {low}-{high}.",
    low=1, high=1_000_000, unit=" invocations")

# --- a probe fleet (components/probes.py) --------------------------------------------------

# Seconds between probe rounds: a divisor of the minute from 10 to 60 (components/probe_rounds.py).
# 10 s by default: with 2 failed rounds to fail over, a dead region's viewers move within 34 s
# (probe_rounds.failover_times, given in docs/architecture.md), under the 45 s goal with room for
# AWS's own delays, where 15 s would leave 1 s (44 s); a round costs a probe invocation per target.
PROBE_INTERVAL_S = Setting(
    PROBE_INTERVAL_S_DEFAULT, f"Seconds between probe rounds (each probes every target once), one of {', '.join(map(str, INTERVALS))}: "
    "a divisor of the minute (a schedule a minute starts a Step Functions Express workflow running the rounds).",
    choices=INTERVALS, unit=" seconds")
PROBE_TIMEOUT_S = Setting(30, "Timeout of the probe function, {low}-{high} seconds.", low=5, high=900,
                          unit=LAMBDA_TIMEOUT_UNIT)
PROBE_DEADLINE_S = Setting(20, "Hard deadline of one probe, below probeTimeoutSeconds.", low=1)
PROBE_DEGRADED_LATENCY_MS = Setting(1500, "A probe slower than this is reported degraded.", low=1, high=900000,
                                    unit=" ms")
PROBE_HISTORY_TTL_DAYS = Setting(30, "Days probe history items live in the results table.", low=1, high=3650,
                                 unit=" days")
CONSUMER_TIMEOUT_S = Setting(30, "Timeout of the results consumer function, {low}-{high} seconds.", low=1, high=900,
                             unit=LAMBDA_TIMEOUT_UNIT)
# Region health votes (functions/results/health.py): who must agree, after how many rounds.
HEALTH_QUORUM = Setting(
    0, "Probe regions that must agree before the edge avoids a region or uses it again; 0 means a majority of "
    "probeRegions, at most their number.", low=0)
HEALTH_FAILURE_THRESHOLD = Setting(
    HEALTH_FAILURE_ROUNDS_DEFAULT, "Consecutive failed probe rounds (edge or direct target) before a probe region "
    "votes a region down, {low}-{high}.", low=1, high=60, unit=" probe rounds")
HEALTH_RECOVERY_THRESHOLD = Setting(
    HEALTH_RECOVERY_ROUNDS_DEFAULT, "Consecutive successful probe rounds (both targets) before a probe region votes a "
    "region up again, {low}-{high}.", low=1, high=60, unit=" probe rounds")
