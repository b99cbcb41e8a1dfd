"""Lambda@Edge origin-request geo-router (Python 3.13, standard library only).

This file is a template: ``edge.router.render_router`` replaces the ``ROUTER_CONFIG``
line with this stack's constants (Lambda@Edge has no environment variables) and
ships the result as ``geo_router.py``. Keys of ``ROUTER_CONFIG``:

- ``default_region``: where viewers with no (or an unlocated) country go.
- ``origins``: region -> ``{"domainName", "port", "protocol", "host"}``, one per
  deployed region (``host`` is the Host header value the origin expects).
- ``routes``: ISO 3166-1 alpha-2 country -> the deployed regions, nearest first,
  space-separated (strings compile several times faster than lists at cold start).
- ``fallback``: the default region, then the other deployed regions nearest to it.
- ``pin_header``: request header that pins a deployed region (probes use it).
- ``avoid_header``: request header, set by the viewer-request CloudFront Function
  from the KeyValueStore's health document, naming the deployed regions to avoid
  (comma-separated).
- ``read_timeout``/``keepalive_timeout``: seconds, applied to the chosen origin (read_timeout 1-120,
  CloudFront's origin response timeout, the distribution's own; checked when the module is rendered).

For each request the router picks a region: a valid pin (even to an avoided region,
so probes see a down region recover); else the first region of the viewer country's
order (or, with no or an unlocated country, of ``fallback``) that is not avoided.
An avoid header that is not a list of deployed regions, or that names every one, is
ignored (fail static: route as if every region were healthy). Then it edits
``request.origin.custom`` in place (so the origin's custom headers, such as the
origin secret, are still sent) and sets ``Host`` to the chosen origin's host.
"""

from __future__ import annotations

# typing costs ~20 ms to import on a cold start; the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ROUTER_CONFIG: dict[str, Any] = {}  # rendered at deploy time; see edge/router.py

COUNTRY_HEADER = "cloudfront-viewer-country"
DEFAULT_REGION: str = ROUTER_CONFIG.get("default_region", "")
ORIGINS: dict[str, dict[str, Any]] = ROUTER_CONFIG.get("origins", {})
ROUTES: dict[str, str] = ROUTER_CONFIG.get("routes", {})
FALLBACK: str = ROUTER_CONFIG.get("fallback", DEFAULT_REGION)
PIN_HEADER: str = ROUTER_CONFIG.get("pin_header", "")
AVOID_HEADER: str = ROUTER_CONFIG.get("avoid_header", "")
READ_TIMEOUT: int = ROUTER_CONFIG.get("read_timeout", 60)
KEEPALIVE_TIMEOUT: int = ROUTER_CONFIG.get("keepalive_timeout", 5)


def first_header(headers: dict[str, Any], name: str) -> str | None:
    """First value of a header in CloudFront's ``{name: [{key, value}]}`` shape."""
    entries = headers.get(name)
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        value = entries[0].get("value")
        if isinstance(value, str):
            return value
    return None


def avoided(headers: dict[str, Any]) -> frozenset[str]:
    """The deployed regions to route around; none when the header is absent, is not a
    comma-separated list of deployed regions, or names every one (fail static)."""
    value = first_header(headers, AVOID_HEADER)
    if not value:
        return frozenset()
    regions = frozenset(part.strip().lower() for part in value.split(","))
    if not regions.issubset(ORIGINS) or len(regions) >= len(ORIGINS):
        return frozenset()
    return regions


def choose_region(headers: dict[str, Any]) -> str:
    pinned = first_header(headers, PIN_HEADER)
    if pinned is not None and pinned.strip().lower() in ORIGINS:
        return pinned.strip().lower()
    order = None
    country = first_header(headers, COUNTRY_HEADER)
    if country is not None:
        order = ROUTES.get(country.strip().upper())
    order = order or FALLBACK
    avoid = avoided(headers)
    if avoid:
        for region in order.split(" "):
            if region not in avoid:
                return region
    return order.split(" ", 1)[0]


def route(request: dict[str, Any]) -> str:
    """Point the request at its region's origin, in place; returns the region."""
    headers = request.get("headers")
    if not isinstance(headers, dict):
        headers = request["headers"] = {}
    region = choose_region(headers)
    target = ORIGINS[region]
    origin = request.get("origin")
    if not isinstance(origin, dict):
        origin = request["origin"] = {}
    custom = origin.get("custom")
    if not isinstance(custom, dict):
        custom = origin["custom"] = {"customHeaders": {}, "path": ""}
    custom["domainName"] = target["domainName"]
    custom["port"] = target["port"]
    custom["protocol"] = target["protocol"]
    custom["readTimeout"] = READ_TIMEOUT
    custom["keepaliveTimeout"] = KEEPALIVE_TIMEOUT
    custom.setdefault("sslProtocols", ["TLSv1.2"])
    # Function URLs answer only to their own host name.
    headers["host"] = [{"key": "Host", "value": target["host"]}]
    return region


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request: dict[str, Any] = event["Records"][0]["cf"]["request"]
    route(request)
    return request
