"""The AWS WAF web ACL in front of the distribution: its settings and its rendered rules.

``render_web_acl(settings)`` returns the rules, custom response bodies, association
config and default action in the shapes ``aws.wafv2.WebAcl`` takes (pulumi-aws 7, the
snake_case ``*ArgsDict`` shapes); the component passes them on unchanged and the local
edge (``local/firewall.py``) evaluates the same structures, so the limits exist once.

What is limited (each a rate-based rule, counted over ``window_seconds`` as WAF does):

- ``tool-limit-<n>``: one per entry of ``tool_limits``, per bearer token (the
  ``authorization`` header is the aggregation key), on requests to the MCP path that call
  that tool: ``Mcp-Method: tools/call`` with ``Mcp-Name: <tool>`` (2026-07-28 clients) or
  a JSON body whose ``/method`` is ``tools/call`` and ``/params/name`` the tool
  (handshake-era clients, which send neither header). The headers alone never decide a
  limit a client could dodge: a request matches on either, so lying in a header cannot
  take a body-named call out of its tool's count. What this match cannot see, the gate
  refuses (``edge/gate/rate_counting.py``): a JSON-RPC batch holding a call of a limited
  tool (a JSON pointer names one array index, and one request counts once however many
  calls it carries), and a call whose ``/method`` or ``/params/name`` ends past the body
  inspection size (or after JSON nested deeper than ``JSON_NESTING_LIMIT``, or spelled with
  JSON escapes) without the ``Mcp-Method``/``Mcp-Name`` headers naming it as WAF compares them.
- ``token-limit``: per bearer token, every request to the MCP path (and paths below it).
- ``anonymous-ip-limit``: per client IP, every request without a bearer token and every
  request to ``/.well-known/`` (the OAuth metadata), whatever it carries.
- ``ip-limit``: per client IP, every request, at a higher threshold (``ip_limit``, at least
  the per-token and anonymous limits): a request with a well-shaped but forged token is in
  no real token's count and costs a Lambda@Edge invocation, and each forged token is a
  fresh per-token key; this rule bounds what one address can send however it spells its
  tokens. It counts the requests the rules before it let through.

The per-token key is the ``authorization`` header with the key's own text transformations
(COMPRESS_WHITE_SPACE, then LOWERCASE): ``Bearer <t>``, ``bearer  <t>``, ``BEARER\\t<t>``
are one key, so respelling the scheme or its whitespace does not open a fresh count. WAF
takes text transformations on a custom header key and applies them lowest priority first
(botocore's wafv2 model and the AWS WAF API reference, ``RateLimitHeader.TextTransformations``:
"used in rate-based rule statements, to transform request components before using them as
custom aggregation keys"). Whitespace around the value needs no TRIM: HTTP hands no field
value on with it (RFC 9110 5.5; HTTP/2 refuses it outright, RFC 9113 8.2.1). LOWERCASE also
folds the token's own case: tokens that differ only in case share one count, which costs a
real client nothing (a respelled copy of its own token is the only such token anyone
holds). The viewer function refuses every spelling but ``Bearer <token>`` besides (401).

WAF counts a request only when it has every aggregation key: a request without an
``authorization`` header is never in a per-token count (the per-IP rules have it).
A request over a limit gets ``429`` with ``Retry-After: <window>`` and a JSON-RPC error
body (``application/json``); WAF cannot echo the request's ``id``, so it is ``null``.

Body inspection: CloudFront forwards at most the first 16 KB of a body to WAF unless the
web ACL's association config raises it (32/48/64 KB, billed per request over 16 KB).
The body match uses ``oversize_handling = CONTINUE`` and no invalid-JSON fallback, so WAF
parses the part it got up to the first parsing failure (truncation is one): ``/method``
and ``/params/name`` come first in every SDK's tools/call, so a 100 KB call is still
matched by name. ``MATCH`` would count every large body against every tool's limit,
``NO_MATCH`` would let any call dodge its tool's limit by padding its arguments.

Managed rule groups (``managed_rules``), each commented with why it is safe for
JSON-RPC bodies where it is rendered. Every managed rule that inspects the body counts
instead of blocking: a JSON-RPC body is a tool's arguments, arbitrary user content (code,
HTML, file paths, URLs, payloads over 8 KB), so a body signature there blocks a tool call,
not an attack. Rules on the path, query string, headers and cookies keep blocking: MCP
puts nothing user-controlled there. They block with an MCP-shaped answer too: each rule a
group documents as blocking is overridden (``rule_action_overrides``) to block with a
custom response, ``403`` and a JSON-RPC error body naming the group, instead of WAF's plain
``403 Forbidden`` page. A rule AWS adds to a group later blocks with WAF's plain 403 until
it is listed in ``MANAGED_BLOCKING_RULES``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from edge.gate import rate_counting

EVALUATION_WINDOWS = (60, 120, 300, 600)
"""The evaluation windows WAF's rate-based rules accept, in seconds."""
RATE_LIMIT_RANGE = (10, 2_000_000_000)
"""WAF's bounds on a rate-based rule's limit (requests per evaluation window)."""
BODY_INSPECTION_KB = (16, 32, 48, 64)
"""How much of a body CloudFront may forward to WAF; 16 KB is the default and the base price."""
MAX_RATE_BASED_RULES = 10
"""WAF's fixed quota of rate-based rules per web ACL."""
MAX_TOOL_LIMITS = MAX_RATE_BASED_RULES - 3
"""At most this many per-tool rules: with the per-token rule and the two per-IP rules
(anonymous, every request) they fill WAF's rate-based rules per web ACL, and with the
managed groups (about 925 WCUs) the web ACL stays under 1,500 WCUs, above which WAF bills
every request extra."""
JSON_NESTING_LIMIT = rate_counting.JSON_NESTING_LIMIT
"""Depth past which the local emulation stops parsing a JSON body (see ``rate_counting``)."""
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""An MCP tool name (the spec's characters and length)."""
MCP_PATH = re.compile(r"/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]")

AUTHORIZATION = "authorization"
MCP_METHOD_HEADER = "mcp-method"
MCP_NAME_HEADER = "mcp-name"
WELL_KNOWN_PREFIX = "/.well-known/"
RATE_LIMITED_STATUS = 429
JSONRPC_RATE_LIMITED = -32029
"""JSON-RPC error code in a rate-limited answer (implementation-defined server range)."""
MANAGED_BLOCKED_STATUS = 403
JSONRPC_BLOCKED = -32030
"""JSON-RPC error code in the answer to a request a managed rule blocked."""

IP_REPUTATION = "AWSManagedRulesAmazonIpReputationList"
KNOWN_BAD_INPUTS = "AWSManagedRulesKnownBadInputsRuleSet"
COMMON_RULE_SET = "AWSManagedRulesCommonRuleSet"

# Body rules of the managed groups, overridden to count (see the module docstring).
COMMON_RULE_SET_COUNTED = (
    "SizeRestrictions_BODY",  # blocks bodies over 8 KB: real tool calls are larger
    "CrossSiteScripting_BODY",  # tool arguments carry HTML and scripts (files, templates)
    "GenericLFI_BODY",  # tool arguments carry relative paths (../)
    "GenericRFI_BODY",  # tool arguments carry URLs
    "EC2MetaDataSSRF_BODY",  # tool arguments carry URLs, link-local ones included; Lambda has no IMDS
    "NoUserAgent_HEADER",  # MCP does not require a User-Agent, and SDK clients differ
)
KNOWN_BAD_INPUTS_COUNTED = (
    "JavaDeserializationRCE_BODY",  # base64 payloads in tool arguments; the origins are not Java
    "Log4JRCE_BODY",  # text about Log4Shell in tool arguments; the origins do not run Log4j
)
# The rules each group documents with the action Block (AWS WAF developer guide, "Baseline
# rule groups" and "IP reputation rule groups"): each is overridden to block with the
# MCP-shaped answer, or to count where it inspects the body (the *_COUNTED above).
# AWSManagedIPDDoSList is left out: its own action is Count.
MANAGED_BLOCKING_RULES: dict[str, tuple[str, ...]] = {
    IP_REPUTATION: ("AWSManagedIPReputationList", "AWSManagedReconnaissanceList"),
    KNOWN_BAD_INPUTS: (
        "JavaDeserializationRCE_HEADER", "JavaDeserializationRCE_BODY", "JavaDeserializationRCE_URIPATH",
        "JavaDeserializationRCE_QUERYSTRING", "Host_localhost_HEADER", "PROPFIND_METHOD", "ExploitablePaths_URIPATH",
        "Log4JRCE_HEADER", "Log4JRCE_QUERYSTRING", "Log4JRCE_BODY", "Log4JRCE_URIPATH",
    ),
    COMMON_RULE_SET: (
        "NoUserAgent_HEADER", "UserAgent_BadBots_HEADER", "SizeRestrictions_QUERYSTRING",
        "SizeRestrictions_Cookie_HEADER", "SizeRestrictions_BODY", "SizeRestrictions_URIPATH", "EC2MetaDataSSRF_BODY",
        "EC2MetaDataSSRF_COOKIE", "EC2MetaDataSSRF_URIPATH", "EC2MetaDataSSRF_QUERYARGUMENTS",
        "GenericLFI_QUERYARGUMENTS", "GenericLFI_URIPATH", "GenericLFI_BODY", "RestrictedExtensions_URIPATH",
        "RestrictedExtensions_QUERYARGUMENTS", "GenericRFI_QUERYARGUMENTS", "GenericRFI_BODY", "GenericRFI_URIPATH",
        "CrossSiteScripting_COOKIE", "CrossSiteScripting_QUERYARGUMENTS", "CrossSiteScripting_BODY",
        "CrossSiteScripting_URIPATH",
    ),
}


class FirewallSettingsError(ValueError):
    """Settings the web ACL cannot be built from; names every bad field and what is allowed."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid firewall settings:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class FirewallSettings:
    """What the stack's web ACL limits, and how."""

    mcp_path: str = "/mcp"
    """The MCP endpoint's path; the per-token and per-tool limits apply to it and paths below it."""
    token_limit: int = 600
    """Requests per bearer token per window on the MCP path (10/s sustained at the default window)."""
    anonymous_ip_limit: int = 120
    """Requests per client IP per window without a bearer token, or to the OAuth metadata paths."""
    ip_limit: int = 3000
    """Requests per client IP per window, every request (forged tokens included): at least
    ``token_limit`` and ``anonymous_ip_limit``, so it never cuts a single client short first."""
    tool_limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Tool name -> tools/call requests per bearer token per window."""
    window_seconds: int = 60
    """The rate-based rules' evaluation window (and the ``Retry-After`` a limited client gets)."""
    managed_rules: bool = True
    """The AWS managed groups (IP reputation, known bad inputs, common rule set) on or off."""
    body_inspection_kb: int = 16
    """How much of a body CloudFront forwards to WAF (the per-tool match reads the body)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def setting_problems(settings: FirewallSettings, names: Mapping[str, str] | None = None) -> list[str]:
    """Every problem with ``settings``, each naming the field (as ``names`` maps it, e.g. to a
    stack config key) with its value and what is allowed."""
    names = names or {}

    def name(f: str) -> str:
        return names.get(f, f)

    problems: list[str] = []
    low, high = RATE_LIMIT_RANGE
    if not isinstance(settings.mcp_path, str) or not MCP_PATH.fullmatch(settings.mcp_path) or "//" in settings.mcp_path:
        problems.append(f"{name('mcp_path')} = {settings.mcp_path!r}: must be an absolute path like /mcp, "
                        "no trailing slash")
    for f in ("token_limit", "anonymous_ip_limit", "ip_limit"):
        value = getattr(settings, f)
        if not _is_int(value) or not low <= value <= high:
            problems.append(f"{name(f)} = {value!r}: must be an integer from {low} to {high} "
                            "(requests per evaluation window)")
    if all(_is_int(v) and low <= v <= high for v in (settings.token_limit, settings.anonymous_ip_limit,
                                                     settings.ip_limit)) and \
            settings.ip_limit < max(settings.token_limit, settings.anonymous_ip_limit):
        problems.append(f"{name('ip_limit')} = {settings.ip_limit}: must be at least {name('token_limit')} "
                        f"({settings.token_limit}) and {name('anonymous_ip_limit')} ({settings.anonymous_ip_limit}): "
                        "it counts every request of an address, so below them it would cut one client short first")
    if not _is_int(settings.window_seconds) or settings.window_seconds not in EVALUATION_WINDOWS:
        problems.append(f"{name('window_seconds')} = {settings.window_seconds!r}: must be one of "
                        f"{', '.join(map(str, EVALUATION_WINDOWS))} (seconds; WAF's evaluation windows)")
    if not isinstance(settings.managed_rules, bool):
        problems.append(f"{name('managed_rules')} = {settings.managed_rules!r}: must be true or false")
    if not _is_int(settings.body_inspection_kb) or settings.body_inspection_kb not in BODY_INSPECTION_KB:
        problems.append(f"{name('body_inspection_kb')} = {settings.body_inspection_kb!r}: must be one of "
                        f"{', '.join(map(str, BODY_INSPECTION_KB))} (KB of body CloudFront forwards to WAF)")
    tools = settings.tool_limits
    if not isinstance(tools, Mapping):
        problems.append(f"{name('tool_limits')} = {tools!r}: must map tool names to limits")
        return problems
    if len(tools) > MAX_TOOL_LIMITS:
        problems.append(f"{name('tool_limits')} has {len(tools)} tools: at most {MAX_TOOL_LIMITS} (each is a rate-based "
                        f"rule, and WAF allows {MAX_RATE_BASED_RULES} per web ACL with the per-token and two per-IP ones; "
                        "more would also take the web ACL over 1,500 WCUs, which WAF bills per request)")
    for tool, limit in tools.items():
        if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool):
            problems.append(f"{name('tool_limits')}[{tool!r}]: a tool name must be 1-128 letters, digits, "
                            "'_', '-' or '.'")
        if not _is_int(limit) or not low <= limit <= high:
            problems.append(f"{name('tool_limits')}[{tool!r}] = {limit!r}: must be an integer from {low} to {high} "
                            "(tools/call requests per token per evaluation window)")
    return problems


def check_settings(settings: FirewallSettings, names: Mapping[str, str] | None = None) -> FirewallSettings:
    """``settings`` if valid, else a ``FirewallSettingsError`` listing every problem."""
    problems = setting_problems(settings, names)
    if problems:
        raise FirewallSettingsError(problems)
    return settings


# --- statements ---------------------------------------------------------------------------------

def _none() -> list[dict[str, Any]]:
    return [{"priority": 0, "type": "NONE"}]


def header_equals(header: str, value: str) -> dict[str, Any]:
    """A header's value is exactly ``value`` (case-sensitive: tool names and methods are)."""
    return {"byte_match_statement": {
        "field_to_match": {"single_header": {"name": header}},
        "positional_constraint": "EXACTLY",
        "search_string": value,
        "text_transformations": _none(),
    }}


def json_value_equals(pointer: str, value: str, *, oversize_handling: str = "CONTINUE") -> dict[str, Any]:
    """The JSON body's value at ``pointer`` is exactly ``value``. No ``invalid_fallback_behavior``:
    WAF then evaluates what it parsed up to the first failure (a truncated body included)."""
    return {"byte_match_statement": {
        "field_to_match": {"json_body": {
            "match_scope": "VALUE",
            "match_pattern": {"included_paths": [pointer]},
            "oversize_handling": oversize_handling,
        }},
        "positional_constraint": "EXACTLY",
        "search_string": value,
        "text_transformations": _none(),
    }}


def path_starts_with(prefix: str) -> dict[str, Any]:
    """The URL-decoded path starts with ``prefix`` (decoded: ``/%6dcp`` reaches the origin as ``/mcp``)."""
    return {"byte_match_statement": {
        "field_to_match": {"uri_path": {}},
        "positional_constraint": "STARTS_WITH",
        "search_string": prefix,
        "text_transformations": [{"priority": 0, "type": "URL_DECODE"}],
    }}


def has_bearer_token() -> dict[str, Any]:
    """``Authorization`` carries a bearer token (the scheme is case-insensitive)."""
    return {"byte_match_statement": {
        "field_to_match": {"single_header": {"name": AUTHORIZATION}},
        "positional_constraint": "STARTS_WITH",
        "search_string": "bearer ",
        "text_transformations": [{"priority": 0, "type": "LOWERCASE"}],
    }}


def all_of(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"and_statement": {"statements": list(statements)}}


def any_of(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"or_statement": {"statements": list(statements)}}


def negation(statement: dict[str, Any]) -> dict[str, Any]:
    return {"not_statement": {"statement": statement}}


def calls_tool(tool: str) -> dict[str, Any]:
    """A tools/call of ``tool``, named in the 2026-07-28 headers or in the JSON-RPC body."""
    return any_of(
        all_of(header_equals(MCP_METHOD_HEADER, "tools/call"), header_equals(MCP_NAME_HEADER, tool)),
        all_of(json_value_equals("/method", "tools/call"), json_value_equals("/params/name", tool)),
    )


TOKEN_KEY_TRANSFORMATIONS = ("COMPRESS_WHITE_SPACE", "LOWERCASE")
"""The per-token key's text transformations, in the order WAF applies them (lowest priority
first): whitespace runs (tabs included) to one space, then one case."""


def _per_token_keys() -> list[dict[str, Any]]:
    return [{"header": {"name": AUTHORIZATION, "text_transformations": [
        {"priority": i, "type": t} for i, t in enumerate(TOKEN_KEY_TRANSFORMATIONS)]}}]


# --- rules --------------------------------------------------------------------------------------

def _visibility(metric: str) -> dict[str, Any]:
    return {"cloudwatch_metrics_enabled": True, "metric_name": metric, "sampled_requests_enabled": True}


def _rate_rule(name: str, priority: int, *, limit: int, window: int, statement_keys: dict[str, Any],
               scope_down: dict[str, Any] | None, body_key: str) -> dict[str, Any]:
    return {
        "name": name,
        "priority": priority,
        "action": {"block": {"custom_response": {
            "response_code": RATE_LIMITED_STATUS,
            "custom_response_body_key": body_key,
            "response_headers": [{"name": "Retry-After", "value": str(window)}],
        }}},
        "statement": {"rate_based_statement": {
            "limit": limit,
            "evaluation_window_sec": window,
            **statement_keys,
            **({"scope_down_statement": scope_down} if scope_down is not None else {}),
        }},
        "visibility_config": _visibility(name),
    }


def _managed_rule(name: str, priority: int, group: str, counted: tuple[str, ...], body_key: str) -> dict[str, Any]:
    """The group with each of its blocking rules overridden: to count (``counted``), or to block
    with the custom response ``body_key`` (WAF's own block of a managed rule is a plain 403)."""
    blocked = {"block": {"custom_response": {"response_code": MANAGED_BLOCKED_STATUS,
                                             "custom_response_body_key": body_key}}}
    statement: dict[str, Any] = {"vendor_name": "AWS", "name": group, "rule_action_overrides": [
        {"name": r, "action_to_use": {"count": {}} if r in counted else blocked}
        for r in MANAGED_BLOCKING_RULES[group]]}
    return {
        "name": name,
        "priority": priority,
        "override_action": {"none": {}},
        "statement": {"managed_rule_group_statement": statement},
        "visibility_config": _visibility(name),
    }


def tool_rule_name(index: int, tool: str) -> str:
    """``tool-limit-<n>-<tool>`` within WAF's name rules (``[A-Za-z0-9_-]``, 128 characters)."""
    return f"tool-limit-{index}-{re.sub(r'[^A-Za-z0-9_-]', '-', tool)}"[:128]


def rate_limited_body(limit_name: str, limit: int, window: int) -> str:
    """The JSON-RPC error a rate-limited client reads."""
    return json.dumps({
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": JSONRPC_RATE_LIMITED,
            "message": f"Rate limit exceeded: {limit_name} allows {limit} requests per {window} s; "
                       f"retry after {window} s",
            "data": {"limit": limit, "windowSeconds": window, "retryAfterSeconds": window},
        },
    }, separators=(",", ":"))


