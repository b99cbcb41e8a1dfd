"""The contract between the program and the functions it deploys, written once.

Standard library only, no imports at all: the program (``components/``) imports it as
``functions.contract``, and every function package ships it as its own ``contract``
module (``functions/<package>/contract.py`` is a link to this file), so a handler reads
``from .contract import ...`` in its package, on Lambda and locally alike.

- The headers the edge, the origins and the probes exchange, and the CORS policy.
- Each function's environment variable names (the program sets exactly these); the
  constants here never travel as environment variables: a handler reads them from here.
- The probe event's keys and target kinds (the schedule input ``functions/probe/event.py``
  validates), the region-health key and document version in the CloudFront KeyValueStore,
  and the results table's key attributes (``functions/results/store.py`` documents the layout).
"""

# --- headers ------------------------------------------------------------------------------

# A request may pin the region it is routed to (probes test every region through the
# edge with it); the gate honours it only for the probes' verified client, and the router
# only for deployed regions.
REGION_PIN_HEADER = "x-mcp-edge-region"
# Every origin response names the region that served it.
SERVED_REGION_HEADER = "x-mcp-edge-served-region"
# The viewer's bearer token on its way to an origin: SigV4 takes ``Authorization`` toward a
# Function URL (AuthType AWS_IAM), so the edge and the probes' direct requests carry the
# token here, and the Web Adapter restores it (AWS_LWA_AUTHORIZATION_SOURCE).
EDGE_AUTHORIZATION_HEADER = "x-mcp-edge-authorization"
# Every answer the edge makes itself (each refusal of the gate or the viewer function) carries
# this header, its value a short reason token (``invalid-token``, ``no-token``, ``not-found``,
# ``rate-limited``...). The distribution's response headers policy removes it from origin
# responses, so an origin cannot produce it (the probes' forged-token check relies on
# PROBE_CHECK_HEADER instead, and on this mark only without a token of its own to prove with).
REFUSAL_HEADER = "x-mcp-edge-refusal"
# The probes' real token beside their forged-token check (a request the edge must refuse):
# the gate verifies it only to count that refusal as the probes' (the Client dimension of
# its metrics), never to decide anything, and never forwards it.
PROBE_TOKEN_HEADER = "x-mcp-edge-probe-token"
# The edge's proof, on its refusal of the probes' forged-token check, that the refusal is its
# own: a digest of the token in PROBE_TOKEN_HEADER, which the edge never forwards, so no origin
# can compute it. It does not depend on the response headers policy that strips
# REFUSAL_HEADER from origin answers (AWS does not document whether that policy also applies
# to an answer the origin-request function generates). The digest: probe/promise.py
# probe_check_proof, and the gate's copy, edge_gate.handler.probe_proof.
PROBE_CHECK_HEADER = "x-mcp-edge-probe-check"


# CORS, for browser MCP clients: the Function URL's configuration (components/origin.py)
# and the origin app's own answers (mcp_server/origin_gate.py) are the same policy.
# POST for MCP, GET for the protected resource metadata; the stateless origin serves no
# GET stream and no session DELETE, and preflight itself needs no listing.
CORS_ALLOW_METHODS = ("GET", "POST")
CORS_ALLOW_HEADERS = (
    "authorization", "content-type", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name",
    "last-event-id",
)
CORS_EXPOSE_HEADERS = ("mcp-session-id", "www-authenticate", SERVED_REGION_HEADER)
CORS_MAX_AGE_S = 86400


# --- environment variables, per function --------------------------------------------------


class OriginEnv:
    """What the program sets on an origin besides the Web Adapter's own settings: the header
    the adapter moves into ``Authorization`` (the viewer's bearer token, which the edge
    carries in a side header because SigV4 takes ``Authorization``). Nothing else of ours:
    the origin is the stack's server, unchanged."""

    AUTHORIZATION_SOURCE = "AWS_LWA_AUTHORIZATION_SOURCE"


