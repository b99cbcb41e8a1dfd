"""The web ACL's keys: defaults, values taken as set (YAML or engine strings), and every bad
value refused before any resource, naming the key and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from edge.firewall_rules import FirewallSettings
from stack_config.checks import ConfigError, build_stack_config
from stack_config.loading import read_stack_file, stack_file_path

PROD = read_stack_file(stack_file_path("prod"))


def build(**changes: Any):
    values = {**PROD, **changes}
    return build_stack_config(values.get, "test")


def problems_of(**changes: Any) -> str:
    with pytest.raises(ConfigError) as refused:
        build(**changes)
    return str(refused.value)


def test_the_firewall_is_on_by_default_with_the_rules_own_defaults():
    unset = {k: None for k in PROD if k.startswith("waf")}
    config = build(**unset)
    assert config.firewall == FirewallSettings(mcp_path=config.mcp_path)


def test_prod_limits_one_demo_tool_as_a_worked_example():
    firewall = build().firewall
    assert firewall is not None and dict(firewall.tool_limits) == {"countdown": 30}


def test_values_are_taken_as_set_and_as_engine_strings():
    firewall = build(wafTokenLimit="1200", wafAnonymousIpLimit=300, wafIpLimit="4000",
                     wafToolLimits='{"echo": "50", "whoami": 20}', wafWindowSeconds="300", wafManagedRules="false",
                     wafBodyInspectionKb=32, mcpPath="/v1/mcp").firewall
    assert firewall == FirewallSettings(mcp_path="/v1/mcp", token_limit=1200, anonymous_ip_limit=300, ip_limit=4000,
                                        tool_limits={"echo": 50, "whoami": 20}, window_seconds=300,
                                        managed_rules=False, body_inspection_kb=32)


def test_disabled_means_no_firewall_but_its_keys_are_still_checked():
    assert build(wafEnabled=False).firewall is None
    assert "mcp-edge:wafTokenLimit = 5" in problems_of(wafEnabled=False, wafTokenLimit=5)


@pytest.mark.parametrize(("changes", "expected"), [
    ({"wafTokenLimit": 9}, "mcp-edge:wafTokenLimit = 9: must be an integer from 10 to 2000000000"),
    ({"wafAnonymousIpLimit": 2_000_000_001}, "mcp-edge:wafAnonymousIpLimit = 2000000001: must be an integer from 10"),
    ({"wafWindowSeconds": 30}, "mcp-edge:wafWindowSeconds = 30: must be one of 60, 120, 300, 600"),
    ({"wafBodyInspectionKb": 8}, "mcp-edge:wafBodyInspectionKb = 8: must be one of 16, 32, 48, 64"),
    ({"wafToolLimits": {"bad name!": 20}}, "mcp-edge:wafToolLimits['bad name!']: a tool name must be 1-128"),
    ({"wafToolLimits": {"echo": 5}}, "mcp-edge:wafToolLimits['echo'] = 5: must be an integer from 10"),
    ({"wafToolLimits": {"echo": "many"}}, "mcp-edge:wafToolLimits['echo'] = 'many': must be an integer"),
    ({"wafToolLimits": {f"t{i}": 10 for i in range(8)}}, "mcp-edge:wafToolLimits has 8 tools: at most 7"),
    ({"wafIpLimit": 9}, "mcp-edge:wafIpLimit = 9: must be an integer from 10"),
    ({"wafIpLimit": 599}, "mcp-edge:wafIpLimit = 599: must be at least mcp-edge:wafTokenLimit (600) and "
                          "mcp-edge:wafAnonymousIpLimit (120)"),
    ({"wafAnonymousIpLimit": 5000}, "mcp-edge:wafIpLimit = 3000: must be at least mcp-edge:wafTokenLimit (600) and "
                                    "mcp-edge:wafAnonymousIpLimit (5000)"),
    ({"wafToolLimits": ["echo=5"]}, "mcp-edge:wafToolLimits = ['echo=5']: must be an object"),
    ({"wafEnabled": "yes"}, "mcp-edge:wafEnabled = 'yes': must be true or false"),
    ({"wafManagedRules": 1}, "mcp-edge:wafManagedRules = 1: must be true or false"),
])
def test_a_bad_value_is_refused_naming_the_key_and_what_is_allowed(changes: dict[str, Any], expected: str):
    assert expected in problems_of(**changes)


def test_every_bad_firewall_key_is_reported_at_once():
    message = problems_of(wafTokenLimit=1, wafAnonymousIpLimit=1, wafWindowSeconds=1, wafBodyInspectionKb=1)
    for key in ("wafTokenLimit", "wafAnonymousIpLimit", "wafWindowSeconds", "wafBodyInspectionKb"):
        assert f"mcp-edge:{key} = 1" in message
