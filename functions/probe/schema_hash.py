"""schemaHash: a fingerprint of the tools a server advertises.

The form, so that anyone can recompute it:

1. Take the parsed ``tools`` of the (complete, all pages) ``tools/list`` result.
2. Reduce each tool to exactly five members, absent ones as ``null``::

       {"name", "description", "inputSchema", "outputSchema", "annotations"}

3. Sort the list by ``name`` (ties, which a valid server never has, by their canonical
   bytes, so the order is still total).
4. Serialize with RFC 8785 (JSON Canonicalization Scheme: keys sorted by UTF-16 code
   units, no insignificant whitespace, ECMAScript number formatting). Integers outside
   IEEE 754's exact range (|n| > 2**53 - 1) become doubles first, as a JCS
   implementation in JavaScript would read them.
5. ``schemaHash`` = lower-case hex SHA-256 of those UTF-8 bytes.

The hash is computed on the parsed tools, never on response bytes: the same server
orders schema keys differently in the two protocol eras.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import rfc8785

from .errors import ProbeProtocolError

HASHED_FIELDS = ("name", "description", "inputSchema", "outputSchema", "annotations")
_MAX_SAFE_INTEGER = 2**53 - 1


def _jcs_numbers(value: Any) -> Any:
    """Out-of-range integers as doubles (what JCS means by a JSON number)."""
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return value if abs(value) <= _MAX_SAFE_INTEGER else float(value)
    if isinstance(value, dict):
        return {k: _jcs_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jcs_numbers(v) for v in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical_tools(tools: Sequence[Any]) -> bytes:
    """The RFC 8785 bytes the hash is taken over (see the module docstring)."""
    reduced: list[tuple[str, bytes, dict[str, Any]]] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise ProbeProtocolError(f"tools/list: tool #{index} is not an object with a string name: {tool!r:.200}")
        try:
            item = {field: _jcs_numbers(tool.get(field)) for field in HASHED_FIELDS}
            alone = rfc8785.dumps(item)
        except (rfc8785.CanonicalizationError, OverflowError) as exc:  # NaN, Infinity, an integer past any double
            raise ProbeProtocolError(f"tools/list: tool {tool['name']!r:.200} cannot be canonicalized: {exc}") from None
        except RecursionError:  # both walks recurse in Python: a schema the C parser took can nest deeper
            raise ProbeProtocolError(f"tools/list: tool {tool['name']!r:.200} cannot be canonicalized: "
                                     "nested too deep") from None
        reduced.append((tool["name"], alone, item))
    reduced.sort(key=lambda t: (t[0], t[1]))
    try:
        return rfc8785.dumps([item for _, _, item in reduced])
    except RecursionError:  # one level deeper than a tool alone
        raise ProbeProtocolError("tools/list: the tools cannot be canonicalized: nested too deep") from None


def schema_hash(tools: Sequence[Any]) -> str:
    return hashlib.sha256(canonical_tools(tools)).hexdigest()
