"""The program (``__main__.py``) wires the edge's web ACL: created from the stack's waf*
keys, named by the distribution (web_acl_id), exported, and absent with wafEnabled false;
a bad waf* value stops the program before any resource is registered."""

from __future__ import annotations

import pulumi
import pytest

from components.edge import EdgeLayer, EdgeLayerArgs
from edge.firewall_rules import tool_rule_name
from local.firewall import snake_keys
from stack_config.checks import ConfigError
from tests.components.test_edge import gate_config_of
from tests.harness import ProgramRun, run_program

WEB_ACL = "aws:wafv2/webAcl:WebAcl"
DISTRIBUTION = "aws:cloudfront/distribution:Distribution"


def test_the_distribution_names_the_stacks_cloudfront_web_acl_by_its_arn(prod: ProgramRun):
    acl = prod.one(WEB_ACL)
    assert (acl.region, acl["scope"]) == ("us-east-1", "CLOUDFRONT")
    assert prod.one(DISTRIBUTION).inputs["webAclId"] == acl.outputs["arn"] == prod.outputs["webAclArn"]
    assert prod.outputs["topology"]["edge"]["webAclArn"] == acl.outputs["arn"]
    assert prod.outputs["webAclLogGroup"].startswith("aws-waf-logs-")
    # Its own component, beside the edge (the distribution depends on it, not the other way).
    parent = prod.parent_of(acl)
    assert parent is not None and parent.type == "mcpedge:index:EdgeFirewall"


def test_the_web_acl_carries_the_stacks_limits(prod: ProgramRun):
    rules = {r["name"]: r for r in snake_keys(prod.one(WEB_ACL)["rules"])}
    tool = rules[tool_rule_name(1, "countdown")]["statement"]["rate_based_statement"]
    token = rules["token-limit"]["statement"]["rate_based_statement"]
    assert (tool["limit"], tool["evaluation_window_sec"]) == (30, 60)  # Pulumi.prod.yaml
    assert (token["limit"], token["evaluation_window_sec"]) == (600, 60)  # the defaults
    assert {"aws-ip-reputation", "aws-known-bad-inputs", "aws-common-rule-set"} <= set(rules)


def test_other_limits_reach_the_rules_and_waf_disabled_leaves_no_web_acl():
    tuned = run_program("prod", config_overrides={"wafTokenLimit": 50, "wafWindowSeconds": 300, "wafIpLimit": 4000,
                                                  "wafManagedRules": False, "wafToolLimits": {"echo": 12},
                                                  "wafBodyInspectionKb": 32})
    rules = {r["name"]: r for r in snake_keys(tuned.one(WEB_ACL)["rules"])}
    assert set(rules) == {tool_rule_name(1, "echo"), "token-limit", "anonymous-ip-limit", "ip-limit"}
    assert rules["token-limit"]["statement"]["rate_based_statement"]["limit"] == 50
    assert rules["ip-limit"]["statement"]["rate_based_statement"]["limit"] == 4000
    # The gate refuses what these rules cannot count: it knows the limited tools and the inspected size.
    gate = gate_config_of(tuned)
    assert (gate["rate_limited_tools"], gate["waf_body_inspection_bytes"]) == (["echo"], 32 * 1024)
    off = run_program("prod", config_overrides={"wafEnabled": False})
    assert not off.of_type(WEB_ACL)
    assert gate_config_of(off)["rate_limited_tools"] == [], "no web ACL: nothing to refuse for it"
    assert not off.one(DISTRIBUTION).inputs.get("webAclId")
    assert "webAclArn" not in off.outputs and off.outputs["topology"]["edge"]["webAclArn"] is None


def test_a_bad_waf_value_stops_the_program_before_any_resource_naming_the_key():
    with pytest.raises(ConfigError, match=r"mcp-edge:wafWindowSeconds = 45: must be one of 60, 120, 300, 600"):
        run_program("prod", config_overrides={"wafWindowSeconds": 45})


def test_the_edge_refuses_a_web_acl_that_cloudfront_cannot_use():
    def program() -> None:
        EdgeLayer("edge", EdgeLayerArgs(
            server_id="acme-mcp", origin_hosts={"us-east-1": "a.lambda-url.us-east-1.on.aws"},
            default_region="us-east-1",
            origin_function_arns={"us-east-1": "arn:aws:lambda:us-east-1:123456789012:function:acme-mcp-origin"},
            auth={"issuer": "https://auth.acme.example", "audience": "https://mcp.acme.example/mcp"},
            jwks_url="https://auth.acme.example/jwks",
            web_acl_arn="arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/x/1"))
        pulumi.export("unused", 1)

    with pytest.raises(ValueError, match=r"web_acl_arn = .*must be a WAFv2 web ACL ARN in us-east-1"):
        run_program("prod", program=program)
