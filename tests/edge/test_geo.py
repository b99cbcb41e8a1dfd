"""Country coordinates, great-circle distances and the country -> regions table.

The nearest region is checked against an independent computation: the largest dot
product of unit vectors on the sphere (monotone in great-circle distance), not the
haversine formula the program uses."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.countries import COUNTRIES
from edge.geo import EARTH_RADIUS_KM, country_routes, haversine_km, regions_by_distance, regions_nearest_to
from edge.regions import AWS_REGIONS

UNLOCATED = {"AQ", "BV", "HM", "UM"}
latitudes = st.floats(min_value=-90, max_value=90, allow_nan=False)
longitudes = st.floats(min_value=-180, max_value=180, allow_nan=False)


def unit_vector(lat: float, lon: float) -> tuple[float, float, float]:
    phi, lmb = math.radians(lat), math.radians(lon)
    return (math.cos(phi) * math.cos(lmb), math.cos(phi) * math.sin(lmb), math.sin(phi))


def nearest_by_dot_product(country_code: str, regions: list[str]) -> str:
    country = COUNTRIES[country_code]
    assert country.latitude is not None and country.longitude is not None
    c = unit_vector(country.latitude, country.longitude)

    def closeness(code: str) -> float:
        r = unit_vector(AWS_REGIONS[code].latitude, AWS_REGIONS[code].longitude)
        return sum(a * b for a, b in zip(c, r, strict=True))

    return max(regions, key=closeness)


def test_every_iso_3166_code_is_listed_once_with_a_name():
    # 249 officially assigned ISO 3166-1 alpha-2 codes, plus XK (Kosovo).
    assert len(COUNTRIES) == 250
    for code, country in COUNTRIES.items():
        assert re.fullmatch(r"[A-Z]{2}", code) and country.code == code
        assert country.name
    assert {"US", "SE", "NO", "FI", "JP", "SG", "XK", "SS", "CW", "SX", "BQ", "BL", "MF"} <= set(COUNTRIES)


def test_coordinates_are_on_the_globe_and_only_uninhabited_codes_lack_one():
    assert {code for code, c in COUNTRIES.items() if not c.located} == UNLOCATED
    for country in COUNTRIES.values():
        if country.located:
            assert country.latitude is not None and country.longitude is not None
            assert -90 <= country.latitude <= 90 and -180 <= country.longitude <= 180
            assert country.place


@pytest.mark.parametrize(
    ("code", "lat", "lon"),
    [("SE", 59.33, 18.07), ("JP", 35.69, 139.69), ("BR", -15.78, -47.93), ("AU", -35.28, 149.13), ("US", 38.9, -77.04)],
)
def test_known_capitals_are_where_they_should_be(code, lat, lon):
    country = COUNTRIES[code]
    assert country.latitude is not None and country.longitude is not None
    assert haversine_km(country.latitude, country.longitude, lat, lon) < 25


def test_haversine_matches_known_distances():
    # London - New York is about 5570 km; a quarter meridian is pi/2 * R.
    assert haversine_km(51.51, -0.13, 40.71, -74.01) == pytest.approx(5570, abs=15)
    assert haversine_km(0, 0, 90, 0) == pytest.approx(math.pi / 2 * EARTH_RADIUS_KM)
    assert haversine_km(0, 0, 0, 180) == pytest.approx(math.pi * EARTH_RADIUS_KM)


@given(latitudes, longitudes, latitudes, longitudes)
def test_haversine_is_a_symmetric_bounded_distance(lat1, lon1, lat2, lon2):
    d = haversine_km(lat1, lon1, lat2, lon2)
    assert 0 <= d <= math.pi * EARTH_RADIUS_KM + 1e-6
    assert d == pytest.approx(haversine_km(lat2, lon2, lat1, lon1), abs=1e-6)
    assert haversine_km(lat1, lon1, lat1, lon1) == pytest.approx(0, abs=1e-6)
    # Independent: the chord between unit vectors gives the same central angle.
    a, b = unit_vector(lat1, lon1), unit_vector(lat2, lon2)
    chord = math.dist(a, b)
    assert d == pytest.approx(2 * EARTH_RADIUS_KM * math.asin(min(1.0, chord / 2)), abs=1e-3)


deployments = st.lists(st.sampled_from(sorted(AWS_REGIONS)), min_size=1, max_size=8, unique=True)


@settings(max_examples=60, deadline=None)
@given(deployments)
def test_every_located_country_routes_to_every_deployed_region_nearest_first(regions):
    routes = country_routes(regions)
    assert set(routes) == set(COUNTRIES) - UNLOCATED
    for code, ordered in routes.items():
        assert sorted(ordered) == sorted(regions), "each route lists exactly the deployed regions"
        assert ordered[0] == nearest_by_dot_product(code, regions)


def test_nordic_viewers_go_to_the_nearest_deployed_region_not_to_us_east_1():
    # A fixed table's trap: eu-north-1 mapped but not deployed, so Nordic viewers fell to us-east-1.
    routes = country_routes(["us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1"])
    for code in ("SE", "NO", "FI", "DK", "IS"):
        assert routes[code][0] == "eu-west-1"
    routes = country_routes(["us-east-1", "eu-west-1", "eu-north-1"])
    for code in ("SE", "NO", "FI"):
        assert routes[code][0] == "eu-north-1"


def test_regions_by_distance_orders_all_regions_by_increasing_distance():
    se = COUNTRIES["SE"]
    ordered = regions_by_distance(se, AWS_REGIONS)
    assert ordered[0] == "eu-north-1"
    assert se.latitude is not None and se.longitude is not None
    distances = [
        haversine_km(se.latitude, se.longitude, AWS_REGIONS[r].latitude, AWS_REGIONS[r].longitude) for r in ordered
    ]
    assert distances == sorted(distances)


def test_a_country_without_coordinate_cannot_be_measured():
    with pytest.raises(ValueError, match="AQ has no coordinate"):
        regions_by_distance(COUNTRIES["AQ"], ["us-east-1"])


def test_the_table_needs_known_deployed_regions():
    with pytest.raises(ValueError, match="at least one"):
        country_routes([])
    with pytest.raises(ValueError, match="mars-west-1"):
        country_routes(["us-east-1", "mars-west-1"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(sorted(AWS_REGIONS)), min_size=1, max_size=10, unique=True), st.data())
def test_regions_nearest_to_a_region_start_with_it_and_grow_farther(regions, data):
    home = data.draw(st.sampled_from(regions))
    order = regions_nearest_to(home, regions)
    assert order[0] == home and sorted(order) == sorted(regions)
    h = AWS_REGIONS[home]
    distances = [haversine_km(h.latitude, h.longitude, AWS_REGIONS[r].latitude, AWS_REGIONS[r].longitude) for r in order]
    assert distances == sorted(distances)
    with pytest.raises(ValueError, match="mars-1"):
        regions_nearest_to("mars-1", regions)