class ProbeEnv:
    """What the probe (``probe/handler.py``, ``probe/probe.py``) reads."""

    DEADLINE_S = "PROBE_DEADLINE_S"
    DEGRADED_LATENCY_MS = "PROBE_DEGRADED_LATENCY_MS"
    TOKEN_URL = "TOKEN_URL"
    CLIENT_ID = "CLIENT_ID"
    CLIENT_SECRET_NAME = "CLIENT_SECRET_NAME"
    TOKEN_AUDIENCE = "TOKEN_AUDIENCE"


class ConsumerEnv:
    """What the results consumer (``results/handler.py``) reads, besides Powertools' own."""

    TABLE_NAME = "TABLE_NAME"
    ALERT_TOPIC_ARN = "ALERT_TOPIC_ARN"
    DEAD_LETTER_QUEUE_ARN = "DEAD_LETTER_QUEUE_ARN"
    HISTORY_TTL_DAYS = "HISTORY_TTL_DAYS"
    # Seconds between probe rounds: the freshness windows and vote ages follow it.
    PROBE_INTERVAL_S = "PROBE_INTERVAL_S"
    # The results table's home region: every probe region's consumer claims its alerts
    # there (conditional writes serialize within one region only), so one change pages once.
    ALERT_CLAIM_REGION = "ALERT_CLAIM_REGION"
    # Region health (off when HEALTH_STORE_ARN is unset or empty).
    HEALTH_STORE_ARN = "HEALTH_STORE_ARN"
    HEALTH_PROBE_REGIONS = "HEALTH_PROBE_REGIONS"
    # The origin regions the stack deploys: outcomes for any other region are not voted on,
    # and the published document lists none (it must stay within the store's 1 KB).
    HEALTH_ORIGIN_REGIONS = "HEALTH_ORIGIN_REGIONS"
    HEALTH_QUORUM = "HEALTH_QUORUM"
    HEALTH_FAILURE_THRESHOLD = "HEALTH_FAILURE_THRESHOLD"
    HEALTH_RECOVERY_THRESHOLD = "HEALTH_RECOVERY_THRESHOLD"


# --- the probe event (one schedule's input) ------------------------------------------------


class ProbeEvent:
    """Keys of the probe event."""

    ENDPOINT = "endpoint"
    SERVER_ID = "serverId"
    TARGET = "target"
    TARGET_REGION = "targetRegion"
    PIN_REGION = "pinRegion"
    # Sign the requests with SigV4 (service lambda, targetRegion): a Function URL, called directly.
    SIGNED = "signed"


TARGET_EDGE = "edge"
TARGET_ORIGIN = "origin"
TARGET_KINDS = (TARGET_EDGE, TARGET_ORIGIN)


# --- OAuth ---------------------------------------------------------------------------------

# RFC 6749 section 3.3, scope-token = 1*( %x21 / %x23-5B / %x5D-7E ): what the stack config,
# the components, the origin and the edge's challenge accept as a scope (a regex to compile).
SCOPE_TOKEN_PATTERN = r"[\x21\x23-\x5b\x5d-\x7e]+"


# --- region health (the results consumer publishes, the edge reads) --------------------------

# The one key of the stack's CloudFront KeyValueStore: a compact JSON document
#   {"v": 1, "avoid": ["eu-west-1", ...], "at": "<UTC ISO-8601 ms, Z>"}
# listing the origin regions the edge should route around (sorted, no duplicates).
REGION_HEALTH_KEY = "region-health"
REGION_HEALTH_VERSION = 1
# Who must agree, after how many rounds: the defaults of the stack config (failover*),
# of ProbeFleet's health args and of the consumer's settings.
HEALTH_FAILURE_ROUNDS_DEFAULT = 2
HEALTH_RECOVERY_ROUNDS_DEFAULT = 3
# Seconds between probe rounds: the default of the stack config (probeIntervalSeconds), of
# ProbeFleet's args and of the consumer's windows.
PROBE_INTERVAL_S_DEFAULT = 10


def majority(probe_regions: int) -> int:
    """The default quorum: more than half of the probe regions (1 of 1, 2 of 2, 3 of 4)."""
    return probe_regions // 2 + 1


# --- the results table ---------------------------------------------------------------------

TABLE_HASH_KEY = "pk"
TABLE_RANGE_KEY = "sk"
TABLE_TTL_ATTRIBUTE = "expiresAt"  # epoch seconds
