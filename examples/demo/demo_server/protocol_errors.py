"""Errors a client can act on, for the requests the SDK would refuse with a generic text.

The origin gate asks ``rejection(...)`` before handing a POST to the SDK. It answers
only what it can name better than the SDK, with the codes the spec (and the SDK) use:

- a JSON-RPC batch (an array body): ``-32600`` invalid request, saying batching is not
  part of MCP since 2025-06-18 and to send one message per request;
- an ``MCP-Protocol-Version`` this server does not speak: ``-32022`` unsupported
  protocol version, ``data = {"supported": [...], "requested": ...}``, naming which
  versions use the per-request envelope and which the ``initialize`` handshake (the SDK
  would instead complain about a missing ``_meta`` envelope);
- a 2026-07-28 request whose ``Mcp-Method`` (or, for ``tools/call``, ``resources/read``,
  ``prompts/get``, ``Mcp-Name``) header is missing or disagrees with the body: ``-32020``
  header mismatch, naming the header, what it said and what the body says.

Anything else (including a body that is not JSON) goes to the SDK unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.shared.inbound import NAME_BEARING_METHODS, decode_header_value
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS


@dataclass(frozen=True)
class Rejection:
    code: int
    message: str
    request_id: Any = None
    data: dict[str, Any] | None = field(default=None)

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.request_id, "error": error}


def _request_id(message: Any) -> Any:
    if isinstance(message, dict) and isinstance(message.get("id"), (str, int)) and not isinstance(message["id"], bool):
        return message["id"]
    return None


def rejection(version: str | None, method_header: str | None, name_header: str | None, message: Any) -> Rejection | None:
    """What to answer instead of passing the request on, or None."""
    if isinstance(message, list):
        return Rejection(INVALID_REQUEST, "JSON-RPC batches are not supported (MCP dropped batching in 2025-06-18): "
                         f"send each of the {len(message)} messages as its own POST")
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS and version not in MODERN_PROTOCOL_VERSIONS:
        return Rejection(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"MCP-Protocol-Version {version[:40]!r} is not supported: this server speaks "
            f"{', '.join(MODERN_PROTOCOL_VERSIONS)} (stateless, per-request _meta, server/discover) and "
            f"{', '.join(reversed(HANDSHAKE_PROTOCOL_VERSIONS))} (after an initialize handshake)",
            _request_id(message),
            {"supported": [*MODERN_PROTOCOL_VERSIONS, *reversed(HANDSHAKE_PROTOCOL_VERSIONS)], "requested": version},
        )
    if version not in MODERN_PROTOCOL_VERSIONS or not isinstance(message, dict):
        return None
    method = message.get("method")
    if not isinstance(method, str):
        return None  # a response, or a malformed message: the SDK's answer is precise enough
    if method_header is None:
        return Rejection(HEADER_MISMATCH, f"the Mcp-Method header is missing: {version} requests name their method "
                         f"in it (this body's method is {method[:80]!r})", _request_id(message))
    if method_header != method:
        return Rejection(HEADER_MISMATCH, f"the Mcp-Method header says {method_header[:80]!r} but the body's method "
                         f"is {method[:80]!r}: they must be equal", _request_id(message))
    name_key = NAME_BEARING_METHODS.get(method)
    params = message.get("params")
    value = params.get(name_key) if name_key is not None and isinstance(params, dict) else None
    if name_key is None or not isinstance(value, str):
        return None
    if name_header is None:
        return Rejection(HEADER_MISMATCH, f"the Mcp-Name header is missing: {method} requests carry params.{name_key} "
                         f"in it (here {value[:80]!r})", _request_id(message))
    if decode_header_value(name_header) != value:
        return Rejection(HEADER_MISMATCH, f"the Mcp-Name header says {name_header[:80]!r} but params.{name_key} is "
                         f"{value[:80]!r}: they must be equal", _request_id(message))
    return None
