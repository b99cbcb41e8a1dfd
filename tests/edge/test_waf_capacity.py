"""The web ACL's use of WAF's fixed quotas (rate-based rules, WCUs), measured on the rules the
renderer builds: prod's figures by WAF's documented costs, N servers' per-tool limits, and
refusals that name the keys and the figures."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.firewall_rules import (
    MAX_RATE_BASED_RULES,
    FirewallSettings,
    all_of,
    calls_tool,
    has_bearer_token,
    json_value_equals,
    path_starts_with,
    render_web_acl,
)
from edge.waf_capacity import (
    BILLED_WCUS,
    MAX_WCUS,
    ToolLimit,
    capacity_for,
    rule_wcus,
    stack_tool_limits,
    statement_wcus,
    tool_rule_wcus,
)
from stack_config.loading import load_from_stack_file

_FIREWALL = load_from_stack_file("prod").firewall
assert _FIREWALL is not None
PROD: FirewallSettings = _FIREWALL


def limits(n: int, servers: int = 1) -> list[ToolLimit]:
    return [ToolLimit(f"mcp-edge:wafToolLimits.s{i % servers}/tool{i}", f"/s{i % servers}/mcp", f"tool{i}", 30)
            for i in range(n)]


def token_key_transformations() -> int:
    """Text transformations the renderer applies to the per-token key (the waf branch adds three)."""
    token = next(r for r in render_web_acl(PROD).rules if r["name"] == "token-limit")
    (key,) = token["statement"]["rate_based_statement"]["custom_keys"]
    return sum(t["type"] != "NONE" for t in key["header"]["text_transformations"])


BASE = capacity_for(PROD, [])
# A per-tool rule by WAF's documented costs: 2 (rate-based) + 30 (the token key) + 10 per key
# transformation + 12 (path STARTS_WITH 2 + URL_DECODE 10) + 4 (two headers EXACTLY) + 8 (two JSON
# body EXACTLY, doubled).
TOOL_RULE = 2 + 30 + 10 * token_key_transformations() + 12 + 4 + 8
ROOM = MAX_RATE_BASED_RULES - len(BASE.stack_wide_rate_rules)


def test_prods_web_acl_uses_the_documented_figures():
    capacity = capacity_for(PROD, stack_tool_limits(PROD))
    assert capacity.managed_wcus == 25 + 200 + 700
    assert dict(capacity.tool_wcus) == {"mcp-edge:wafToolLimits.countdown": TOOL_RULE}
    # token-limit: 2 + 30 (+ its key's transformations) + 12 (path); anonymous-ip-limit: 2 + 12
    # (bearer STARTS_WITH + LOWERCASE) + 12 (path); any further stack-wide rule on top.
    assert capacity.stack_wide_wcus >= (2 + 30 + 10 * token_key_transformations() + 12) + (2 + 12 + 12)
    assert {"token-limit", "anonymous-ip-limit"} <= set(capacity.stack_wide_rate_rules)
    assert capacity.wcus == 925 + capacity.stack_wide_wcus + TOOL_RULE
    assert capacity.rate_based_rules == len(capacity.stack_wide_rate_rules) + 1 and capacity.fits


def test_todays_rules_make_1093_wcus_in_four_rate_based_rules():
    # The figures docs/design/many-servers.md gives: when the rules change, so must its table.
    capacity = capacity_for(PROD, stack_tool_limits(PROD))
    assert token_key_transformations() == 2 and len(BASE.stack_wide_rate_rules) == 3
    assert (capacity.wcus, capacity.stack_wide_wcus, TOOL_RULE, capacity.rate_based_rules) == (1093, 92, 76, 4)


def test_the_sum_of_the_parts_is_the_rendered_web_acls_own_measure():
    rendered = render_web_acl(PROD)
    total = capacity_for(PROD, stack_tool_limits(PROD)).wcus
    assert total == sum(rule_wcus(r) for r in rendered.rules)
    without_managed = replace(PROD, managed_rules=False)
    capacity = capacity_for(without_managed, stack_tool_limits(without_managed))
    assert capacity.managed_wcus == 0 and capacity.wcus == total - 925


@pytest.mark.parametrize("statement, wcus", [
    (path_starts_with("/mcp"), 12),
    (has_bearer_token(), 12),
    (json_value_equals("/method", "tools/call"), 4),
    (all_of(path_starts_with("/a/mcp"), calls_tool("search")), 24),
    ({"byte_match_statement": {"field_to_match": {"all_query_arguments": {}}, "positional_constraint": "CONTAINS",
                               "search_string": "x", "text_transformations": [{"priority": 0, "type": "NONE"}]}}, 20),
    ({"label_match_statement": {"scope": "LABEL", "key": "mcp-edge:tool:a"}}, 1),
    ({"rate_based_statement": {"limit": 10, "aggregate_key_type": "CUSTOM_KEYS", "custom_keys": [
        {"header": {"name": "authorization", "text_transformations": [
            {"priority": 0, "type": "LOWERCASE"}, {"priority": 1, "type": "COMPRESS_WHITE_SPACE"}]}},
        {"label_namespace": {"namespace": "mcp-edge:tool:"}}]}}, 2 + 60 + 20),
])
def test_statement_costs_follow_wafs_developer_guide(statement, wcus):
    assert statement_wcus(statement) == wcus


def test_a_statement_without_a_known_cost_is_refused_not_guessed():
    with pytest.raises(ValueError, match="no WCU figure for a regex_match_statement"):
        statement_wcus({"regex_match_statement": {}})


def test_two_servers_may_both_limit_a_tool_named_search():
    both = [ToolLimit("mcp-edge:wafToolLimits.github/search", "/github/mcp", "search", 30),
            ToolLimit("mcp-edge:wafToolLimits.docs/search", "/docs/mcp", "search", 60)]
    capacity = capacity_for(PROD, both)
    assert dict(capacity.tool_wcus) == {"mcp-edge:wafToolLimits.github/search": TOOL_RULE,
                                        "mcp-edge:wafToolLimits.docs/search": TOOL_RULE}
    assert capacity.rate_based_rules == len(BASE.stack_wide_rate_rules) + 2 and capacity.fits


def test_the_per_tool_limits_fill_what_the_stack_wide_rules_leave_of_ten():
    assert capacity_for(PROD, limits(ROOM, servers=3)).fits
    over = capacity_for(PROD, limits(ROOM + 1, servers=3))
    (problem,) = over.problems
    assert problem.startswith(f"mcp-edge:wafToolLimits: {ROOM + 1} per-tool limits (mcp-edge:wafToolLimits.s0/tool0, ")
    assert f"make {MAX_RATE_BASED_RULES + 1} rate-based rules: WAF allows {MAX_RATE_BASED_RULES} per web ACL" in problem
    assert f"at most {ROOM} per-tool limits across every server" in problem


def test_a_branch_with_one_more_stack_wide_rate_rule_leaves_one_tool_fewer():
    # The waf branch adds a per-IP rule on every request: one stack-wide rate-based rule more.
    more = len(BASE.stack_wide_rate_rules) + 1
    assert capacity_for(PROD, limits(ROOM - 1), stack_wide_rate_rules=more).fits
    (problem,) = capacity_for(PROD, limits(ROOM), stack_wide_rate_rules=more).problems
    assert f"and {more} stack-wide rate-based rules make 11" in problem and f"at most {ROOM - 1} per-tool" in problem


def test_a_web_acl_over_wafs_capacity_is_refused_naming_the_keys_and_figures():
    capacity = capacity_for(PROD, limits(80, servers=50))
    wcus = 925 + BASE.stack_wide_wcus + 80 * TOOL_RULE
    assert wcus > MAX_WCUS
    wcu_problem = next(p for p in capacity.problems if "WCUs" in p)
    assert wcu_problem.startswith(f"mcp-edge:wafToolLimits/mcp-edge:wafManagedRules: the web ACL would need {wcus} WCUs")
    assert f"managed groups 925, stack-wide rules {BASE.stack_wide_wcus}, 80 per-tool limits {80 * TOOL_RULE}" in wcu_problem
    assert f"WAF allows {MAX_WCUS} per web ACL" in wcu_problem


def test_above_the_billed_capacity_it_warns_and_does_not_refuse_for_it():
    n = next(n for n in range(1, 40) if 925 + BASE.stack_wide_wcus + n * TOOL_RULE > BILLED_WCUS)
    capacity = capacity_for(PROD, limits(n))
    (warning,) = capacity.warnings
    assert f"needs {capacity.wcus} WCUs" in warning and f"above {BILLED_WCUS}" in warning
    assert all("WCUs" not in p for p in capacity.problems)
    assert not capacity_for(PROD, limits(n - 1)).warnings


def test_a_longer_path_costs_what_a_shorter_one_does():
    settings = FirewallSettings()
    assert tool_rule_wcus(settings, ToolLimit("k", "/" + "a" * 30 + "/mcp", "t", 10)) == \
        tool_rule_wcus(settings, ToolLimit("k", "/mcp", "t", 10))


@given(st.integers(0, 60), st.integers(1, 50))
def test_the_figure_is_the_sum_of_its_parts_and_grows_with_each_limit(n, servers):
    capacity = capacity_for(PROD, limits(n, servers))
    assert capacity.wcus == capacity.managed_wcus + capacity.stack_wide_wcus + sum(capacity.tool_wcus.values())
    assert capacity.rate_based_rules == len(capacity.stack_wide_rate_rules) + n
    assert capacity.fits == (capacity.rate_based_rules <= MAX_RATE_BASED_RULES and capacity.wcus <= MAX_WCUS)
