"""The Lambda@Edge geo-router, imported from the package the program uploads (the zip
at ``inputs["code"].path`` of the us-east-1 router function), on origin-request
events shaped as CloudFront sends them."""

from __future__ import annotations

import ast
import copy
import itertools
import subprocess
import sys
import zipfile
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devkit.edge_runtimes.in_process import RouterFunction
from devkit.shipped import (
    CUSTOM_ORIGIN_HEADER,
    alt_program,
    function_url_hosts,
    load_router,
    origin_request_event,
    router_zip,
)
from edge.countries import COUNTRIES
from edge.protocol import AVOID_REGIONS_HEADER
from edge.regions import AWS_REGIONS
from edge.router import ROUTER_HANDLER, OriginTarget, render_router, router_config
from functions.contract import REGION_PIN_HEADER
from stack_config.loading import load_from_stack_file
from tests.edge.test_geo import nearest_by_dot_product, unit_vector
from tests.harness import ProgramRun

CONFIG = load_from_stack_file("prod")
DEPLOYED = list(CONFIG.regions)
CUSTOM_HEADERS = {CUSTOM_ORIGIN_HEADER[0]: [{"key": CUSTOM_ORIGIN_HEADER[0], "value": CUSTOM_ORIGIN_HEADER[1]}]}


def routed(router: ModuleType, headers: dict[str, str]) -> dict:
    event = origin_request_event(headers)
    result = router.handler(event, None)
    assert result is event["Records"][0]["cf"]["request"], "the router returns the request it was given"
    return result


def region_of(result: dict, hosts: dict[str, str]) -> str:
    domain = result["origin"]["custom"]["domainName"]
    (region,) = [r for r, host in hosts.items() if host == domain]
    return region


@pytest.fixture(scope="module")
def hosts(prod: ProgramRun) -> dict[str, str]:
    return function_url_hosts(prod)


# --- the package ------------------------------------------------------------------------


def test_the_router_module_uses_only_the_standard_library(prod):
    with zipfile.ZipFile(router_zip(prod)) as zf:
        # The module and its precompiled bytecode (cold starts at the edge compile nothing),
        # beside the gate that imports it (tests/components/test_edge.py: the package).
        assert {"__pycache__/geo_router.cpython-313.pyc", "geo_router.py"} <= set(zf.namelist())
        source = zf.read("geo_router.py").decode()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "typing"}
    assert "os.environ" not in source and "getenv" not in source, "Lambda@Edge has no environment variables"


def test_the_package_imports_in_a_bare_interpreter_and_routes(prod, hosts):
    # Isolated mode: no project, no site-packages on the path, as on Lambda.
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import geo_router\n"
        "e = {'Records': [{'cf': {'request': {'headers': {'cloudfront-viewer-country': [{'value': 'JP'}]},"
        " 'origin': {'custom': {'customHeaders': {}}}}}}]}\n"
        "print(geo_router.handler(e, None)['origin']['custom']['domainName'])"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", script, str(router_zip(prod))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == hosts["ap-northeast-1"]


def test_the_embedded_origins_are_the_function_urls_the_program_creates(router, hosts):
    assert set(router.ORIGINS) == set(DEPLOYED)
    for region, origin in router.ORIGINS.items():
        assert origin == {"domainName": hosts[region], "port": 443, "protocol": "https", "host": hosts[region]}
    assert CONFIG.default_region == router.DEFAULT_REGION
    assert router.PIN_HEADER == REGION_PIN_HEADER


# --- routing -----------------------------------------------------------------------------


def test_every_country_routes_to_its_nearest_deployed_region(router, hosts):
    located = [code for code, c in COUNTRIES.items() if c.located]
    assert set(router.ROUTES) == set(located)
    for code in located:
        result = routed(router, {"CloudFront-Viewer-Country": code})
        region = region_of(result, hosts)
        assert region in DEPLOYED
        assert region == nearest_by_dot_product(code, DEPLOYED), code


@pytest.mark.parametrize(("country", "region"), [("SE", "eu-west-1"), ("NO", "eu-west-1"), ("DE", "eu-west-1"),
                                                 ("JP", "ap-northeast-1"), ("KR", "ap-northeast-1"),
                                                 ("IN", "ap-southeast-1"), ("AU", "ap-southeast-1"),
                                                 ("BR", "us-east-1"), ("CA", "us-east-1"), ("NG", "eu-west-1"),
                                                 ("ZA", "ap-southeast-1")])
