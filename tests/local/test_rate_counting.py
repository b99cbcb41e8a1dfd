"""The web ACL and the gate agree on the per-tool limits: a call of a rate-limited tool is
either counted by the rendered per-tool rule (evaluated by the local WAF emulation) or
refused by the shipped gate (``edge_gate/rate_counting.py``, rendered with the same tools
and body inspection size), never forwarded uncounted. Batches and names past WAF's body
inspection are the shapes WAF's JSON body match cannot count."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge.firewall_rules import JSON_NESTING_LIMIT, FirewallSettings, render_web_acl, tool_rule_name
from local.firewall import FirewallRequest, RateCounter, WebAclEmulator
from tests.edge.gate_harness import CREDENTIALS, Issuer, event, render, status
from tests.edge.gate_harness import settings as gate_settings

LIMITED, OTHER = "countdown", "echo"
RULE = tool_rule_name(1, LIMITED)
KB = (16, 64)


class RecordingCounter(RateCounter):
    """The emulator's counter, remembering which rules counted a request."""

    def __init__(self) -> None:
        super().__init__()
        self.rules: list[str] = []

    def add(self, rule: str, key: tuple[str, ...], now: float, window: float) -> int:
        self.rules.append(rule)
        return super().add(rule, key, now, window)


def waf_counts(kb: int, headers: dict[str, str], body: bytes) -> bool:
    """Whether the rendered per-tool rule of ``LIMITED`` counts this request."""
    rendered = render_web_acl(FirewallSettings(tool_limits={LIMITED: 10}, body_inspection_kb=kb, managed_rules=False))
    counter = RecordingCounter()
    acl = WebAclEmulator(rendered.rules, rendered.custom_response_bodies, rendered.association_config,
                         rendered.default_action, counter=counter)
    acl.evaluate(FirewallRequest("POST", "/mcp", {"authorization": "Bearer aaa.bbb.ccc", **headers}, body))
    return RULE in counter.rules


@pytest.fixture(autouse=True)
def role_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer.generate()


