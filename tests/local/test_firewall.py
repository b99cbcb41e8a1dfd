"""The local emulation of the stack's web ACL: the rendered rules' keys, windows and
scope-downs, WAF's JSON body semantics (oversize handling, parsing up to the first
failure), the 429 a limited client reads, and managed rules that let large tool calls by."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkit.shipped import make_token
from edge.firewall_rules import (
    COMMON_RULE_SET_COUNTED,
    JSON_NESTING_LIMIT,
    KNOWN_BAD_INPUTS_COUNTED,
    FirewallSettings,
    json_value_equals,
    render_web_acl,
)
from local.firewall import (
    MANAGED_RULES,
    FirewallRequest,
    RateCounter,
    UnsupportedStatementError,
    WebAclEmulator,
    json_prefix,
    snake_keys,
)
from stack_config.loading import load_from_stack_file

TOKEN_A = "Bearer aaa.bbb.ccc"
TOKEN_B = "Bearer ddd.eee.fff"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def emulator(settings: FirewallSettings, clock: Clock | None = None) -> WebAclEmulator:
    rendered = render_web_acl(settings)
    return WebAclEmulator(rendered.rules, rendered.custom_response_bodies, rendered.association_config,
                          rendered.default_action, clock=clock or Clock())


def call(tool: str, *, token: str | None = TOKEN_A, era: str = "handshake", pad: int = 0, ip: str = "198.51.100.7",
         method: str = "tools/call") -> FirewallRequest:
    headers = {"content-type": "application/json", "user-agent": "mcp-test"}
    if token:
        headers["authorization"] = token
    if era == "2026":
        headers.update({"mcp-method": method, "mcp-name": tool, "mcp-protocol-version": "2026-07-28"})
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                       "params": {"name": tool, "arguments": {"text": "x" * pad}}}).encode()
    return FirewallRequest("POST", "/mcp", headers, body, client_ip=ip)


def test_a_client_over_its_per_token_limit_gets_429_retry_after_and_a_json_rpc_error_until_the_window_slides():
    clock = Clock()
    acl = emulator(FirewallSettings(token_limit=10, managed_rules=False), clock)
    assert all(acl.evaluate(call("echo")).allowed for _ in range(10))
    limited = acl.evaluate(call("echo"))
    assert not limited.allowed and limited.rule == "token-limit" and limited.status == 429
    headers = dict(limited.headers)
    assert headers["Retry-After"] == "60" and headers["content-type"] == "application/json"
    error = json.loads(limited.body)
    assert error["jsonrpc"] == "2.0" and error["id"] is None and error["error"]["code"] == -32029
    assert acl.evaluate(call("echo", token=TOKEN_B)).allowed, "a second client is unaffected"
    clock.now += 30
    assert not acl.evaluate(call("echo")).allowed, "blocked requests keep counting, as in WAF"
    clock.now += 60.5
    assert acl.evaluate(call("echo")).allowed


@pytest.mark.parametrize("era", ["2026", "handshake"])
def test_a_tool_with_its_own_limit_is_limited_by_name_while_other_tools_and_clients_are_not(era):
    acl = emulator(FirewallSettings(tool_limits={"search": 10}, managed_rules=False))
    for _ in range(10):
        assert acl.evaluate(call("search", era=era)).allowed
    limited = acl.evaluate(call("search", era=era))
    assert (limited.allowed, limited.rule, limited.status) == (False, "tool-limit-1-search", 429)
    assert "the tool 'search'" in json.loads(limited.body)["error"]["message"]
    assert acl.evaluate(call("echo", era=era)).allowed
    assert acl.evaluate(call("search", era=era, token=TOKEN_B)).allowed


def test_both_eras_share_one_count_per_token_and_tool():
    acl = emulator(FirewallSettings(tool_limits={"search": 10}, managed_rules=False))
    for i in range(10):
        assert acl.evaluate(call("search", era="2026" if i % 2 else "handshake")).allowed
    assert not acl.evaluate(call("search", era="2026")).allowed


def test_a_prompt_named_like_a_limited_tool_is_not_in_the_tools_count():
    acl = emulator(FirewallSettings(tool_limits={"search": 10}, managed_rules=False))
    for era in ("2026", "handshake"):
        for _ in range(15):
            assert acl.evaluate(call("search", era=era, method="prompts/get")).allowed


def test_a_large_tool_call_is_still_counted_by_its_name_in_the_first_16_kb():
    acl = emulator(FirewallSettings(tool_limits={"search": 10}, managed_rules=False))
    for _ in range(10):
        assert acl.evaluate(call("search", pad=100_000)).allowed
    assert acl.evaluate(call("search", pad=100_000)).rule == "tool-limit-1-search"


def test_a_name_beyond_the_inspected_body_is_not_seen_as_waf_would_not():
    acl = emulator(FirewallSettings(tool_limits={"search": 10}, managed_rules=False))
    body = ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"t":"' + "x" * 20_000
            + '"},"name":"search"}}').encode()
    request = FirewallRequest("POST", "/mcp", {"authorization": TOKEN_A}, body)
    assert all(acl.evaluate(request).allowed for _ in range(20))
    wider = emulator(FirewallSettings(tool_limits={"search": 10}, managed_rules=False, body_inspection_kb=32))
    assert [wider.evaluate(request).allowed for _ in range(11)][-1] is False


@pytest.mark.parametrize(("handling", "matches"), [("MATCH", True), ("NO_MATCH", False), ("CONTINUE", True)])
def test_oversize_handling_decides_a_body_over_the_inspection_limit(handling, matches):
    rule = {"name": "r", "priority": 0, "action": {"block": {}},
            "statement": json_value_equals("/params/name", "search", oversize_handling=handling),
            "visibility_config": {}}
    acl = WebAclEmulator([rule])
    verdict = acl.evaluate(call("search", pad=20_000))
    assert verdict.allowed is not matches
    assert acl.evaluate(call("echo", pad=20_000)).allowed is (handling != "MATCH")


def test_requests_without_a_token_are_limited_per_ip_and_never_in_a_per_token_count():
    acl = emulator(FirewallSettings(token_limit=10, anonymous_ip_limit=10, managed_rules=False))
    for _ in range(10):
        assert acl.evaluate(call("echo", token=None)).allowed
    limited = acl.evaluate(call("echo", token=None))
    assert (limited.rule, limited.status) == ("anonymous-ip-limit", 429)
    assert acl.evaluate(call("echo", token=None, ip="203.0.113.9")).allowed
    assert acl.evaluate(call("echo")).allowed, "the token's count holds none of the anonymous requests"


def test_the_metadata_paths_are_limited_per_ip_even_with_a_token():
    acl = emulator(FirewallSettings(anonymous_ip_limit=10, managed_rules=False))
    metadata = FirewallRequest("GET", "/.well-known/oauth-protected-resource/mcp", {"authorization": TOKEN_A})
    assert all(acl.evaluate(metadata).allowed for _ in range(10))
    assert acl.evaluate(metadata).rule == "anonymous-ip-limit"


def test_a_percent_encoded_mcp_path_is_counted_as_the_path():
    acl = emulator(FirewallSettings(token_limit=10, managed_rules=False))
    encoded = FirewallRequest("POST", "/%6Dcp", {"authorization": TOKEN_A}, b"{}")
    assert all(acl.evaluate(encoded).allowed for _ in range(10))
    assert acl.evaluate(encoded).rule == "token-limit"


def test_a_100_kb_tool_call_passes_every_emulated_rule():
    acl = emulator(FirewallSettings(tool_limits={"write_file": 10}))
    # Body content that trips the common rule set's body signatures, over its 8 KB size rule.
    content = "<script>x</script> ../../etc http://169.254.169.254/ ${jndi:ldap://x} rO0AB " + "y" * 100_000
    request = call("write_file", pad=0)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "write_file", "arguments": {"content": content}}}).encode()
    request = FirewallRequest(request.method, request.path, request.headers, body, client_ip=request.client_ip)
    assert len(body) > 100_000
    verdict = acl.evaluate(request)
    assert verdict.allowed, verdict
    matched = {m.name for m in MANAGED_RULES if m.matches(request)}
    assert {"SizeRestrictions_BODY", "CrossSiteScripting_BODY", "GenericLFI_BODY", "EC2MetaDataSSRF_BODY",
            "Log4JRCE_BODY", "JavaDeserializationRCE_BODY"} <= matched
    assert matched <= set(COMMON_RULE_SET_COUNTED) | set(KNOWN_BAD_INPUTS_COUNTED)
    assert {c.split(":")[1] for c in verdict.counted} == matched


def test_managed_rules_that_inspect_the_path_or_headers_still_block():
    acl = emulator(FirewallSettings())
    verdict = acl.evaluate(FirewallRequest("GET", "/mcp", {"authorization": TOKEN_A, "user-agent": "${jndi:ldap://x}"}))
    assert (verdict.allowed, verdict.rule, verdict.status) == (False, "aws-known-bad-inputs:Log4JRCE_HEADER", 403)
    assert acl.evaluate(FirewallRequest("PROPFIND", "/mcp", {"user-agent": "x"})).status == 403


@pytest.mark.parametrize(("request_", "group"), [
    (FirewallRequest("GET", "/mcp", {"authorization": TOKEN_A, "user-agent": "${jndi:ldap://x}"}),
     "AWSManagedRulesKnownBadInputsRuleSet"),
    (FirewallRequest("POST", "/mcp", {"authorization": TOKEN_A, "user-agent": "sdk"}, query="q=" + "a" * 3000),
     "AWSManagedRulesCommonRuleSet"),
])
def test_a_managed_rule_block_is_a_json_rpc_403_a_client_can_read_not_wafs_plain_page(request_, group):
    verdict = emulator(FirewallSettings()).evaluate(request_)
    assert (verdict.allowed, verdict.status) == (False, 403)
    assert ("content-type", "application/json") in verdict.headers
    error = json.loads(verdict.body)
    assert error["jsonrpc"] == "2.0" and error["id"] is None
    assert error["error"]["code"] == -32030 and error["error"]["data"]["ruleGroup"] == group


def test_the_emulator_reads_the_wire_spelling_the_program_registers():
    rendered = render_web_acl(FirewallSettings(tool_limits={"search": 10}))

    def camel(value: Any) -> Any:
        if isinstance(value, dict):
            return {k.split("_")[0] + "".join(p.title() for p in k.split("_")[1:]): camel(v) for k, v in value.items()}
        if isinstance(value, list):
            return [camel(v) for v in value]
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    wire = camel({"rules": rendered.rules, "custom_response_bodies": rendered.custom_response_bodies,
                  "association_config": rendered.association_config, "default_action": rendered.default_action})
    acl = WebAclEmulator.from_web_acl_inputs(wire)
    assert acl.rules == rendered.rules and acl.custom_response_bodies == rendered.custom_response_bodies
    assert acl.body_inspection_bytes == 16 * 1024


def test_a_statement_the_emulator_does_not_know_is_refused_not_guessed():
    rule = {"name": "r", "priority": 0, "action": {"block": {}}, "visibility_config": {},
            "statement": {"sqli_match_statement": {}}}
    with pytest.raises(UnsupportedStatementError):
        WebAclEmulator([rule]).evaluate(call("echo"))


json_scalars = st.one_of(st.text(max_size=8), st.integers(-1000, 1000), st.booleans(), st.none())
json_documents = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)), max_leaves=12)


def flatten(value: Any, pointer: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in flatten(v, f"{pointer}/{k.replace('~', '~0').replace('/', '~1')}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in flatten(v, f"{pointer}/{i}")]
    return [(pointer, value if isinstance(value, str) else json.dumps(value))]


@given(st.one_of(st.lists(json_documents, max_size=4), st.dictionaries(st.text(max_size=5), json_documents,
                                                                       max_size=4)))
def test_the_json_parser_reads_every_scalar_with_its_pointer(document):
    values, _ = json_prefix(json.dumps(document).encode())
    assert values == flatten(document)


@given(st.dictionaries(st.text(max_size=5), json_documents, min_size=1, max_size=4), st.data())
def test_a_truncated_body_yields_the_values_before_the_cut(document, data):
    text = json.dumps(document).encode()
    cut = data.draw(st.integers(0, len(text)))
    values, _ = json_prefix(text[:cut])
    assert values == flatten(document)[:len(values)]


@given(st.lists(st.floats(0, 1000), min_size=1, max_size=50), st.sampled_from([60, 120, 300, 600]))
def test_the_rate_counter_counts_the_requests_of_the_last_window(offsets, window):
    counter = RateCounter()
    times = sorted(offsets)
    for i, now in enumerate(times):
        count = counter.add("r", ("k",), now, window)
        assert count == sum(1 for t in times[:i + 1] if t > now - window)
    assert snake_keys({"aB": 1.0}) == {"a_b": 1}


# --- one token, one count, however it is spelled ---------------------------

# What a client can send: HTTP hands no header value on with whitespace around it (RFC 9110 5.5).
SPELLINGS = ("Bearer {}", "bearer {}", "BEARER {}", "Bearer  {}", "Bearer\t{}", "bEaReR \t \x0b{}", "Bearer\xa0{}",
             "Bearer \x0c {}")


@pytest.mark.parametrize("era", ["2026", "handshake"])
def test_every_spelling_of_one_token_counts_against_one_key_and_hits_429_at_the_limit(era):
    acl = emulator(FirewallSettings(token_limit=10, tool_limits={"countdown": 20}, managed_rules=False))
    spelled = [SPELLINGS[i % len(SPELLINGS)].format("aaa.bbb.ccc") for i in range(12)]
    verdicts = [acl.evaluate(call("echo", token=token, era=era)) for token in spelled]
    assert [v.allowed for v in verdicts] == [True] * 10 + [False] * 2
    assert {v.rule for v in verdicts[10:]} == {"token-limit"} and {v.status for v in verdicts[10:]} == {429}


def test_a_limited_tool_called_under_respelled_tokens_is_limited_at_its_own_limit():
    acl = emulator(FirewallSettings(token_limit=100, tool_limits={"countdown": 10}, managed_rules=False))
    verdicts = [acl.evaluate(call("countdown", token=SPELLINGS[i % len(SPELLINGS)].format("aaa.bbb.ccc")))
                for i in range(11)]
    assert [v.allowed for v in verdicts] == [True] * 10 + [False]
    assert verdicts[-1].rule == "tool-limit-1-countdown"


def test_tokens_that_differ_beyond_case_and_whitespace_keep_counts_of_their_own():
    acl = emulator(FirewallSettings(token_limit=10, managed_rules=False))
    assert all(acl.evaluate(call("echo", token="Bearer aaa.bbb.ccc")).allowed for _ in range(10))
    assert not acl.evaluate(call("echo", token="BEARER AAA.BBB.CCC")).allowed, "case folds into the same key"
    assert acl.evaluate(call("echo", token="Bearer aaa.bbb.ccd")).allowed, "another token, another count"
    assert acl.evaluate(call("echo", token="Bearer aaa.bbb .ccc")).allowed, "a space inside is not folded away"


# --- forged tokens from one address ----------------------------------------

IP_LIMIT_STACK = Path(__file__).with_name("stacks") / "Pulumi.ip-limit.yaml"


def test_30_forged_tokens_from_one_address_get_429_after_the_10th_under_the_stacks_ip_limit():
    firewall = load_from_stack_file(IP_LIMIT_STACK).firewall
    assert firewall is not None and firewall.ip_limit == 10
    acl = emulator(firewall)
    now = int(time.time())
    # Well-shaped (the viewer function's checks pass) with a bogus signature, each a fresh token.
    forged = [make_token({"alg": "RS256", "kid": "k1"}, {"iss": "https://auth.acme.example/", "exp": now + 600,
                                                         "aud": "https://mcp.acme.example/mcp", "jti": str(i)})
              for i in range(30)]
    verdicts = [acl.evaluate(call("echo", token=f"Bearer {token}", ip="203.0.113.9")) for token in forged]
    assert [v.allowed for v in verdicts] == [True] * 10 + [False] * 20
    assert {(v.rule, v.status) for v in verdicts[10:]} == {("ip-limit", 429)}
    assert "per-IP limit for every request" in json.loads(verdicts[-1].body)["error"]["message"]
    assert acl.evaluate(call("echo", token=f"Bearer {forged[0]}", ip="203.0.113.10")).allowed, "another address"


def test_the_every_request_limit_also_counts_the_metadata_and_paths_outside_the_mcp_path():
    acl = emulator(FirewallSettings(token_limit=10, anonymous_ip_limit=1000, ip_limit=1000, managed_rules=False))
    paths = ["/mcp", "/.well-known/oauth-protected-resource/mcp", "/", "/other"]
    for i in range(1000):
        request = FirewallRequest("GET", paths[i % 4], {"authorization": f"Bearer t{i}.x.y"}, client_ip="203.0.113.9")
        assert acl.evaluate(request).allowed, i
    limited = acl.evaluate(FirewallRequest("GET", "/healthz", {}, client_ip="203.0.113.9"))
    # 250 of the 1000 were metadata requests (the anonymous rule's 1000 is far off): the every-request rule limits.
    assert (limited.allowed, limited.rule, limited.status) == (False, "ip-limit", 429)


# --- deeply nested bodies ---------------------------------------------------

@pytest.mark.parametrize("depth", [20_000, 200_000])
@pytest.mark.parametrize("opener", ["[", "{\"a\":"])
def test_a_deeply_nested_body_is_parsed_up_to_the_nesting_limit_and_evaluated_without_a_crash(depth, opener):
    values, keys = json_prefix((opener * depth).encode())
    assert values == [] and len(keys) == (JSON_NESTING_LIMIT if opener != "[" else 0)
    acl = emulator(FirewallSettings(token_limit=10, tool_limits={"countdown": 10}))
    verdict = acl.evaluate(FirewallRequest("POST", "/mcp", {"authorization": TOKEN_A, "user-agent": "t"},
                                           (opener * depth).encode()))
    assert verdict.allowed, "WAF evaluates what it parsed: nothing here names a limited tool"


def test_a_name_after_nesting_within_the_limit_is_read_and_one_past_it_is_not():
    def body(nest: int) -> bytes:
        meta = "[" * nest + "]" * nest
        return ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":' + meta +
                ',"name":"countdown"}}').encode()

    # The root object and params are two levels: _meta's arrays nest below them.
    depth = JSON_NESTING_LIMIT - 2
    assert ("/params/name", "countdown") in json_prefix(body(depth))[0]
    assert ("/params/name", "countdown") not in json_prefix(body(depth + 1))[0]
    assert ("/method", "tools/call") in json_prefix(body(depth + 1))[0], "what came before is still matched"