def test_known_countries_land_where_a_person_would_expect(router, hosts, country, region):
    assert region_of(routed(router, {"CloudFront-Viewer-Country": country}), hosts) == region


@pytest.mark.parametrize("headers", [{}, {"CloudFront-Viewer-Country": "AQ"}, {"CloudFront-Viewer-Country": "ZZ"},
                                     {"CloudFront-Viewer-Country": ""}, {"CloudFront-Viewer-Country": "Sweden"}])
def test_unknown_or_missing_country_goes_to_the_default_region(router, hosts, headers):
    assert region_of(routed(router, headers), hosts) == CONFIG.default_region


def test_country_codes_are_read_case_and_space_insensitively(router, hosts):
    assert region_of(routed(router, {"CloudFront-Viewer-Country": " jp "}), hosts) == "ap-northeast-1"


def test_the_origin_is_changed_in_place_so_custom_headers_survive(router, hosts):
    event = origin_request_event({"CloudFront-Viewer-Country": "SG"})
    request = event["Records"][0]["cf"]["request"]
    custom_before = request["origin"]["custom"]
    result = router.handler(event, None)
    custom = result["origin"]["custom"]
    assert custom is custom_before, "request.origin.custom must be edited, not replaced"
    assert custom["customHeaders"] == CUSTOM_HEADERS
    assert custom["domainName"] == hosts["ap-southeast-1"]
    assert (custom["port"], custom["protocol"]) == (443, "https")
    assert custom["readTimeout"] == CONFIG.edge.origin_read_timeout_s
    assert custom["keepaliveTimeout"] == CONFIG.edge.origin_keepalive_s
    assert custom["sslProtocols"] == ["TLSv1.2"] and custom["path"] == ""


def test_host_is_rewritten_to_the_chosen_function_url(router, hosts):
    result = routed(router, {"CloudFront-Viewer-Country": "JP", "Host": "mcp.acme.example"})
    assert result["headers"]["host"] == [{"key": "Host", "value": hosts["ap-northeast-1"]}]


def test_other_viewer_headers_are_left_alone(router):
    headers = {"Authorization": "Bearer a.b.c", "Mcp-Protocol-Version": "2026-07-28", "CloudFront-Viewer-Country": "DE"}
    result = routed(router, headers)
    for name, value in headers.items():
        assert result["headers"][name.lower()] == [{"key": name, "value": value}]


@pytest.mark.parametrize("pin", DEPLOYED)
def test_a_pin_to_a_deployed_region_wins_over_the_country(router, hosts, pin):
    result = routed(router, {"CloudFront-Viewer-Country": "BR", REGION_PIN_HEADER: pin.upper()})
    assert region_of(result, hosts) == pin
    assert result["headers"]["host"][0]["value"] == hosts[pin]


@pytest.mark.parametrize("pin", ["eu-north-1", "mars-west-1", "", "us-east-1,eu-west-1", "../../etc"])
def test_a_pin_to_anything_but_a_deployed_region_is_ignored(router, hosts, pin):
    result = routed(router, {"CloudFront-Viewer-Country": "JP", REGION_PIN_HEADER: pin})
    assert region_of(result, hosts) == "ap-northeast-1"


def test_a_request_without_a_custom_origin_still_gets_one():
    router = load_router_for({"us-east-1": OriginTarget("a.lambda-url.us-east-1.on.aws")}, "us-east-1")
    request: dict[str, Any] = {"headers": {}, "origin": {"s3": {}}}
    router.route(request)
    assert request["origin"]["custom"]["domainName"] == "a.lambda-url.us-east-1.on.aws"
    assert request["headers"]["host"][0]["value"] == "a.lambda-url.us-east-1.on.aws"


header_values = st.lists(st.fixed_dictionaries({"key": st.text(max_size=10), "value": st.text(max_size=20)}), max_size=2)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["cloudfront-viewer-country", REGION_PIN_HEADER, "host", "x-other"]),
                       st.one_of(header_values, st.none(), st.integers(), st.lists(st.integers(), max_size=2)),
                       max_size=4))
def test_arbitrary_headers_always_route_to_a_deployed_origin(router, headers):
    event = origin_request_event()
    request = event["Records"][0]["cf"]["request"]
    request["headers"] = copy.deepcopy(headers)
    result = router.handler(event, None)
    assert result["origin"]["custom"]["domainName"] in {o["domainName"] for o in router.ORIGINS.values()}
    assert result["origin"]["custom"]["customHeaders"] == CUSTOM_HEADERS


# --- another stack: eu-north-1 deployed, other timeouts -----------------------------------