@pytest.fixture(scope="module")
def gates(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> dict[int, ModuleType]:
    """The shipped gate per body inspection size, with the one limited tool rendered in."""
    return {kb: render(gate_settings(issuer.jwks, tool_scopes={}, rate_limited_tools=(LIMITED,),
                                     waf_body_inspection_kb=kb), tmp_path_factory.mktemp(f"gate-{kb}"))
            for kb in KB}


Gate = Callable[[int, dict[str, str], bytes], dict[str, Any]]


@pytest.fixture(scope="module")
def gate(gates: dict[int, ModuleType], issuer: Issuer) -> Gate:
    token = issuer.token()

    def answer(kb: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        result: dict[str, Any] = gates[kb].handler(event({**headers, "Authorization": f"Bearer {token}"}, body=body),
                                                   None)
        return result

    return answer


def call(tool: str = LIMITED, *, pad_before: int = 0, request_id: int = 1, **params: Any) -> dict[str, Any]:
    """A tools/call whose params carry ``pad_before`` bytes of arguments ahead of the name."""
    ahead = {"arguments": {"text": "x" * pad_before}} if pad_before else {}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {**ahead, "name": tool, **params}}


def raw(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def named(tool: str = LIMITED) -> dict[str, str]:
    return {"mcp-method": "tools/call", "mcp-name": tool}


def refusal(result: dict[str, Any]) -> str:
    assert status(result) == 400, result
    error = json.loads(result["body"])["error"]
    assert error["code"] == -32600
    return str(error["message"])


# --- batches ---------------------------------------------------------------------------------------

def test_the_per_tool_rule_counts_a_plain_call_of_the_limited_tool_which_the_gate_forwards(gate):
    assert waf_counts(16, {}, raw(call())) and not waf_counts(16, {}, raw(call(OTHER)))
    assert status(gate(16, {}, raw(call()))) is None


def test_a_batch_with_a_call_of_a_limited_tool_is_not_counted_by_waf_and_refused_by_the_gate(gate):
    body = raw([call()])
    assert not waf_counts(16, {}, body)
    message = refusal(gate(16, {}, body))
    assert "batch" in message and repr(LIMITED) in message and "own POST" in message


def test_a_batch_of_many_limited_calls_named_by_matching_headers_counts_once_so_the_gate_refuses_it(gate):
    body = raw([call(request_id=i) for i in range(20)])
    headers = {**named(), "mcp-protocol-version": "2025-03-26"}
    assert waf_counts(16, headers, body), "WAF counts the request once, by its headers, for 20 calls"
    assert "batch" in refusal(gate(16, headers, body))


def test_a_batch_without_a_limited_tool_is_not_this_checks_business(gate):
    assert status(gate(16, {}, raw([call(OTHER), call(OTHER, request_id=2)]))) is None  # forwarded


# --- names past the body inspection ---------------------------------------------------------------

def test_a_name_after_16_kb_of_other_members_is_not_counted_by_waf_and_refused_by_the_gate(gate):
    body = raw(call(pad_before=16 * 1024))
    assert len(body) > 16 * 1024 and not waf_counts(16, {}, body)
    message = refusal(gate(16, {}, body))
    assert "16384 bytes" in message and repr(LIMITED) in message and "params.name first" in message
    assert json.loads(gate(16, {}, body)["body"])["id"] == 1


def test_a_method_after_16_kb_is_as_uncounted_as_a_late_name(gate):
    document = call()
    body = raw({"params": {**document["params"], "arguments": {"text": "x" * 17_000}}, "jsonrpc": "2.0", "id": 1,
                "method": "tools/call"})
    assert not waf_counts(16, {}, body)
    assert "16384 bytes" in refusal(gate(16, {}, body))


def test_a_late_name_within_a_larger_inspection_size_is_counted_and_forwarded(gate):
    body = raw(call(pad_before=40 * 1024))
    assert waf_counts(64, {}, body)
    assert status(gate(64, {}, body)) is None


def test_a_late_name_of_a_limited_tool_named_by_the_headers_is_counted_by_them_and_forwarded(gate):
    body = raw(call(pad_before=20 * 1024))
    assert waf_counts(16, named(), body)
    assert status(gate(16, named(), body)) is None


def test_headers_the_gate_decodes_but_waf_compares_raw_do_not_excuse_a_late_name(gate):
    encoded = "=?base64?" + base64.b64encode(LIMITED.encode()).decode() + "?="
    headers = {"mcp-method": "tools/call", "mcp-name": encoded}
    body = raw(call(pad_before=20 * 1024))
    assert not waf_counts(16, headers, body)
    assert "16384 bytes" in refusal(gate(16, headers, body))


def test_a_late_name_of_a_tool_without_a_limit_is_forwarded(gate):
    assert status(gate(16, {}, raw(call(OTHER, pad_before=20 * 1024)))) is None


def test_a_name_after_json_nested_past_the_limit_is_not_counted_and_refused(gate):
    nest = JSON_NESTING_LIMIT - 1  # with the root object and params: one level past the limit
    body = raw(call(_meta=None)).replace(b'"_meta":null', b'"_meta":' + b"[" * nest + b"]" * nest)
    body = body.replace(b'"params":{"name":"countdown",', b'"params":{').replace(b"}}", b',"name":"countdown"}}')
    assert json.loads(body)["params"]["name"] == LIMITED and not waf_counts(16, {}, body)
    assert f"deeper than {JSON_NESTING_LIMIT}" in refusal(gate(16, {}, body))


# --- the two agree on every shape ------------------------------------------------------------------

shapes = st.fixed_dictionaries({
    "tool": st.sampled_from([LIMITED, OTHER]),
    "pad": st.sampled_from([0, 100, 15_000, 17_000, 40_000, 70_000]),
    "pad_first": st.booleans(),
    "method_last": st.booleans(),
    "nest": st.sampled_from([0, 10, JSON_NESTING_LIMIT - 2, JSON_NESTING_LIMIT + 5]),
    "batch": st.integers(0, 3),
    "headers": st.sampled_from(["none", "exact", "encoded", "other"]),
    "kb": st.sampled_from(KB),
})


def shaped(shape: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    tool = shape["tool"]
    meta = "[" * shape["nest"] + "]" * shape["nest"] or "null"
    pad = '"arguments":{"text":"' + "x" * shape["pad"] + '"}'
    members = [f'"_meta":{meta}', pad, f'"name":"{tool}"'] if shape["pad_first"] else \
        [f'"name":"{tool}"', pad, f'"_meta":{meta}']
    params = '"params":{' + ",".join(members) + "}"
    top = [params, '"method":"tools/call"'] if shape["method_last"] else ['"method":"tools/call"', params]
    message = '{"jsonrpc":"2.0","id":1,' + ",".join(top) + "}"
    body = ("[" + ",".join([message] * shape["batch"]) + "]" if shape["batch"] else message).encode()
    headers = {"none": {}, "exact": named(tool), "other": named(OTHER),
               "encoded": {"mcp-method": "tools/call",
                           "mcp-name": "=?base64?" + base64.b64encode(tool.encode()).decode() + "?="}}[shape["headers"]]
    return headers, body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes)
def test_a_single_call_of_a_limited_tool_is_forwarded_exactly_when_waf_counts_it(gate, shape):
    headers, body = shaped(shape)
    result = gate(shape["kb"], headers, body)
    if shape["tool"] != LIMITED:
        return
    if shape["headers"] == "other":
        assert status(result) == 400, "refused for headers that do not match the body"
        return
    if shape["batch"]:
        assert "batch" in refusal(result), shape
        return
    # Never forwarded uncounted, and never refused when WAF would have counted it.
    assert (status(result) is None) == waf_counts(shape["kb"], headers, body), (shape, result.get("body"))


# --- deeply nested bodies: WAF evaluates what it parsed, the gate refuses ----

@pytest.mark.parametrize("depth", [20_000, 200_000])
@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_a_deeply_nested_body_passes_wafs_rules_and_gets_the_gates_json_rpc_parse_error(gate, depth, opener):
    body = opener * depth
    assert not waf_counts(16, {}, body)
    result = gate(16, {}, body)
    assert status(result) == 400 and json.loads(result["body"])["error"]["code"] == -32700


def test_a_limited_call_whose_arguments_nest_near_pythons_limit_is_answered_not_crashed(gate):
    # Parsed by the gate's JSON reader, then walked again a few frames deeper by the check.
    for nest in (900, 960, 985, 995):
        body = raw(call(pad_before=17_000)).replace(b'"name"', b'"deep":' + b"[" * nest + b"]" * nest + b',"name"')
        assert status(gate(16, {}, body)) == 400


@pytest.mark.parametrize(("overrides", "field"), [
    ({"rate_limited_tools": ("bad name",)}, "rate_limited_tools: 'bad name'"),
    ({"waf_body_inspection_kb": 8}, "waf_body_inspection_kb = 8: must be one of 16, 32, 48, 64"),
])
def test_rate_counting_settings_the_web_acl_could_not_have_fail_the_render_naming_the_field(issuer, overrides, field):
    from edge.gate_package import gate_config

    with pytest.raises(ValueError, match=re.escape(field)):
        gate_config(gate_settings(issuer.jwks, **overrides))


@pytest.mark.parametrize(("plain", "spelled"), [
    (b'"name":"countdown"', b'"name":"countdow\\u006e"'), (b'"name":"countdown"', b'"n\\u0061me":"countdown"'),
    (b'"method":"tools/call"', b'"method":"tools\\/call"'), (b'"params":', b'"p\\u0061rams":')])
def test_a_limited_call_naming_its_tool_with_json_escapes_is_refused_unless_the_headers_name_it(gate, plain, spelled):
    body = raw(call()).replace(plain, spelled)
    assert json.loads(body) == call(), "the gate reads the call the escapes spell"
    assert "JSON escapes" in refusal(gate(16, {}, body))
    assert status(gate(16, named(), body)) is None, "counted by the headers"


def test_escapes_in_a_limited_calls_arguments_are_its_own_business(gate):
    assert status(gate(16, {}, raw(call(arguments={"text": "two\nlines \"quoted\""})))) is None
