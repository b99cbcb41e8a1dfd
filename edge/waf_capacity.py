"""What a stack's web ACL uses of WAF's fixed quotas, computed before any resource exists.

A web ACL may hold at most ``MAX_RATE_BASED_RULES`` rate-based rules and ``MAX_WCUS`` web ACL
capacity units (above ``BILLED_WCUS`` WAF bills every request more). With many servers
(`mcp-edge:servers`) each server's per-tool limits are rules of their own, so a stack can outgrow
both: ``capacity_for(settings, tool_limits)`` measures the rules ``edge.firewall_rules``
renders (the stack-wide ones as rendered; each per-tool limit as the renderer builds a tool
rule for that server's path) and says which keys take it over, with the figures.

WCUs follow AWS WAF's developer guide (rule statement pages):

- string match: 2 for EXACTLY, STARTS_WITH and ENDS_WITH, 10 for CONTAINS and CONTAINS_WORD;
  doubled on the JSON body; +10 on all query arguments; +10 per text transformation
  (NONE is none);
- AND, OR and NOT: the sum of their statements;
- rate-based: 2, +30 per custom aggregation key (+10 per text transformation on a key, as on
  a statement), plus its scope-down statement;
- a label match: 1;
- the managed rule groups: their published capacities (``MANAGED_GROUP_WCUS``).

``review.preflight`` asks WAF's own ``CheckCapacity`` for the rendered rules with credentials;
this is the offline figure the stack checks can refuse on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from edge.firewall_rules import (
    COMMON_RULE_SET,
    IP_REPUTATION,
    KNOWN_BAD_INPUTS,
    MAX_RATE_BASED_RULES,
    FirewallSettings,
    render_web_acl,
)

MAX_WCUS = 5000
"""WAF's capacity per web ACL, fixed (https://docs.aws.amazon.com/waf/latest/developerguide/limits.html)."""
BILLED_WCUS = 1500
"""Above this many WCUs WAF bills each request more (per 500 WCUs beyond)."""
# The managed groups' capacities as AWS publishes them (AWS Managed Rules rule groups list).
MANAGED_GROUP_WCUS = {IP_REPUTATION: 25, KNOWN_BAD_INPUTS: 200, COMMON_RULE_SET: 700}
STRING_MATCH_WCUS = {"EXACTLY": 2, "STARTS_WITH": 2, "ENDS_WITH": 2, "CONTAINS": 10, "CONTAINS_WORD": 10}
TRANSFORMATION_WCUS = 10
ALL_QUERY_ARGUMENTS_WCUS = 10
RATE_BASED_WCUS = 2
CUSTOM_KEY_WCUS = 30
LABEL_MATCH_WCUS = 1
TOOL_RULE_PREFIX = "tool-limit-"


def _transformations(items: Iterable[Mapping[str, Any]]) -> int:
    return sum(TRANSFORMATION_WCUS for t in items if t.get("type") != "NONE")


def statement_wcus(statement: Mapping[str, Any]) -> int:
    """One rule statement's WCUs (see the module docstring)."""
    ((kind, body),) = statement.items()
    if kind in ("and_statement", "or_statement"):
        return sum(statement_wcus(s) for s in body["statements"])
    if kind == "not_statement":
        return statement_wcus(body["statement"])
    if kind == "byte_match_statement":
        base = STRING_MATCH_WCUS[body["positional_constraint"]]
        field = body["field_to_match"]
        if "json_body" in field:
            base *= 2
        if "all_query_arguments" in field:
            base += ALL_QUERY_ARGUMENTS_WCUS
        return base + _transformations(body.get("text_transformations", ()))
    if kind == "label_match_statement":
        return LABEL_MATCH_WCUS
    if kind == "rate_based_statement":
        keys = body.get("custom_keys") or ()
        key_transformations = sum(_transformations(next(iter(k.values())).get("text_transformations", ()))
                                  for k in keys)
        scope_down = body.get("scope_down_statement")
        return (RATE_BASED_WCUS + CUSTOM_KEY_WCUS * len(keys) + key_transformations
                + (statement_wcus(scope_down) if scope_down else 0))
    if kind == "managed_rule_group_statement":
        return MANAGED_GROUP_WCUS[body["name"]]
    raise ValueError(f"no WCU figure for a {kind}: add it to edge/waf_capacity.py from WAF's developer guide")


def rule_wcus(rule: Mapping[str, Any]) -> int:
    return statement_wcus(rule["statement"])


def is_rate_based(rule: Mapping[str, Any]) -> bool:
    return "rate_based_statement" in rule["statement"]


@dataclass(frozen=True)
class ToolLimit:
    """One per-tool limit: the key that sets it, the server's public MCP path, the tool, the limit."""

    key: str
    path: str
    tool: str
    limit: int