def test_with_eu_north_1_deployed_nordic_viewers_go_there():
    alt = alt_program()
    router = load_router(router_zip(alt))
    hosts = function_url_hosts(alt)
    for country in ("SE", "NO", "FI"):
        assert region_of(routed(router, {"CloudFront-Viewer-Country": country}), hosts) == "eu-north-1"
    assert region_of(routed(router, {}), hosts) == "eu-west-1"
    custom = routed(router, {"CloudFront-Viewer-Country": "AU"})["origin"]["custom"]
    assert custom["domainName"] == hosts["ap-southeast-2"]
    assert (custom["readTimeout"], custom["keepaliveTimeout"]) == (45, 10)


# --- the renderer, for the local edge --------------------------------------------------------


def load_router_for(
    origins: dict[str, OriginTarget], default: str, *, read_timeout_s: int = 60, keepalive_timeout_s: int = 5
) -> ModuleType:
    source = render_router(origins, default, read_timeout_s=read_timeout_s, keepalive_timeout_s=keepalive_timeout_s)
    return RouterFunction(source, ROUTER_HANDLER).module


def test_a_local_router_targets_http_origins_with_ports():
    origins = {"us-east-1": OriginTarget("127.0.0.1", 8101, "http"), "eu-west-1": OriginTarget("127.0.0.1", 8102, "http")}
    router = load_router_for(origins, "us-east-1", read_timeout_s=30, keepalive_timeout_s=2)
    result = routed(router, {"CloudFront-Viewer-Country": "FR"})
    custom = result["origin"]["custom"]
    assert (custom["domainName"], custom["port"], custom["protocol"]) == ("127.0.0.1", 8102, "http")
    assert (custom["readTimeout"], custom["keepaliveTimeout"]) == (30, 2)
    assert result["headers"]["host"] == [{"key": "Host", "value": "127.0.0.1:8102"}]


@pytest.mark.parametrize(
    ("origins", "default", "message"),
    [
        ({}, "us-east-1", "at least one origin"),
        ({"us-east-1": OriginTarget("a.example")}, "eu-west-1", "default region 'eu-west-1' has no origin"),
    ],
)
def test_the_renderer_refuses_inconsistent_origins(origins, default, message):
    with pytest.raises(ValueError, match=message):
        router_config(origins, default)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("https://a.lambda-url.us-east-1.on.aws/",), "not a host name"),
        (("a.example", 0), "not a TCP port"),
        (("a.example", 443, "ftp"), "https or http"),
    ],
)
def test_origin_targets_are_validated(args, message):
    with pytest.raises(ValueError, match=message):
        OriginTarget(*args)


@pytest.mark.parametrize("read_timeout_s", [0, -1, 121, 180])
def test_a_read_timeout_the_lambda_edge_event_refuses_is_not_rendered(read_timeout_s):
    # Given a read timeout outside CloudFront's origin response timeout range (1-120; above 60
    # with a quota increase), when the router is rendered, then it is refused.
    origins = {"us-east-1": OriginTarget("a.example")}
    with pytest.raises(ValueError, match="readTimeout accepts, 1-120 s"):
        router_config(origins, "us-east-1", read_timeout_s=read_timeout_s)


def test_timeouts_outside_cloudfront_limits_are_refused():
    origins = {"us-east-1": OriginTarget("a.example")}
    assert router_config(origins, "us-east-1", read_timeout_s=1)["read_timeout"] == 1
    assert router_config(origins, "us-east-1", read_timeout_s=120)["read_timeout"] == 120
    with pytest.raises(ValueError, match="1-60"):
        router_config(origins, "us-east-1", keepalive_timeout_s=0)


# --- regional failover: the nearest healthy region ------------------------------------------


def closest_to(point: tuple[float, float], regions: list[str]) -> str:
    """Independent of edge/geo.py's haversine: the largest dot product of unit vectors."""
    p = unit_vector(*point)

    def closeness(code: str) -> float:
        r = unit_vector(AWS_REGIONS[code].latitude, AWS_REGIONS[code].longitude)
        return sum(a * b for a, b in zip(p, r, strict=True))

    return max(regions, key=closeness)


def nearest_healthy(country: str | None, avoid: set[str], deployed: list[str], default: str) -> str:
    """Where the contract sends a viewer: every region avoided (or none) is all healthy."""
    healthy = [r for r in deployed if r not in avoid] or list(deployed)
    if country is not None and country in COUNTRIES and COUNTRIES[country].located:
        return nearest_by_dot_product(country, healthy)
    return default if default in healthy else closest_to((AWS_REGIONS[default].latitude,
                                                          AWS_REGIONS[default].longitude), healthy)


