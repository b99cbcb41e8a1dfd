"""The viewer country picks the region through the program's router (the served-region header)."""

from __future__ import annotations

import httpx
import pytest

from edge.protocol import AVOID_REGIONS_HEADER
from functions.contract import SERVED_REGION_HEADER
from local.client import token_for
from local.plan import LocalPlan
from tests.e2e.conftest import DEFAULT_COUNTRY, avoided_regions

pytestmark = pytest.mark.e2e

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}


@pytest.fixture(autouse=True)
def every_region_used(plan: LocalPlan) -> None:
    """These tests route a healthy topology: a test that stopped an origin left once the edge
    used it again (test_probes waits for the avoid to land before it restarts the origin, and
    the consumers publish a change in the round that completes the quorum), so nothing may be
    avoided here."""
    assert not avoided_regions(plan), f"the edge avoids {avoided_regions(plan)} before any routing test"


@pytest.fixture
def token(plan: LocalPlan) -> str:
    return token_for(plan)


def _served_region(plan: LocalPlan, token: str, **headers: str) -> str:
    response = httpx.post(plan.mcp_url, json=INITIALIZE, timeout=30, headers={
        "authorization": f"Bearer {token}", "accept": "application/json, text/event-stream", **headers})
    assert response.status_code == 200, response.text
    return response.headers[SERVED_REGION_HEADER]


@pytest.mark.parametrize(("country", "region"), [
    ("US", "us-east-1"), ("CA", "us-east-1"), ("BR", "us-east-1"),
    ("DE", "eu-west-1"), ("GB", "eu-west-1"), ("SE", "eu-west-1"),  # Nordics: nearest deployed, not eu-north-1
    ("SG", "ap-southeast-1"), ("AU", "ap-southeast-1"), ("IN", "ap-southeast-1"),
    ("JP", "ap-northeast-1"), ("KR", "ap-northeast-1"),
])
def test_the_viewer_country_routes_to_the_nearest_deployed_region(plan: LocalPlan, token: str, country: str,
                                                                  region: str) -> None:
    assert _served_region(plan, token, **{"cloudfront-viewer-country": country}) == region


def test_without_a_country_header_the_default_country_routes(plan: LocalPlan, token: str) -> None:
    assert DEFAULT_COUNTRY == "JP"
    assert _served_region(plan, token) == "ap-northeast-1"


def test_an_unknown_country_goes_to_the_stacks_default_region(plan: LocalPlan, token: str) -> None:
    assert _served_region(plan, token, **{"cloudfront-viewer-country": "ZZ"}) == plan.default_region


def test_the_probes_region_pin_wins_over_the_country_and_anyone_elses_is_ignored(plan: LocalPlan, token: str) -> None:
    from stack_config.loading import load_from_stack_file

    probe_token = token_for(plan, load_from_stack_file(plan.stack).auth.probe_client_id)
    pinned = {"cloudfront-viewer-country": "JP", "x-mcp-edge-region": "eu-west-1"}
    assert _served_region(plan, probe_token, **pinned) == "eu-west-1"
    assert _served_region(plan, token, **pinned) == "ap-northeast-1"


def test_a_viewers_own_avoid_header_never_steers_the_router(plan: LocalPlan, token: str) -> None:
    # The CloudFront Function removes any x-mcp-edge-avoid a viewer sends; only what it
    # reads from the KeyValueStore may steer the router.
    headers = {"cloudfront-viewer-country": "DE", AVOID_REGIONS_HEADER: "eu-west-1"}
    assert _served_region(plan, token, **headers) == "eu-west-1"