@dataclass(frozen=True)
class Capacity:
    """What a web ACL uses of WAF's quotas, and each part's share."""

    wcus: int
    rate_based_rules: int
    stack_wide_wcus: int
    stack_wide_rate_rules: tuple[str, ...]
    managed_wcus: int
    tool_wcus: Mapping[str, int]
    """Each per-tool limit's key -> its rule's WCUs."""
    problems: tuple[str, ...]
    """What WAF would refuse, naming the keys and the figures: refuse the stack."""
    warnings: tuple[str, ...]
    """What WAF allows but bills more for."""

    @property
    def fits(self) -> bool:
        return not self.problems


def tool_rule_wcus(settings: FirewallSettings, limit: ToolLimit) -> int:
    """The WCUs of the rule ``render_web_acl`` builds for one tool on one server's path."""
    rendered = render_web_acl(replace(settings, mcp_path=limit.path, tool_limits={limit.tool: limit.limit}))
    (rule,) = [r for r in rendered.rules if r["name"].startswith(TOOL_RULE_PREFIX)]
    return rule_wcus(rule)


def capacity_for(settings: FirewallSettings, tool_limits: Sequence[ToolLimit], *,
                 stack_wide_rate_rules: int | None = None, keys: Mapping[str, str] | None = None) -> Capacity:
    """The web ACL of ``settings``' stack-wide rules plus one rate-based rule per entry of
    ``tool_limits`` (``settings.tool_limits`` is not read: pass them here, keyed). A branch that
    adds stack-wide rate-based rules the renderer does not yet show says how many there are in
    ``stack_wide_rate_rules`` (default: those rendered). ``keys`` names the stack keys behind the
    settings (``wafManagedRules``, ``wafToolLimits``) in the problems."""
    keys = {"managed_rules": "mcp-edge:wafManagedRules", "tool_limits": "mcp-edge:wafToolLimits", **(keys or {})}
    stack_wide = render_web_acl(replace(settings, tool_limits={}))
    managed = sum(rule_wcus(r) for r in stack_wide.rules if "managed_rule_group_statement" in r["statement"])
    own = [r for r in stack_wide.rules if "managed_rule_group_statement" not in r["statement"]]
    rate_names = tuple(r["name"] for r in own if is_rate_based(r))
    stack_rate = len(rate_names) if stack_wide_rate_rules is None else stack_wide_rate_rules
    stack_wcus = sum(rule_wcus(r) for r in own)
    per_tool = {limit.key: tool_rule_wcus(settings, limit) for limit in tool_limits}
    wcus = managed + stack_wcus + sum(per_tool.values())
    rate_rules = stack_rate + len(tool_limits)
    problems: list[str] = []
    warnings: list[str] = []
    room = MAX_RATE_BASED_RULES - stack_rate
    if rate_rules > MAX_RATE_BASED_RULES:
        problems.append(
            f"{keys['tool_limits']}: {len(tool_limits)} per-tool limits ({', '.join(t.key for t in tool_limits)}) and "
            f"{stack_rate} stack-wide rate-based rules make {rate_rules} rate-based rules: WAF allows "
            f"{MAX_RATE_BASED_RULES} per web ACL, so at most {max(room, 0)} per-tool limits across every server")
    if wcus > MAX_WCUS:
        heaviest = sorted(per_tool.items(), key=lambda kv: -kv[1])[:3]
        problems.append(
            f"{keys['tool_limits']}/{keys['managed_rules']}: the web ACL would need {wcus} WCUs (managed groups "
            f"{managed}, stack-wide rules {stack_wcus}, {len(per_tool)} per-tool limits "
            f"{sum(per_tool.values())}, the heaviest {', '.join(f'{k} {n}' for k, n in heaviest) or 'none'}): WAF "
            f"allows {MAX_WCUS} per web ACL; remove per-tool limits or turn {keys['managed_rules']} off")
    elif wcus > BILLED_WCUS:
        warnings.append(f"the web ACL needs {wcus} WCUs (managed groups {managed}, stack-wide rules {stack_wcus}, "
                        f"per-tool limits {sum(per_tool.values())}): above {BILLED_WCUS} WAF bills every request more")
    return Capacity(wcus=wcus, rate_based_rules=rate_rules, stack_wide_wcus=stack_wcus,
                    stack_wide_rate_rules=rate_names, managed_wcus=managed, tool_wcus=per_tool,
                    problems=tuple(problems), warnings=tuple(warnings))


def stack_tool_limits(settings: FirewallSettings, key: str = "mcp-edge:wafToolLimits") -> list[ToolLimit]:
    """The one-server stack's per-tool limits (``wafToolLimits`` on ``mcpPath``) as ``capacity_for`` takes them."""
    return [ToolLimit(f"{key}.{tool}", settings.mcp_path, tool, limit)
            for tool, limit in sorted(settings.tool_limits.items())]
