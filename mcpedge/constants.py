"""Names shared by the program, the edge code it renders and the Lambda handlers.

The headers the functions exchange and the region-health key are defined in
``functions/contract.py`` (the contract every function package ships) and re-exported
here for the program and the edge code it renders.
"""

from functions.contract import (
    ORIGIN_SECRET_HEADER,
    REGION_HEALTH_KEY,
    REGION_HEALTH_VERSION,
    REGION_PIN_HEADER,
    SERVED_REGION_HEADER,
)

__all__ = ["AVOID_REGIONS_HEADER", "LIVE_ALIAS", "ORIGIN_SECRET_HEADER", "REGION_HEALTH_KEY", "REGION_HEALTH_VERSION",
           "REGION_PIN_HEADER", "SERVED_REGION_HEADER"]
# The Lambda alias every origin's Function URL, provisioned concurrency and
# auto scaling point at.
LIVE_ALIAS = "live"

# Regional failover: the region-health key and document version are in the contract
# (the results consumer publishes, the edge reads); key + value stay far below the
# store's 1 KB per-item limit for every AWS region.
# The viewer-request CloudFront Function tells the Lambda@Edge router which regions
# to avoid in this header (comma-separated region codes); it always removes any copy
# a viewer sent, and sends none when nothing is to be avoided or the state is missing,
# malformed or lists every deployed region (fail static: route as if all were healthy).
AVOID_REGIONS_HEADER = "x-mcp-edge-avoid"
