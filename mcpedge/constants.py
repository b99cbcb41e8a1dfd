"""Names shared by the program, the edge code it renders and the Lambda handlers.

Handlers do not import this module (their packages hold only their own folder):
the program passes these values to them as environment variables, and renders
them into the edge code as constants.
"""

# CloudFront adds this header (as an origin custom header) and the in-stack probes
# send it; origins answer 403 without it, so Function URLs cannot bypass the edge.
ORIGIN_SECRET_HEADER = "x-mcp-edge-origin-secret"
# A request may pin the region it is routed to (probes test every region through
# the edge with it); the router honours it only for deployed regions.
REGION_PIN_HEADER = "x-mcp-edge-region"
# Every origin response names the region that served it.
SERVED_REGION_HEADER = "x-mcp-edge-served-region"
# The Lambda alias every origin's Function URL, provisioned concurrency and
# auto scaling point at.
LIVE_ALIAS = "live"

# Regional failover (the results consumer publishes, the edge reads).
# The one key of the stack's CloudFront KeyValueStore: a compact JSON document
#   {"v": 1, "avoid": ["eu-west-1", ...], "at": "<UTC ISO-8601 ms, Z>"}
# listing the origin regions the edge should route around (sorted, no duplicates).
# Key + value stay far below the store's 1 KB per-item limit for every AWS region.
REGION_HEALTH_KEY = "region-health"
REGION_HEALTH_VERSION = 1
# The viewer-request CloudFront Function tells the Lambda@Edge router which regions
# to avoid in this header (comma-separated region codes); it always removes any copy
# a viewer sent, and sends none when nothing is to be avoided or the state is missing,
# malformed or lists every deployed region (fail static: route as if all were healthy).
AVOID_REGIONS_HEADER = "x-mcp-edge-avoid"

# CloudFront's origin response (read) timeout: how long CloudFront waits *between
# packets* from the origin before it answers 504 (a POST is not retried). The
# distribution accepts 1-60 s without a quota increase; the router also sets it on
# the Lambda@Edge origin-request event, whose readTimeout accepts 4-60, so a stack
# may use 4-60. Long calls do not need more: they stream (below).
EDGE_READ_TIMEOUT_MIN_S = 4
EDGE_READ_TIMEOUT_MAX_S = 60
# The origin's SSE keep-alive, in both protocol eras (the MCP SDK's own comment-line
# pings; tests tie this value to the SDK's): a 2026-07-28 response still silent after
# this long commits to SSE, a handshake-era tools/call is SSE from its first byte, and
# a committed stream carries a ping at least this often. CloudFront's read timeout
# must leave room for two of them (a ping that is late under load must not be cut).
ORIGIN_SSE_KEEPALIVE_S = 15
EDGE_READ_TIMEOUT_FOR_STREAMING_S = 2 * ORIGIN_SSE_KEEPALIVE_S
