"""The web ACL's settings and rendered rules: every bad setting refused by name, and the
rules' statements (keys, windows, scope-downs, responses) as WAF's API takes them."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.firewall_rules import (
    BODY_INSPECTION_KB,
    COMMON_RULE_SET,
    EVALUATION_WINDOWS,
    JSONRPC_BLOCKED,
    KNOWN_BAD_INPUTS,
    MANAGED_BLOCKING_RULES,
    MAX_RATE_BASED_RULES,
    MAX_TOOL_LIMITS,
    RATE_LIMIT_RANGE,
    FirewallSettings,
    FirewallSettingsError,
    check_settings,
    render_web_acl,
    setting_problems,
    tool_rule_name,
)

LOW, HIGH = RATE_LIMIT_RANGE
tool_names = st.from_regex(r"[A-Za-z0-9_.-]{1,40}", fullmatch=True)
limits = st.integers(LOW, HIGH)
valid_settings = st.tuples(st.builds(
    FirewallSettings,
    mcp_path=st.sampled_from(["/mcp", "/v1/mcp", "/a.b_c~d"]),
    token_limit=limits,
    anonymous_ip_limit=limits,
    tool_limits=st.dictionaries(tool_names, limits, max_size=MAX_TOOL_LIMITS),
    window_seconds=st.sampled_from(EVALUATION_WINDOWS),
    managed_rules=st.booleans(),
    body_inspection_kb=st.sampled_from(BODY_INSPECTION_KB),
), st.integers(0, 10_000)).map(  # the every-request limit at or above the other two
    lambda t: replace(t[0], ip_limit=min(HIGH, max(t[0].token_limit, t[0].anonymous_ip_limit) + t[1])))


def rule(rendered: Any, name: str) -> dict[str, Any]:
    return next(r for r in rendered.rules if r["name"] == name)


def test_the_defaults_are_valid_and_documented_in_the_settings_type():
    defaults = FirewallSettings()
    assert check_settings(defaults) is defaults
    assert (defaults.mcp_path, defaults.token_limit, defaults.anonymous_ip_limit, defaults.ip_limit,
            defaults.window_seconds, defaults.managed_rules, defaults.body_inspection_kb,
            dict(defaults.tool_limits)) == ("/mcp", 600, 120, 3000, 60, True, 16, {})


@given(valid_settings)
def test_valid_settings_render_one_rule_per_limit_with_unique_priorities_names_and_metrics(settings):
    rendered = render_web_acl(settings)
    rate_rules = [r for r in rendered.rules if "rate_based_statement" in r["statement"]]
    assert len(rate_rules) == 3 + len(settings.tool_limits) <= MAX_RATE_BASED_RULES
    managed = [r for r in rendered.rules if "managed_rule_group_statement" in r["statement"]]
    assert len(managed) == (3 if settings.managed_rules else 0)
    assert [r["priority"] for r in rendered.rules] == list(range(len(rendered.rules)))
    assert len(set(rendered.rule_names)) == len(rendered.rules)
    assert rendered.metric_names == rendered.rule_names
    for r in rendered.rules:
        assert r["visibility_config"] == {"cloudwatch_metrics_enabled": True, "metric_name": r["name"],
                                          "sampled_requests_enabled": True}
        assert len(r["name"]) <= 128 and all(c.isalnum() or c in "_-" for c in r["name"])
    for r in rate_rules:
        assert r["statement"]["rate_based_statement"]["evaluation_window_sec"] == settings.window_seconds
    limit = rendered.association_config["request_bodies"][0]["cloudfront"]["default_size_inspection_limit"]
    assert limit == f"KB_{settings.body_inspection_kb}"


@given(valid_settings)
def test_every_rate_limit_answers_429_with_retry_after_the_window_and_a_json_rpc_error(settings):
    rendered = render_web_acl(settings)
    bodies = {b["key"]: b for b in rendered.custom_response_bodies}
    for r in rendered.rules:
        if "rate_based_statement" not in r["statement"]:
            continue
        response = r["action"]["block"]["custom_response"]
        assert response["response_code"] == 429
        assert response["response_headers"] == [{"name": "Retry-After", "value": str(settings.window_seconds)}]
        body = bodies[response["custom_response_body_key"]]
        assert body["content_type"] == "APPLICATION_JSON" and len(body["content"].encode()) <= 4096
        error = json.loads(body["content"])
        assert error["jsonrpc"] == "2.0" and error["id"] is None
        assert error["error"]["code"] == -32029 and error["error"]["data"]["retryAfterSeconds"] == settings.window_seconds
        assert r["statement"]["rate_based_statement"]["limit"] == error["error"]["data"]["limit"]


TOKEN_KEY = [{"header": {"name": "authorization", "text_transformations": [
    {"priority": 0, "type": "COMPRESS_WHITE_SPACE"}, {"priority": 1, "type": "LOWERCASE"}]}}]


def test_the_per_token_rule_counts_by_authorization_header_in_one_spelling_on_the_mcp_path():
    statement = rule(render_web_acl(FirewallSettings(token_limit=50)), "token-limit")["statement"]["rate_based_statement"]
    assert statement["limit"] == 50 and statement["aggregate_key_type"] == "CUSTOM_KEYS"
    # Whitespace runs to one space, then one case: every spelling of a token is one key.
    assert statement["custom_keys"] == TOKEN_KEY
    assert statement["scope_down_statement"] == {"byte_match_statement": {
        "field_to_match": {"uri_path": {}}, "positional_constraint": "STARTS_WITH", "search_string": "/mcp",
        "text_transformations": [{"priority": 0, "type": "URL_DECODE"}]}}


def test_the_anonymous_rule_counts_by_ip_requests_without_a_bearer_token_or_to_the_metadata_paths():
    statement = rule(render_web_acl(FirewallSettings()), "anonymous-ip-limit")["statement"]["rate_based_statement"]
    assert statement["aggregate_key_type"] == "IP" and "custom_keys" not in statement
    no_token, metadata = statement["scope_down_statement"]["or_statement"]["statements"]
    bearer = no_token["not_statement"]["statement"]["byte_match_statement"]
    assert bearer["field_to_match"] == {"single_header": {"name": "authorization"}}
    assert (bearer["positional_constraint"], bearer["search_string"]) == ("STARTS_WITH", "bearer ")
    assert bearer["text_transformations"] == [{"priority": 0, "type": "LOWERCASE"}]
    assert metadata["byte_match_statement"]["search_string"] == "/.well-known/"


def test_a_tool_rule_matches_the_tool_by_header_or_by_json_body_per_token():
    rendered = render_web_acl(FirewallSettings(tool_limits={"search.docs": 20}))
    r = rule(rendered, "tool-limit-1-search-docs")
    assert rendered.rule_names.index(r["name"]) < rendered.rule_names.index("token-limit")
    statement = r["statement"]["rate_based_statement"]
    assert statement["limit"] == 20 and statement["custom_keys"] == TOKEN_KEY
    path, calls = statement["scope_down_statement"]["and_statement"]["statements"]
    assert path["byte_match_statement"]["search_string"] == "/mcp"
    by_header, by_body = calls["or_statement"]["statements"]
    headers = [s["byte_match_statement"] for s in by_header["and_statement"]["statements"]]
    assert [(h["field_to_match"]["single_header"]["name"], h["search_string"], h["positional_constraint"])
            for h in headers] == [("mcp-method", "tools/call", "EXACTLY"), ("mcp-name", "search.docs", "EXACTLY")]
    body = [s["byte_match_statement"] for s in by_body["and_statement"]["statements"]]
    assert [(b["field_to_match"]["json_body"]["match_pattern"]["included_paths"], b["search_string"]) for b in body] == [
        (["/method"], "tools/call"), (["/params/name"], "search.docs")]
    for b in body:
        json_body = b["field_to_match"]["json_body"]
        # CONTINUE, no invalid-JSON fallback: a large call's name (near the start) is still read.
        assert json_body["oversize_handling"] == "CONTINUE" and "invalid_fallback_behavior" not in json_body
        assert json_body["match_scope"] == "VALUE"


def test_managed_groups_count_every_body_rule_instead_of_blocking():
    rendered = render_web_acl(FirewallSettings())
    groups = {r["statement"]["managed_rule_group_statement"]["name"]: r for r in rendered.rules
              if "managed_rule_group_statement" in r["statement"]}
    assert set(groups) == {"AWSManagedRulesAmazonIpReputationList", KNOWN_BAD_INPUTS, COMMON_RULE_SET}
    for r in groups.values():
        assert r["override_action"] == {"none": {}} and "action" not in r
    common = {o["name"]: o["action_to_use"] for o in
              groups[COMMON_RULE_SET]["statement"]["managed_rule_group_statement"]["rule_action_overrides"]}
    assert common["SizeRestrictions_BODY"] == {"count": {}}
    assert {n for n in common if n.endswith("_BODY")} == {
        "SizeRestrictions_BODY", "CrossSiteScripting_BODY", "GenericLFI_BODY", "GenericRFI_BODY", "EC2MetaDataSSRF_BODY"}
    bad = {o["name"]: o["action_to_use"] for o in
           groups[KNOWN_BAD_INPUTS]["statement"]["managed_rule_group_statement"]["rule_action_overrides"]}
    assert {n for n, a in bad.items() if a == {"count": {}}} == {"JavaDeserializationRCE_BODY", "Log4JRCE_BODY"}
    assert {n for n, a in common.items() if a == {"count": {}}} == {*(n for n in common if n.endswith("_BODY")),
                                                                    "NoUserAgent_HEADER"}


def test_every_blocking_managed_rule_blocks_with_a_json_rpc_403_naming_its_group():
    rendered = render_web_acl(FirewallSettings())
    bodies = {b["key"]: b for b in rendered.custom_response_bodies}
    for rule in rendered.rules:
        statement = rule["statement"].get("managed_rule_group_statement")
        if statement is None:
            continue
        overrides = {o["name"]: o["action_to_use"] for o in statement["rule_action_overrides"]}
        # Every rule the group documents as blocking is overridden: none is left to WAF's plain 403.
        assert list(overrides) == list(MANAGED_BLOCKING_RULES[statement["name"]])
        blocking = [a for a in overrides.values() if "block" in a]
        assert blocking
        for action in blocking:
            custom = action["block"]["custom_response"]
            assert custom["response_code"] == 403
            body = bodies[custom["custom_response_body_key"]]
            assert body["content_type"] == "APPLICATION_JSON"
            error = json.loads(body["content"])
            assert error["jsonrpc"] == "2.0" and error["id"] is None
            assert error["error"]["code"] == JSONRPC_BLOCKED and statement["name"] in error["error"]["message"]
            assert error["error"]["data"] == {"blockedBy": "aws-waf", "ruleGroup": statement["name"]}
    # WAF's quota: at most 100 rule action overrides in one managed rule group statement.
    assert all(len(v) <= 100 for v in MANAGED_BLOCKING_RULES.values())
    # The IP reputation group's DDoS list counts by its own action; it is not made to block.
    assert "AWSManagedIPDDoSList" not in MANAGED_BLOCKING_RULES["AWSManagedRulesAmazonIpReputationList"]


def test_managed_rules_off_leaves_only_the_rate_limits():
    assert render_web_acl(FirewallSettings(managed_rules=False)).rule_names == [
        "token-limit", "anonymous-ip-limit", "ip-limit"]


def test_the_every_request_rule_counts_by_ip_without_a_scope_down_after_the_other_rate_rules():
    rendered = render_web_acl(FirewallSettings(ip_limit=5000, tool_limits={"search": 20}))
    r = rule(rendered, "ip-limit")
    assert r["statement"]["rate_based_statement"] == {"limit": 5000, "evaluation_window_sec": 60,
                                                      "aggregate_key_type": "IP"}
    rate_rules = [n for n in rendered.rule_names if "managed" not in n and not n.startswith("aws-")]
    assert rate_rules[-1] == "ip-limit", "a client over its token's limit reads that limit's name"
    bodies = {b["key"]: json.loads(b["content"]) for b in rendered.custom_response_bodies}
    message = bodies[r["action"]["block"]["custom_response"]["custom_response_body_key"]]["error"]["message"]
    assert "per-IP limit for every request" in message and "5000" in message


@pytest.mark.parametrize(("token", "anonymous", "ip"), [(600, 120, 599), (100, 500, 499), (2000, 2000, 1999)])
def test_an_every_request_limit_below_the_token_or_anonymous_limit_is_refused_naming_all_three(token, anonymous, ip):
    names = {"ip_limit": "k:wafIpLimit", "token_limit": "k:wafTokenLimit", "anonymous_ip_limit": "k:wafAnonymousIpLimit"}
    problems = setting_problems(FirewallSettings(token_limit=token, anonymous_ip_limit=anonymous, ip_limit=ip), names)
    (problem,) = [p for p in problems if p.startswith("k:wafIpLimit")]
    assert f"k:wafIpLimit = {ip}: must be at least k:wafTokenLimit ({token}) and k:wafAnonymousIpLimit ({anonymous})" \
        in problem


@given(st.one_of(st.integers(max_value=LOW - 1), st.integers(min_value=HIGH + 1), st.booleans(), st.floats(),
                 st.text(max_size=3)))
def test_a_rate_limit_outside_wafs_range_is_refused_by_name(value):
    for f in ("token_limit", "anonymous_ip_limit", "ip_limit"):
        problems = setting_problems(replace(FirewallSettings(), **{f: value}), {f: f"waf.{f}"})
        assert len(problems) == 1 and problems[0].startswith(f"waf.{f} = ") and "from 10 to 2000000000" in problems[0]


@given(st.integers().filter(lambda v: v not in EVALUATION_WINDOWS))
def test_a_window_wafs_rate_rules_do_not_take_is_refused(window):
    (problem,) = setting_problems(FirewallSettings(window_seconds=window))
    assert problem.startswith("window_seconds = ") and "60, 120, 300, 600" in problem


@given(st.integers().filter(lambda v: v not in BODY_INSPECTION_KB))
def test_a_body_inspection_size_cloudfront_does_not_offer_is_refused(size):
    (problem,) = setting_problems(FirewallSettings(body_inspection_kb=size))
    assert problem.startswith("body_inspection_kb = ") and "16, 32, 48, 64" in problem


@given(st.text().filter(lambda t: not t or len(t) > 128 or any(not (c.isascii() and (c.isalnum() or c in "_.-"))
                                                                 for c in t)))
def test_a_tool_name_mcp_does_not_allow_is_refused(tool):
    (problem,) = setting_problems(FirewallSettings(tool_limits={tool: 20}))
    assert problem.startswith(f"tool_limits[{tool!r}]") and "tool name" in problem


def test_too_many_tool_limits_are_refused_with_the_reason():
    tools = {f"tool{i}": 20 for i in range(MAX_TOOL_LIMITS + 1)}
    (problem,) = setting_problems(FirewallSettings(tool_limits=tools))
    assert f"at most {MAX_TOOL_LIMITS}" in problem and "WCU" in problem
    # WAF's 10 rate-based rules: the per-token one and the two per-IP ones leave 7 for tools.
    assert MAX_TOOL_LIMITS == MAX_RATE_BASED_RULES - 3 == 7


@pytest.mark.parametrize("path", ["mcp", "/mcp/", "/", "//mcp", "/m cp", ""])
def test_an_mcp_path_that_is_not_absolute_without_trailing_slash_is_refused(path):
    (problem,) = setting_problems(FirewallSettings(mcp_path=path))
    assert problem.startswith("mcp_path = ")


def test_render_refuses_invalid_settings_listing_every_problem():
    with pytest.raises(FirewallSettingsError) as raised:
        render_web_acl(FirewallSettings(token_limit=0, window_seconds=30))
    assert len(raised.value.problems) == 2


@given(st.integers(1, 10), tool_names)
def test_tool_rule_names_are_waf_names(index, tool):
    name = tool_rule_name(index, tool)
    assert name.startswith(f"tool-limit-{index}-") and len(name) <= 128
    assert all(c.isalnum() or c in "_-" for c in name)
