"""What the edge's AWS WAF per-tool limits cannot count, refused here so that no call of a
rate-limited tool reaches an origin uncounted.

The per-tool rule (``edge/firewall_rules.py``, ``calls_tool``) matches a request when its
``Mcp-Method`` header is exactly ``tools/call`` and ``Mcp-Name`` exactly the tool (the raw
values: no transformation), or when its JSON body's ``/method`` is ``tools/call`` and
``/params/name`` the tool. What WAF's JSON body inspection can and cannot see (botocore's
wafv2 model and the AWS WAF developer guide, "JSON body"):

- ``MatchPattern.IncludedPaths`` are JSON pointers (RFC 6901), each naming one member or
  one array index (``/0/params/name``); there is no wildcard over an array's elements. And
  a rate-based rule counts requests: a batch is one request however many calls it carries.
  So a JSON-RPC batch that holds a call of a limited tool is refused (400), whatever its
  headers say: a batch of 50 calls named by matching headers would still count once.
- CloudFront forwards only the first ``default_size_inspection_limit`` of a body to WAF
  (``AssociationConfig``: 16 KB by default, 32/48/64 KB at extra cost); with
  ``OversizeHandling: CONTINUE`` WAF inspects that part, and without an
  ``InvalidFallbackBehavior`` it "parses and evaluates the content only up to the first
  parsing failure". A value WAF has not read whole is not matched. So a call of a limited
  tool whose ``method`` or ``params.name`` value ends past the inspection size is refused
  (400), unless the headers name it exactly as WAF compares them (the header match counted
  it). Calls of tools without a limit are not refused: the per-token rule counts every
  request whatever its body.
- AWS does not say whether the JSON body match compares a string's JSON escapes decoded
  (``"countdow\\u006e"``): a limited call that spells ``method``, ``params`` or ``name``
  (key or value) with escapes is refused, unless the headers name it. No SDK escapes an
  ASCII name; escapes elsewhere (a newline in the arguments) are the body's own business.
- AWS documents no nesting limit for its JSON parser. A parser stops somewhere, and a
  member after the point where it stopped is not matched: the gate assumes the parse stops
  past ``JSON_NESTING_LIMIT`` levels and refuses a limited call whose name follows JSON
  nested deeper (no SDK nests anything before ``params.name``; arguments come after it or
  are shallow). If WAF's own limit is deeper, such a call would have been counted and
  refused; never the reverse. The local emulation (``local/firewall.py``) stops there too.

Pure functions: the handler calls ``check`` after the body is parsed; the limited tools
and the inspection size are rendered into the gate's config (``rate_limited_tools``,
``waf_body_inspection_bytes``).
"""

from __future__ import annotations

import json
import re

from .constants import GATE_CONFIG
from .mcp_request import INVALID_REQUEST, Call, RequestRefusedError, header_values

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
    from typing import Any

JSON_NESTING_LIMIT = 64
"""Nesting depth (the root object is 1) past which the edge takes WAF's JSON parse to stop."""
TOOLS_CALL = "tools/call"
DEFAULT_INSPECTION_BYTES = 16 * 1024
"""CloudFront's default body inspection size for WAF."""
RATE_LIMITED_TOOLS: frozenset[str] = frozenset(GATE_CONFIG.get("rate_limited_tools", ()))
INSPECTION_BYTES: int = GATE_CONFIG.get("waf_body_inspection_bytes", DEFAULT_INSPECTION_BYTES)
_DECODER = json.JSONDecoder()
# A JSON string, or one structural character (outside strings brackets are depth).
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _named_by_headers(headers: Mapping[str, Any], tool: str) -> bool:
    """WAF's header match: one ``Mcp-Method`` exactly ``tools/call`` and one ``Mcp-Name``
    exactly ``tool`` (the gate's own reading trims and decodes; WAF's does not)."""
    return header_values(headers, "mcp-method") == [TOOLS_CALL] and header_values(headers, "mcp-name") == [tool]


