"""Great-circle distances and the country -> regions table the geo-router embeds.

The table is computed at deploy time from the regions the stack actually deploys,
so a country can only ever be routed to a region that has an origin (a fixed table
would send Nordic viewers to eu-north-1 on a stack that does not deploy it, and they
would silently fall back to us-east-1). Each country maps to *every* deployed region, nearest first; the
router takes the first that is not avoided (regional failover: the next-nearest
healthy region), and the rest of the order is there for operators and tools too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from edge.countries import COUNTRIES, Country
from edge.regions import AWS_REGIONS

# IUGG mean Earth radius. The sphere is off by at most ~0.5% from the ellipsoid,
# far below the distances that separate AWS regions.
EARTH_RADIUS_KM = 6371.0088


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance between two WGS 84 points, in kilometres."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    dphi = phi2 - phi1
    dlmb = math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    # min() guards against a rounding error pushing a above 1 for antipodal points.
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


def regions_by_distance(country: Country, regions: Iterable[str]) -> tuple[str, ...]:
    """The given regions, nearest to the country first (ties: region code order)."""
    if country.latitude is None or country.longitude is None:
        raise ValueError(f"country {country.code} has no coordinate to measure from")
    lat, lon = country.latitude, country.longitude

    def key(code: str) -> tuple[float, str]:
        region = AWS_REGIONS[code]
        return haversine_km(lat, lon, region.latitude, region.longitude), code

    return tuple(sorted(regions, key=key))


def regions_nearest_to(region: str, regions: Iterable[str]) -> tuple[str, ...]:
    """The given regions, nearest to ``region`` first (so ``region`` itself, when
    given, leads; ties: region code order): where viewers without a country go when the
    default region is avoided."""
    if region not in AWS_REGIONS:
        raise ValueError(f"region {region!r} has no known location")
    home = AWS_REGIONS[region]

    def key(code: str) -> tuple[float, str]:
        other = AWS_REGIONS[code]
        return haversine_km(home.latitude, home.longitude, other.latitude, other.longitude), code

    return tuple(sorted(dict.fromkeys(regions), key=key))


def country_routes(regions: Iterable[str], countries: Mapping[str, Country] = COUNTRIES) -> dict[str, tuple[str, ...]]:
    """Country code -> every deployed region, nearest first.

    Countries without a coordinate are left out: the router sends them (and
    requests without a country) to the stack's default region.
    """
    deployed = tuple(dict.fromkeys(regions))
    if not deployed:
        raise ValueError("at least one deployed region is needed to route to")
    unknown = [r for r in deployed if r not in AWS_REGIONS]
    if unknown:
        raise ValueError(f"regions without a known location: {', '.join(unknown)}")
    return {
        code: regions_by_distance(country, deployed)
        for code, country in sorted(countries.items())
        if country.located
    }