def avoid_headers(avoid: set[str]) -> dict[str, str]:
    return {AVOID_REGIONS_HEADER: ",".join(sorted(avoid))} if avoid else {}


def test_every_avoid_set_sends_every_country_to_its_nearest_healthy_region(router, hosts):
    located = sorted(code for code, c in COUNTRIES.items() if c.located)
    for size in range(len(DEPLOYED) + 1):
        for avoid in map(set, itertools.combinations(DEPLOYED, size)):
            for country in [*located, None, "ZZ", "AQ"]:
                headers = {**avoid_headers(avoid), **({"CloudFront-Viewer-Country": country} if country else {})}
                expected = nearest_healthy(country, avoid, DEPLOYED, CONFIG.default_region)
                assert region_of(routed(router, headers), hosts) == expected, (country, avoid)


def test_a_german_viewer_fails_over_from_eu_west_1_to_the_next_nearest_region(router, hosts):
    assert region_of(routed(router, {"CloudFront-Viewer-Country": "DE", AVOID_REGIONS_HEADER: "eu-west-1"}),
                     hosts) == "us-east-1"


def test_with_the_default_region_avoided_countryless_viewers_go_to_the_region_nearest_it(router, hosts):
    expected = closest_to((AWS_REGIONS[CONFIG.default_region].latitude, AWS_REGIONS[CONFIG.default_region].longitude),
                          [r for r in DEPLOYED if r != CONFIG.default_region])
    assert region_of(routed(router, {AVOID_REGIONS_HEADER: CONFIG.default_region}), hosts) == expected
    assert router.FALLBACK.split(" ")[0] == CONFIG.default_region


@pytest.mark.parametrize("pin", DEPLOYED)
def test_a_pin_still_pins_an_avoided_region_so_probes_see_it_recover(router, hosts, pin):
    headers = {"CloudFront-Viewer-Country": "BR", REGION_PIN_HEADER: pin, AVOID_REGIONS_HEADER: pin}
    assert region_of(routed(router, headers), hosts) == pin


@pytest.mark.parametrize("value", ["eu-west-1,mars-west-1", "eu-west-1,", "eu-north-1", "*", ",", "eu-west-1;us-east-1",
                                   ",".join(DEPLOYED), ",".join(DEPLOYED + DEPLOYED)])
def test_garbage_or_every_region_in_the_avoid_header_routes_as_if_all_were_healthy(router, hosts, value):
    assert region_of(routed(router, {"CloudFront-Viewer-Country": "DE", AVOID_REGIONS_HEADER: value}),
                     hosts) == "eu-west-1"


def test_the_avoid_header_is_read_with_spaces_and_any_case(router, hosts):
    headers = {"CloudFront-Viewer-Country": "JP", AVOID_REGIONS_HEADER: " AP-NORTHEAST-1 , eu-west-1"}
    assert region_of(routed(router, headers), hosts) == nearest_by_dot_product("JP", ["ap-southeast-1", "us-east-1"])


@st.composite
def stacks_and_viewers(draw: st.DrawFn) -> tuple[list[str], str, set[str], str | None]:
    deployed = draw(st.lists(st.sampled_from(sorted(AWS_REGIONS)), min_size=1, max_size=12, unique=True))
    default = draw(st.sampled_from(deployed))
    avoid = set(draw(st.lists(st.sampled_from(deployed), max_size=len(deployed), unique=True)))
    country = draw(st.one_of(st.none(), st.sampled_from(sorted(COUNTRIES)), st.text(max_size=3)))
    return deployed, default, avoid, country


@settings(max_examples=200, deadline=None)
@given(stacks_and_viewers())
def test_any_stack_and_avoid_set_routes_to_the_nearest_healthy_region(case):
    deployed, default, avoid, country = case
    router = load_router_for({r: OriginTarget(f"o.lambda-url.{r}.on.aws") for r in deployed}, default)
    hosts = {r: f"o.lambda-url.{r}.on.aws" for r in deployed}
    headers = {**avoid_headers(avoid), **({"CloudFront-Viewer-Country": country} if country is not None else {})}
    located = country is not None and country.strip().upper() in COUNTRIES
    expected = nearest_healthy(country.strip().upper() if located and country else None, avoid, deployed, default)
    assert region_of(routed(router, headers), hosts) == expected, (deployed, default, avoid, country)