def _skip(text: str, i: int) -> int:
    """The offset of the first character at or after ``i`` that is not JSON whitespace."""
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _member_value_ends(text: str, start: int) -> dict[str, tuple[int, int, int]]:
    """The members of the JSON object at ``text[start]`` (``{``): name -> (key start, value
    start, value end) as character offsets. ``text`` is strict JSON already (the gate parsed it)."""
    out: dict[str, tuple[int, int, int]] = {}
    i = _skip(text, start + 1)
    if text[i] == "}":
        return out
    while True:
        key_start = i
        key, i = _DECODER.raw_decode(text, i)
        value_start = _skip(text, _skip(text, i) + 1)  # past the colon
        _, i = _DECODER.raw_decode(text, value_start)
        out[key] = (key_start, value_start, i)
        i = _skip(text, i)
        if text[i] == "}":
            return out
        i = _skip(text, i + 1)


def _depth_before(text: str, end: int) -> int:
    """The deepest nesting of ``text[:end]`` (the root container is depth 1)."""
    depth = deepest = 0
    for token in _TOKENS.finditer(text, 0, end):
        c = token.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _escaped(text: str, span: tuple[int, int, int], key: str, value: str) -> bool:
    """Whether a member's key or string value is spelled with JSON escapes (``"n\\u0061me"``)."""
    key_start, value_start, value_end = span
    return text[key_start:key_start + len(key) + 2] != f'"{key}"' or text[value_start:value_end] != f'"{value}"'


def late_name_problem(body: bytes, tool: str, inspection_bytes: int) -> str | None:
    """Why WAF's body match would not see this single call of ``tool`` (None: it would)."""
    if len(body) <= inspection_bytes and body.count(b"[") + body.count(b"{") <= JSON_NESTING_LIMIT \
            and b"\\" not in body:
        return None  # WAF reads it all, no nesting can stop it, and every string is spelled plainly
    text = body.decode("utf-8")
    try:
        members = _member_value_ends(text, _skip(text, 0))
        params = _member_value_ends(text, members["params"][1])
    except RecursionError:  # parsed once already, a few frames higher up: far past any nesting limit
        return _too_deep(tool)
    if _escaped(text, members["method"], "method", TOOLS_CALL) or _escaped(text, params["name"], "name", tool) or \
            text[members["params"][0]:members["params"][0] + 8] != '"params"':
        # The gate reads JSON escapes; whether WAF's match reads them decoded is not documented.
        return (f"the tools/call of {tool!r} spells method, params or name with JSON escapes, which the edge's "
                "firewall may not decode to count this tool's rate limit: send them as plain text")
    last = max(members["method"][2], params["name"][2])
    if len(text[:last].encode("utf-8")) > inspection_bytes:
        return (f"the tools/call of {tool!r} names its method or tool after the first {inspection_bytes} bytes of the "
                "body, which is all the edge's firewall reads to count this tool's rate limit: send method and "
                "params.name first (or the Mcp-Method and Mcp-Name headers)")
    return _too_deep(tool) if _depth_before(text, last) > JSON_NESTING_LIMIT else None


def _too_deep(tool: str) -> str:
    return (f"the tools/call of {tool!r} names its tool after JSON nested deeper than {JSON_NESTING_LIMIT} levels, "
            "past which the edge's firewall does not read to count this tool's rate limit")


def check(headers: Mapping[str, Any], body: bytes, calls: list[Call], batch: bool,
          limited: Collection[str] = RATE_LIMITED_TOOLS, inspection_bytes: int = INSPECTION_BYTES) -> None:
    """``RequestRefusedError`` (invalid request) for a request that calls a rate-limited
    tool in a way the web ACL's per-tool rule cannot count; nothing otherwise."""
    if not limited:
        return
    targets = [c for c in calls if c.method == TOOLS_CALL and c.target in limited]
    if not targets:
        return
    if batch:
        raise RequestRefusedError(INVALID_REQUEST, f"a batch calls the rate-limited tool {targets[0].target!r}: the "
                                  "edge counts a limited tool's calls one request each; send each such call as its "
                                  "own POST")
    (call,) = targets
    assert call.target is not None
    if _named_by_headers(headers, call.target):
        return
    problem = late_name_problem(body, call.target, inspection_bytes)
    if problem is not None:
        raise RequestRefusedError(INVALID_REQUEST, problem, call.request_id)
