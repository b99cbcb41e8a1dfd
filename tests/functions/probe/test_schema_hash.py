"""schemaHash: a pinned test vector (so the documented form cannot silently change)
and properties: presentation never changes it, content always does."""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.probe.errors import ProbeProtocolError
from functions.probe.schema_hash import HASHED_FIELDS, canonical_tools, schema_hash

VECTOR_TOOLS = [
    {
        "name": "search",
        "title": "Search (titles are not hashed)",
        "description": "Full-text search",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "maximum": 1e2}},
                        "required": ["q"]},
        "annotations": {"readOnlyHint": True},
        "_meta": {"ignored": True},
    },
    {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "number", "default": 0.5}}},
     "outputSchema": {"type": "object", "properties": {"result": {"type": "number"}}}},
]
# The canonical form of VECTOR_TOOLS, written out by hand from the documented rules:
# five members per tool (absent: null), tools sorted by name, RFC 8785 (sorted keys,
# no whitespace, 1e2 -> 100, 0.5 -> 0.5).
VECTOR_CANONICAL = (
    b'[{"annotations":null,"description":null,"inputSchema":{"properties":{"a":{"default":0.5,"type":"number"}},'
    b'"type":"object"},"name":"add","outputSchema":{"properties":{"result":{"type":"number"}},"type":"object"}},'
    b'{"annotations":{"readOnlyHint":true},"description":"Full-text search","inputSchema":{"properties":'
    b'{"limit":{"maximum":100,"type":"integer"},"q":{"type":"string"}},"required":["q"],"type":"object"},'
    b'"name":"search","outputSchema":null}]'
)
VECTOR_HASH = "90accd38e22581ddae97db379010ab8df409ba0aba6f7d8b60448535f7d5963d"


def test_canonical_form_matches_the_documented_vector():
    assert canonical_tools(VECTOR_TOOLS) == VECTOR_CANONICAL
    assert hashlib.sha256(VECTOR_CANONICAL).hexdigest() == VECTOR_HASH
    assert schema_hash(VECTOR_TOOLS) == VECTOR_HASH


def test_numbers_are_canonicalized_as_rfc_8785_not_as_python_json():
    # json.dumps(sort_keys=True) would write 1152921504606846976, 1e+21 and 1.0; JCS reads
    # numbers as IEEE 754 doubles and writes them as ECMAScript does.
    tools = [{"name": "t", "inputSchema": {"maximum": 1e21, "minimum": 1.0, "big": 2**60}}]
    assert b'"big":1152921504606847000,"maximum":1e+21,"minimum":1}' in canonical_tools(tools)


def test_tools_without_a_string_name_are_a_protocol_error():
    with pytest.raises(ProbeProtocolError, match="tool #1"):
        schema_hash([{"name": "ok"}, {"description": "nameless"}])


# --- properties ---------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=8) | st.floats(
    allow_nan=False, allow_infinity=False, width=64)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)
tool_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=10)


@st.composite
def tool_lists(draw: Any) -> list[dict[str, Any]]:
    names = draw(st.lists(tool_names, min_size=1, max_size=5, unique=True))
    tools = []
    for name in names:
        tool: dict[str, Any] = {"name": name}
        for key in ("description", "inputSchema", "outputSchema", "annotations", "title"):
            if draw(st.booleans()):
                tool[key] = draw(st.text(max_size=12)) if key in ("description", "title") else draw(json_values)
        tools.append(tool)
    return tools


def _shuffle_keys(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffle_keys(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffle_keys(v, rnd) for v in value]
    return value


@given(tool_lists(), st.randoms(use_true_random=False), st.integers(0, 4))
@settings(max_examples=100, deadline=None)
def test_order_key_order_and_whitespace_do_not_change_the_hash(tools, rnd, indent):
    shuffled = _shuffle_keys(copy.deepcopy(tools), rnd)
    rnd.shuffle(shuffled)
    # Through JSON text with arbitrary formatting and back, as a server would send it.
    reparsed = json.loads(json.dumps(shuffled, indent=indent or None, separators=(", ", " : ") if indent else None))
    assert schema_hash(reparsed) == schema_hash(tools)


@given(tool_lists(), st.data())
@settings(max_examples=100, deadline=None)
def test_any_change_in_a_hashed_field_changes_the_hash(tools, data):
    index = data.draw(st.integers(0, len(tools) - 1))
    field = data.draw(st.sampled_from(HASHED_FIELDS))
    changed = copy.deepcopy(tools)
    old = changed[index].get(field)
    new = data.draw(json_values.filter(lambda v: v != old and not (v is None and old is None)))
    if field == "name":
        new = data.draw(tool_names.filter(lambda n: n not in {t["name"] for t in tools}))
    changed[index][field] = new
    if field != "name" and new is None and old is None:
        return
    assert schema_hash(changed) != schema_hash(tools)


@given(tool_lists(), st.text(max_size=10))
@settings(max_examples=100, deadline=None)
def test_fields_outside_the_documented_five_do_not_change_the_hash(tools, title):
    changed = copy.deepcopy(tools)
    changed[0]["title"] = title
    changed[0]["_meta"] = {"anything": title}
    assert schema_hash(changed) == schema_hash(tools)


def _hashed_at(depth: int) -> str:
    """"hashed", or which walk ran out ("one tool" alone, or "the tools" list) at that depth."""
    try:
        canonical_tools([{"name": "t", "inputSchema": json.loads("[" * depth + "]" * depth)}])
        return "hashed"
    except ProbeProtocolError as exc:
        return "the tools" if "the tools cannot" in str(exc) else "one tool"


def test_nesting_past_the_recursion_limit_is_a_protocol_error_whichever_walk_runs_out():
    # The list of tools is one level deeper than each tool alone: at the depth where a tool
    # canonicalizes but the list does not, the answer is a typed error too.
    shallow, deep = 1, sys.getrecursionlimit() + 5
    assert (_hashed_at(shallow), _hashed_at(deep)) == ("hashed", "one tool")
    while deep - shallow > 1:  # the deepest that hashes
        middle = (shallow + deep) // 2
        shallow, deep = (middle, deep) if _hashed_at(middle) == "hashed" else (shallow, middle)
    assert (_hashed_at(deep), _hashed_at(deep + 1)) == ("the tools", "one tool")
