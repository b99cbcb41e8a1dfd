"""What the edge's parts agree on: the header the viewer-request function sends the
router, and the bounds of CloudFront's origin read timeout that the distribution, the
router and the stack config all hold to."""

# The viewer-request CloudFront Function tells the Lambda@Edge router which regions
# to avoid in this header (comma-separated region codes); it always removes any copy
# a viewer sent, and sends none when nothing is to be avoided or the state is missing,
# malformed or lists every deployed region (fail static: route as if all were healthy).
AVOID_REGIONS_HEADER = "x-mcp-edge-avoid"

# CloudFront's origin response (read) timeout: how long CloudFront waits *between
# packets* from the origin before it answers 504 (a POST is not retried). The API
# accepts 1-120 s (CustomOriginConfig.OriginReadTimeout); above 60 the account needs an
# increase of CloudFront's "Response timeout per origin" quota (review.preflight checks
# it). The router sets the same value on the Lambda@Edge origin-request event's
# readTimeout. Long calls do not need more than 60: they stream, and CloudFront's read
# timeout must leave room for two of the origin's keep-alives (a ping that is late
# under load must not be cut).
# The origin's SSE keep-alive, in both protocol eras (the MCP SDK's own comment-line
# pings; tests tie this value to the SDK's, examples/demo/demo_server/keepalive.py): a
# 2026-07-28 response still silent after this long commits to SSE, a handshake-era
# tools/call is SSE from its first byte, and a committed stream carries a ping at least
# this often.
ORIGIN_SSE_KEEPALIVE_S = 15
EDGE_READ_TIMEOUT_MIN_S = 1
EDGE_READ_TIMEOUT_MAX_S = 120
# Above this, CloudFront refuses the timeout unless the account's quota was raised.
EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S = 60
EDGE_READ_TIMEOUT_FOR_STREAMING_S = 2 * ORIGIN_SSE_KEEPALIVE_S
