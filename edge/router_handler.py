"""Lambda@Edge origin-request geo-router (Python 3.13, standard library only).

This file is a template: ``edge.router.render_router`` replaces the ``ROUTER_CONFIG``
line with this stack's constants (Lambda@Edge has no environment variables) and
ships the result as ``geo_router.py``. Keys of ``ROUTER_CONFIG``:

- ``default_region``: where viewers with no (or an unlocated) country go.
- ``origins``: region -> ``{"domainName", "port", "protocol", "host"}``, one per
  deployed region (``host`` is the Host header value the origin expects).
- ``routes``: ISO 3166-1 alpha-2 country -> the deployed regions, nearest first,
  space-separated (strings compile several times faster than lists at cold start).
- ``pin_header``: request header that pins a deployed region (probes use it).
- ``read_timeout``/``keepalive_timeout``: seconds, applied to the chosen origin.

For each request the router picks a region (a valid pin, else the viewer
country's nearest deployed region, else the default), then edits
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
PIN_HEADER: str = ROUTER_CONFIG.get("pin_header", "")
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


def choose_region(headers: dict[str, Any]) -> str:
    pinned = first_header(headers, PIN_HEADER)
    if pinned is not None and pinned.strip().lower() in ORIGINS:
        return pinned.strip().lower()
    country = first_header(headers, COUNTRY_HEADER)
    if country is not None:
        nearest = ROUTES.get(country.strip().upper())
        if nearest:
            return nearest.split(" ", 1)[0]
    return DEFAULT_REGION


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
