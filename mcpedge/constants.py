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
