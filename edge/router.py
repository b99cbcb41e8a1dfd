"""Rendering the Lambda@Edge geo-router: constants into code, code into a package.

``render_router(origins, default_region, ...)`` returns the source of a module
with ``handler(event, context)`` (``router_handler.py`` with this stack's
constants in place of its ``ROUTER_CONFIG`` line). The program uploads it as
``geo_router.py`` (handler ``geo_router.handler``, standard library only), packaged
and deployed by ``components/edge_function.py`` (the Lambda@Edge rules); the local
edge imports the same source and calls it with locally-shaped origins.

Origins are ``OriginTarget(domain_name, port=443, protocol="https")``: a Function
URL host in AWS, ``127.0.0.1`` with an http port locally. The router writes them
into the origin-request event's ``request.origin.custom`` (``domainName``,
``port``, ``protocol``, ``readTimeout``, ``keepaliveTimeout``; ``sslProtocols``,
``path`` and ``customHeaders`` are kept) and sets ``headers.host`` to
``OriginTarget.host_header``.
"""

from __future__ import annotations

import pprint
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from edge.geo import country_routes, regions_nearest_to
from edge.protocol import AVOID_REGIONS_HEADER, EDGE_READ_TIMEOUT_MAX_S, EDGE_READ_TIMEOUT_MIN_S
from functions.contract import REGION_PIN_HEADER

ROUTER_TEMPLATE = Path(__file__).with_name("router_handler.py")
ROUTER_MODULE = "geo_router"
ROUTER_HANDLER = f"{ROUTER_MODULE}.handler"
ROUTER_RUNTIME = "python3.13"
_CONFIG_LINE = re.compile(r"^ROUTER_CONFIG: dict\[str, Any\] = \{\}.*$", re.MULTILINE)
_HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class OriginTarget:
    domain_name: str
    port: int = 443
    protocol: str = "https"

    def __post_init__(self) -> None:
        if not _HOST_NAME.fullmatch(self.domain_name):
            raise ValueError(f"origin domain name {self.domain_name!r} is not a host name (no scheme, path or port)")
        if self.protocol not in _DEFAULT_PORTS:
            raise ValueError(f"origin protocol must be https or http, not {self.protocol!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"origin port {self.port} is not a TCP port")

    @property
    def host_header(self) -> str:
        if self.port == _DEFAULT_PORTS[self.protocol]:
            return self.domain_name
        return f"{self.domain_name}:{self.port}"


def router_config(
    origins: Mapping[str, OriginTarget],
    default_region: str,
    *,
    read_timeout_s: int = 60,
    keepalive_timeout_s: int = 5,
    pin_header: str = REGION_PIN_HEADER,
    avoid_header: str = AVOID_REGIONS_HEADER,
) -> dict[str, object]:
    """The constants the router embeds (see ``router_handler.py``)."""
    if not origins:
        raise ValueError("the router needs at least one origin")
    if default_region not in origins:
        raise ValueError(f"default region {default_region!r} has no origin (origins: {', '.join(origins)})")
    if not EDGE_READ_TIMEOUT_MIN_S <= read_timeout_s <= EDGE_READ_TIMEOUT_MAX_S:
        raise ValueError(f"origin read timeout {read_timeout_s}s is outside what the Lambda@Edge event's readTimeout "
                         f"accepts, {EDGE_READ_TIMEOUT_MIN_S}-{EDGE_READ_TIMEOUT_MAX_S} s")
    if not 1 <= keepalive_timeout_s <= 60:
        raise ValueError(f"origin keep-alive timeout {keepalive_timeout_s}s is outside CloudFront's 1-60 s")
    regions = sorted(origins)
    return {
        "default_region": default_region,
        "origins": {
            region: {
                "domainName": origins[region].domain_name,
                "port": origins[region].port,
                "protocol": origins[region].protocol,
                "host": origins[region].host_header,
            }
            for region in regions
        },
        "routes": {country: " ".join(nearest) for country, nearest in country_routes(regions).items()},
        "fallback": " ".join(regions_nearest_to(default_region, regions)),
        "pin_header": pin_header.lower(),
        "avoid_header": avoid_header.lower(),
        "read_timeout": read_timeout_s,
        "keepalive_timeout": keepalive_timeout_s,
    }


def render_router(
    origins: Mapping[str, OriginTarget],
    default_region: str,
    *,
    read_timeout_s: int = 60,
    keepalive_timeout_s: int = 5,
    pin_header: str = REGION_PIN_HEADER,
    avoid_header: str = AVOID_REGIONS_HEADER,
) -> str:
    """Source of the geo-router module, with this stack's constants."""
    config = router_config(
        origins, default_region, read_timeout_s=read_timeout_s,
        keepalive_timeout_s=keepalive_timeout_s, pin_header=pin_header, avoid_header=avoid_header,
    )
    template = ROUTER_TEMPLATE.read_text(encoding="utf-8")
    if len(_CONFIG_LINE.findall(template)) != 1:
        raise AssertionError(f"{ROUTER_TEMPLATE} must have exactly one ROUTER_CONFIG line to render")
    # A Python literal: the module needs no json import or parse at cold start.
    literal = pprint.pformat(config, width=120, sort_dicts=False)
    rendered = "ROUTER_CONFIG: dict[str, Any] = (  # rendered by edge/router.py\n" + literal + "\n)"
    return _CONFIG_LINE.sub(lambda _: rendered, template)
