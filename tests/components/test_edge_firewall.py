"""EdgeFirewall under Pulumi mocks (preview=False), in a fresh program holding only it:
the web ACL in us-east-1 with scope CLOUDFRONT and the rendered rules, the custom
responses, the log group WAF requires and the logging configuration, the outputs the
distribution needs; and no managed rule that would block a large JSON body."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.provider.experimental.component import ComponentProvider

from components.edge_firewall import EdgeFirewall, EdgeFirewallArgs
from components.type_tokens import PACKAGE, VERSION
from components.validation import ComponentArgsError
from edge.firewall_rules import FirewallSettings, render_web_acl
from local.firewall import FirewallRequest, WebAclEmulator, snake_keys
from tests.harness import ACCOUNT_ID, ProgramRun, run_program

WEB_ACL = "aws:wafv2/webAcl:WebAcl"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
LOGGING = "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration"
ARGS: EdgeFirewallArgs = {"server_id": "acme-mcp", "mcp_path": "/mcp", "token_limit": 300,
                          "anonymous_ip_limit": 60, "tool_limits": {"search_docs": 20}, "window_seconds": 120,
                          "log_retention_days": 14}


def firewall_program(args: EdgeFirewallArgs) -> ProgramRun:
    def program() -> None:
        firewall = EdgeFirewall("edge-firewall", args)
        pulumi.export("webAclArn", firewall.web_acl_arn)
        pulumi.export("webAclId", firewall.web_acl_id)
        pulumi.export("logGroupName", firewall.log_group_name)
        pulumi.export("ruleMetricNames", firewall.rule_metric_names)

    return run_program("prod", program=program)


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return firewall_program(ARGS)


def rules_of(acl: Any) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in snake_keys(acl["rules"])}


def test_the_web_acl_is_cloudfront_scoped_in_us_east_1_under_the_component(run):
    acl = run.one(WEB_ACL)
    assert acl.region == "us-east-1" and acl["scope"] == "CLOUDFRONT"
    assert acl["name"] == "acme-mcp-prod-edge"
    assert acl["defaultAction"] == {"allow": {}}
    assert acl["visibilityConfig"] == {"cloudwatchMetricsEnabled": True, "metricName": "acme-mcp-prod-edge",
                                       "sampledRequestsEnabled": True}
    parent = run.parent_of(acl)
    assert parent is not None and parent.type == "mcpedge:index:EdgeFirewall" and parent.name == "edge-firewall"
    assert {r.name for r in run.children_of(parent)} == {"edge-firewall-web-acl", "edge-firewall-logs",
                                                         "edge-firewall-logging"}


def test_the_outputs_are_what_the_distribution_and_the_status_page_need(run):
    acl = run.one(WEB_ACL)
    # The distribution's web_acl_id takes a WAFv2 web ACL's ARN (a "global" one for CloudFront).
    assert run.outputs["webAclArn"] == acl.outputs["arn"]
    assert run.outputs["webAclArn"].startswith(f"arn:aws:wafv2:us-east-1:{ACCOUNT_ID}:global/webacl/acme-mcp-prod-edge/")
    assert run.outputs["webAclId"] == acl.id and run.outputs["webAclArn"].endswith(acl.id)
    assert run.outputs["logGroupName"] == "aws-waf-logs-acme-mcp-prod-edge"
    assert run.outputs["ruleMetricNames"] == [r["visibilityConfig"]["metricName"] for r in acl["rules"]]


def test_the_rules_are_the_rendered_rules_for_the_args(run):
    rendered = render_web_acl(FirewallSettings(mcp_path="/mcp", token_limit=300, anonymous_ip_limit=60,
                                               tool_limits={"search_docs": 20}, window_seconds=120))
    acl = run.one(WEB_ACL)
    assert snake_keys(acl["rules"]) == rendered.rules
    assert snake_keys(acl["customResponseBodies"]) == rendered.custom_response_bodies
    assert acl["associationConfig"] == {"requestBodies": [{"cloudfront": {"defaultSizeInspectionLimit": "KB_16"}}]}


def test_each_rate_rule_has_its_key_window_limit_and_scope_down(run):
    rules = rules_of(run.one(WEB_ACL))
    token = rules["token-limit"]["statement"]["rate_based_statement"]
    assert (token["limit"], token["evaluation_window_sec"], token["aggregate_key_type"]) == (300, 120, "CUSTOM_KEYS")
    assert [k["header"]["name"] for k in token["custom_keys"]] == ["authorization"]
    assert token["scope_down_statement"]["byte_match_statement"]["search_string"] == "/mcp"
    anonymous = rules["anonymous-ip-limit"]["statement"]["rate_based_statement"]
    assert (anonymous["limit"], anonymous["evaluation_window_sec"], anonymous["aggregate_key_type"]) == (60, 120, "IP")
    assert "or_statement" in anonymous["scope_down_statement"]
    tool = rules["tool-limit-1-search_docs"]["statement"]["rate_based_statement"]
    assert (tool["limit"], tool["evaluation_window_sec"]) == (20, 120)
    assert [k["header"]["name"] for k in tool["custom_keys"]] == ["authorization"]
    scope = json.dumps(tool["scope_down_statement"])
    assert '"search_string": "search_docs"' in scope and '"/params/name"' in scope and '"mcp-name"' in scope


def test_a_limited_request_gets_429_retry_after_and_a_json_rpc_body(run):
    acl = run.one(WEB_ACL)
    bodies = {b["key"]: b for b in snake_keys(acl["customResponseBodies"])}
    for name, r in rules_of(acl).items():
        if "rate_based_statement" not in r["statement"]:
            continue
        response = r["action"]["block"]["custom_response"]
        assert response["response_code"] == 429, name
        assert response["response_headers"] == [{"name": "Retry-After", "value": "120"}]
        body = bodies[response["custom_response_body_key"]]
        assert body["content_type"] == "APPLICATION_JSON"
        assert json.loads(body["content"])["error"]["data"]["retryAfterSeconds"] == 120


def test_waf_logs_to_an_aws_waf_logs_group_in_us_east_1_without_tokens(run):
    group = run.one(LOG_GROUP)
    assert group.region == "us-east-1" and group["name"] == "aws-waf-logs-acme-mcp-prod-edge"
    assert group["retentionInDays"] == 14
    logging = run.one(LOGGING)
    assert logging.region == "us-east-1"
    assert logging["resourceArn"] == run.one(WEB_ACL).outputs["arn"]
    assert logging["logDestinationConfigs"] == [group.outputs["arn"]]
    assert logging["redactedFields"] == [{"singleHeader": {"name": "authorization"}}]


def test_no_managed_rule_blocks_a_large_json_tool_call_read_from_the_registered_web_acl(run):
    """The registered rules, through the local emulation of every rule: a 100 KB tools/call passes."""
    emulator = WebAclEmulator.from_web_acl_inputs(run.one(WEB_ACL).inputs, clock=lambda: 0.0)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "write_file", "arguments": {"path": "../site/index.html",
                                            "content": "<script>alert(1)</script>" + "x" * 100_000}}}).encode()
    verdict = emulator.evaluate(FirewallRequest("POST", "/mcp", {"authorization": "Bearer a.b.c",
                                                                "content-type": "application/json"}, body))
    assert verdict.allowed, verdict
    assert "AWSManagedRulesCommonRuleSet:SizeRestrictions_BODY" in verdict.counted


def test_managed_rules_off_registers_only_the_rate_rules():
    run = firewall_program({**ARGS, "managed_rules": False})
    assert [r["name"] for r in run.one(WEB_ACL)["rules"]] == ["tool-limit-1-search_docs", "token-limit",
                                                              "anonymous-ip-limit", "ip-limit"]


def test_bad_args_are_refused_by_name_before_any_resource():
    with pytest.raises(ComponentArgsError) as raised:
        firewall_program({"server_id": "acme-mcp", "mcp_path": "/mcp", "window_seconds": 30, "token_limit": 5,
                          "log_retention_days": 2, "tool_limits": {"bad name": 20}})
    problems = "\n".join(raised.value.problems)
    for field in ("window_seconds = 30", "token_limit = 5", "log_retention_days = 2", "tool_limits['bad name']"):
        assert field in problems


def test_the_component_analyzer_reads_its_args_and_outputs():
    schema = json.loads(ComponentProvider([EdgeFirewall], PACKAGE, None, VERSION).schema or "{}")
    resource = schema["resources"][f"{PACKAGE}:index:EdgeFirewall"]
    assert set(resource["inputProperties"]) == {"serverId", "mcpPath", "tokenLimit", "anonymousIpLimit", "ipLimit", "toolLimits",
                                                "windowSeconds", "managedRules", "bodyInspectionKb",
                                                "logRetentionDays"}
    assert resource["inputProperties"]["toolLimits"]["additionalProperties"]["type"] == "integer"
    assert set(resource["properties"]) == {"webAclArn", "webAclId", "logGroupName", "ruleMetricNames"}
    assert all(p.get("description") for p in resource["inputProperties"].values())
