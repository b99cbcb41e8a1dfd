"""CloudFront's request limits at the local edge as scripts/run-local serves it (its own
HTTP server in front: nothing below CloudFront's limits refuses first)."""

from __future__ import annotations

import httpx
import pytest

from local.client import token_for
from local.cloudfront.request_limits import MAX_REQUEST_HEAD_BYTES
from local.plan import LocalPlan

pytestmark = pytest.mark.e2e


def test_a_20_kb_token_and_a_70_kb_header_get_cloudfronts_413_while_a_head_just_below_passes(plan: LocalPlan) -> None:
    token = token_for(plan)
    big_token = httpx.post(plan.mcp_url, json={}, headers={"authorization": "Bearer " + "a" * 20 * 1024})
    big_header = httpx.post(plan.mcp_url, json={}, headers={"authorization": f"Bearer {token}",
                                                            "x-padding": "p" * 70 * 1024})
    for response in (big_token, big_header):
        assert response.status_code == 413, response.text[:200]
        assert response.headers["x-local-edge-error"] == "RequestTooLarge"
    # A head a little under the limit reaches the origin (which answers the empty body itself).
    padding = MAX_REQUEST_HEAD_BYTES - len(token) - 1024
    fits = httpx.post(plan.mcp_url, json={}, headers={"authorization": f"Bearer {token}", "x-padding": "p" * padding,
                                                      "mcp-protocol-version": "2025-11-25",
                                                      "accept": "application/json, text/event-stream"})
    assert fits.status_code != 413 and "x-local-edge-error" not in fits.headers, fits.text[:200]
    assert "x-mcp-edge-served-region" in fits.headers