def managed_blocked_body(group: str) -> str:
    """The JSON-RPC error a client reads when a rule of the managed ``group`` blocked its request."""
    return json.dumps({
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": JSONRPC_BLOCKED,
            "message": f"Request blocked by the edge's firewall (AWS WAF managed rule group {group}); it did not "
                       "reach the MCP server. Retrying the same request will be blocked again.",
            "data": {"blockedBy": "aws-waf", "ruleGroup": group},
        },
    }, separators=(",", ":"))


@dataclass(frozen=True)
class RenderedWebAcl:
    """What ``aws.wafv2.WebAcl`` takes besides its name, scope and region."""

    rules: list[dict[str, Any]]
    custom_response_bodies: list[dict[str, Any]]
    association_config: dict[str, Any]
    default_action: dict[str, Any]

    @property
    def rule_names(self) -> list[str]:
        return [r["name"] for r in self.rules]

    @property
    def metric_names(self) -> list[str]:
        return [r["visibility_config"]["metric_name"] for r in self.rules]


def render_web_acl(settings: FirewallSettings) -> RenderedWebAcl:
    """The web ACL's rules (in priority order) for valid ``settings``."""
    check_settings(settings)
    window, path = settings.window_seconds, settings.mcp_path
    rules: list[dict[str, Any]] = []
    bodies: list[dict[str, Any]] = []

    def body(key: str, limit_name: str, limit: int) -> str:
        bodies.append({"key": key, "content": rate_limited_body(limit_name, limit, window),
                       "content_type": "APPLICATION_JSON"})
        return key

    def blocked_body(key: str, group: str) -> str:
        bodies.append({"key": key, "content": managed_blocked_body(group), "content_type": "APPLICATION_JSON"})
        return key

    if settings.managed_rules:
        # Matches on the client's IP address only (AWS threat intelligence), never on the
        # request, so no JSON-RPC body can trip it; first, so listed IPs cost no further rules.
        rules.append(_managed_rule("aws-ip-reputation", len(rules), IP_REPUTATION, (),
                                   blocked_body("blocked-ip-reputation", IP_REPUTATION)))
    for index, (tool, limit) in enumerate(sorted(settings.tool_limits.items()), start=1):
        # Before the per-token rule so a limited tool is reported by its own rule.
        name = tool_rule_name(index, tool)
        rules.append(_rate_rule(
            name, len(rules), limit=limit, window=window,
            statement_keys={"aggregate_key_type": "CUSTOM_KEYS", "custom_keys": _per_token_keys()},
            scope_down=all_of(path_starts_with(path), calls_tool(tool)),
            body_key=body(f"rate-limited-tool-{index}", f"the tool {tool!r}'s limit", limit),
        ))
    rules.append(_rate_rule(
        "token-limit", len(rules), limit=settings.token_limit, window=window,
        statement_keys={"aggregate_key_type": "CUSTOM_KEYS", "custom_keys": _per_token_keys()},
        scope_down=path_starts_with(path),
        body_key=body("rate-limited-token", "the per-token limit", settings.token_limit),
    ))
    rules.append(_rate_rule(
        "anonymous-ip-limit", len(rules), limit=settings.anonymous_ip_limit, window=window,
        statement_keys={"aggregate_key_type": "IP"},
        scope_down=any_of(negation(has_bearer_token()), path_starts_with(WELL_KNOWN_PREFIX)),
        body_key=body("rate-limited-ip", "the per-IP limit for requests without a token", settings.anonymous_ip_limit),
    ))
    # Last of the rate rules: a client over its token's limit reads that limit's name; what
    # reaches this rule is every request the others let through, forged tokens included.
    rules.append(_rate_rule(
        "ip-limit", len(rules), limit=settings.ip_limit, window=window,
        statement_keys={"aggregate_key_type": "IP"}, scope_down=None,
        body_key=body("rate-limited-any-ip", "the per-IP limit for every request", settings.ip_limit),
    ))
    if settings.managed_rules:
        # Its header, path and query rules (Log4j and Java deserialization signatures, localhost
        # Host, PROPFIND, exploitable paths) see nothing a JSON-RPC client puts there; its two
        # body rules count instead of blocking (KNOWN_BAD_INPUTS_COUNTED).
        rules.append(_managed_rule("aws-known-bad-inputs", len(rules), KNOWN_BAD_INPUTS, KNOWN_BAD_INPUTS_COUNTED,
                                   blocked_body("blocked-known-bad-inputs", KNOWN_BAD_INPUTS)))
        # Its body rules, including SizeRestrictions_BODY (8 KB), count instead of blocking,
        # and so does NoUserAgent_HEADER (COMMON_RULE_SET_COUNTED); what still blocks inspects
        # the path, query string, cookies and other headers, where MCP carries no user content.
        rules.append(_managed_rule("aws-common-rule-set", len(rules), COMMON_RULE_SET, COMMON_RULE_SET_COUNTED,
                                   blocked_body("blocked-common-rule-set", COMMON_RULE_SET)))
    return RenderedWebAcl(
        rules=rules,
        custom_response_bodies=bodies,
        association_config={"request_bodies": [{"cloudfront": {
            "default_size_inspection_limit": f"KB_{settings.body_inspection_kb}"}}]},
        default_action={"allow": {}},
    )
