"""What the edge reads from a viewer's request, as pure functions (standard library only).

- ``request_body``: the origin-request event's ``body`` (include-body) as the exact bytes
  CloudFront forwards; a truncated or oversized body is refused (``BodyRefusedError``),
  because it could be neither hashed for SigV4 nor checked for scopes.
- ``check_media_type``: a body is JSON in UTF-8 (RFC 8259 8.1), as its headers declare it
  (``MediaTypeRefusedError``, 415, otherwise): exactly one ``Content-Type``, media type
  ``application/json``, no parameter but ``charset=utf-8``, no ``Content-Encoding`` but
  ``identity``. An origin decodes the bytes as the headers say (a ``charset=utf-7`` body
  reads ``+AGE-dmin`` as ``admin``), so the gate forwards only bodies whose declared
  decoding is the one it read them with.
- ``jsonrpc_calls``: the JSON-RPC messages of a POST body, strictly: UTF-8 (no BOM), no
  duplicate member names, no NaN/Infinity, so that no other JSON parser (the origin's)
  can read a different method or tool name out of the same bytes. A batch (a JSON
  array) is checked call by call: it needs the scopes of every call in it.
- ``check_batch``: a batch is refused when the request states a revision after
  2025-03-26 (2025-06-18 dropped batching); 2025-03-26, whose servers MUST accept
  batches, and no ``MCP-Protocol-Version`` at all (which means 2025-03-26) pass.
- ``check_mcp_headers``: ``Mcp-Method``/``Mcp-Name`` (2026-07-28) against the body. They
  are never trusted alone: when present they must equal the body's values, and a
  2026-07-28 request that names a tool, resource or prompt must send both.
  Handshake-era clients send neither; the body decides.
- ``bearer_token``: the one ``Authorization: Bearer`` token of a request.
- ``scopes_needed``: the base scopes plus each scoped call's.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

MAX_BODY_BYTES = 1024 * 1024  # Lambda@Edge's include-body limit for origin-request
# Methods whose target (a tool, a resource, a prompt) can need scopes of its own, and
# the member of ``params`` that names it (what ``Mcp-Name`` mirrors).
NAMED_METHODS = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
# The first protocol version whose requests carry Mcp-Method/Mcp-Name.
HEADER_ERA = "2026-07-28"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
VERSION_HEADER = "mcp-protocol-version"
# The revision whose servers MUST accept JSON-RPC batches (added there, dropped in
# 2025-06-18); a request without MCP-Protocol-Version is taken to speak it.
BATCH_REVISION = "2025-03-26"
# JSON-RPC error codes the edge answers with.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
HEADER_MISMATCH = -32020  # HeaderMismatch (SEP-2243), as the SDKs and the conformance suite use it
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*)")
_OWS = " \t"  # RFC 9110 5.5: optional whitespace around a field value
_ENCODED = re.compile(r"=\?base64\?([A-Za-z0-9+/]*={0,2})\?=")


class BodyRefusedError(Exception):
    """The body cannot be forwarded: ``status`` 413 (too large or truncated) or 400."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code


class MediaTypeRefusedError(Exception):
    """A body that is not declared as UTF-8 JSON (415); ``headers`` for the answer
    (``Accept-Encoding`` when a content coding is the problem, RFC 9110 15.5.16)."""

    def __init__(self, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.headers = headers or {}


class RequestRefusedError(Exception):
    """A JSON-RPC body or its headers the edge refuses with 400: ``code`` is the JSON-RPC
    error code, ``request_id`` the single request's id when there is one."""

    def __init__(self, code: int, message: str, request_id: Any = None):
        super().__init__(message)
        self.code = code
        self.request_id = request_id


class BearerError(Exception):
    """An ``Authorization`` header was sent but is not exactly one bearer token."""


class Call:
    """One JSON-RPC message of a body: its ``method`` (None for a response), the
    ``target`` of a named method (tool or prompt name, resource URI) and its ``id``; for
    the edge's telemetry (which reads the body only through this parse), the
    ``params._meta.traceparent`` and ``initialize``'s ``params.protocolVersion`` when
    they are strings."""

    __slots__ = ("method", "target", "request_id", "traceparent", "protocol_version")

    def __init__(self, method: str | None, target: str | None = None, request_id: Any = None,
                 traceparent: str | None = None, protocol_version: str | None = None):
        self.method = method
        self.target = target
        self.request_id = request_id
        self.traceparent = traceparent
        self.protocol_version = protocol_version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Call) and (self.method, self.target, self.request_id) == (
            other.method, other.target, other.request_id)

    def __repr__(self) -> str:
        return f"Call({self.method!r}, {self.target!r}, {self.request_id!r})"


def request_body(body: Any, max_bytes: int = MAX_BODY_BYTES) -> bytes:
    """The bytes CloudFront forwards for an include-body ``body`` field (absent: none)."""
    if body is None:
        return b""
    if not isinstance(body, dict):
        raise BodyRefusedError(400, INVALID_REQUEST, "request body field is not an object")
    if body.get("inputTruncated") is True:
        raise BodyRefusedError(413, INVALID_REQUEST, f"request body larger than {max_bytes} bytes")
    data = body.get("data", "")
    if not isinstance(data, str):
        raise BodyRefusedError(400, INVALID_REQUEST, "request body data is not a string")
    if body.get("encoding", "base64") == "base64":
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BodyRefusedError(400, INVALID_REQUEST, "request body is not valid base64") from None
    else:
        raw = data.encode("utf-8")
    if len(raw) > max_bytes:
        raise BodyRefusedError(413, INVALID_REQUEST, f"request body larger than {max_bytes} bytes")
    return raw


ACCEPTED_MEDIA_TYPE = "application/json"
ACCEPTED_CHARSET = "utf-8"
ACCEPTED = f"{ACCEPTED_MEDIA_TYPE} in UTF-8 (no charset parameter, or charset=utf-8; no Content-Encoding)"
CONTENT_TYPE_HEADER = "content-type"
CONTENT_ENCODING_HEADER = "content-encoding"
# RFC 9110 5.6.2 (token), 5.6.4 (quoted-string), 5.6.6 (parameters), 8.3.1 (media type).
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_TYPE = re.compile(rf"({_TOKEN})/({_TOKEN})")
_PARAMETER = re.compile(rf'[ \t]*;[ \t]*(?:({_TOKEN})=({_TOKEN}|"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]'
                        rf'|\\[\t \x21-\x7e\x80-\xff])*"))?')
_QUOTED_PAIR = re.compile(r"\\(.)")


def parse_media_type(value: str) -> tuple[str, list[tuple[str, str]]] | None:
    """A ``Content-Type`` value as its lower-cased ``type/subtype`` and its parameters
    (lower-cased names, values unquoted, in order); None when it is not one media type
    (RFC 9110 8.3.1). Optional whitespace around the value is not part of it."""
    value = value.strip(_OWS)
    match = _TYPE.match(value)
    if match is None:
        return None
    media_type = f"{match.group(1)}/{match.group(2)}".lower()
    parameters: list[tuple[str, str]] = []
    position = match.end()
    while position < len(value):
        match = _PARAMETER.match(value, position)
        if match is None or match.end() == position:
            return None
        position = match.end()
        name, raw = match.group(1), match.group(2)
        if name is None:
            continue  # an empty parameter (";;"), which the grammar allows
        if raw.startswith('"'):
            raw = _QUOTED_PAIR.sub(r"\1", raw[1:-1])
        parameters.append((name.lower(), raw))
    return media_type, parameters


def encoded(content_encodings: list[str]) -> bool:
    """Whether ``Content-Encoding`` values name a coding other than ``identity``."""
    return any(c.strip(_OWS).lower() not in ("", "identity") for value in content_encodings for c in value.split(","))


def media_type_problem(content_types: list[str], content_encodings: list[str]) -> str | None:
    """Why a body with these ``Content-Type`` and ``Content-Encoding`` values is not
    declared as UTF-8 JSON, or None when it is."""
    if encoded(content_encodings):
        return f"Content-Encoding {', '.join(content_encodings)[:60]!r} is not decoded at the edge"
    if not content_types:
        return "a body needs a Content-Type"
    if len(content_types) > 1:
        return "more than one Content-Type"
    parsed = parse_media_type(content_types[0])
    if parsed is None:
        return f"Content-Type {content_types[0][:60]!r} is not a media type"
    media_type, parameters = parsed
    if media_type != ACCEPTED_MEDIA_TYPE:
        return f"Content-Type {media_type[:60]!r} is not {ACCEPTED_MEDIA_TYPE}"
    for name, value in parameters:
        if name != "charset":
            return f"Content-Type parameter {name[:30]!r} is not accepted"
        if value.lower() != ACCEPTED_CHARSET:
            return f"charset {value[:30]!r} is not {ACCEPTED_CHARSET} (JSON is UTF-8, RFC 8259)"
    if len(parameters) > 1:
        return "more than one charset"
    return None


def check_media_type(headers: Mapping[str, Any], body: bytes) -> None:
    """``MediaTypeRefusedError`` unless a non-empty body is declared as UTF-8 JSON (the
    module docstring's rule); an empty body has nothing to decode. A body without any
    ``Content-Type`` is refused too: a recipient may then sniff its type (RFC 9110 8.3),
    and only a declared type makes the origin's reading the gate's."""
    if not body:
        return
    encodings = header_values(headers, CONTENT_ENCODING_HEADER)
    problem = media_type_problem(header_values(headers, CONTENT_TYPE_HEADER), encodings)
    if problem is not None:
        raise MediaTypeRefusedError(f"{problem}: the edge accepts {ACCEPTED}",
                                    {"accept-encoding": "identity"} if encoded(encodings) else None)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("duplicate member name")
    return document


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# What json.loads(text, object_pairs_hook=..., parse_constant=...) builds on every call, built once.
_STRICT_JSON = json.JSONDecoder(object_pairs_hook=_unique_members, parse_constant=_no_constant)


def _message_call(message: Any) -> Call:
    if not isinstance(message, dict):
        return Call(None)
    request_id = message.get("id")
    method = message.get("method")
    if method is None:
        return Call(None, None, request_id)  # a response (or not JSON-RPC: the origin says so)
    if not isinstance(method, str):
        raise RequestRefusedError(INVALID_REQUEST, "method is not a string", request_id)
    params = message.get("params")
    traceparent = version = None
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
            traceparent = meta["traceparent"]
        if method == "initialize" and isinstance(params.get("protocolVersion"), str):
            version = params["protocolVersion"]
    member = NAMED_METHODS.get(method)
    if member is None:
        return Call(method, None, request_id, traceparent, version)
    target = params.get(member) if isinstance(params, dict) else None
    if not isinstance(target, str):
        raise RequestRefusedError(INVALID_PARAMS, f"{method} needs params.{member} as a string", request_id)
    return Call(method, target, request_id, traceparent, version)


def jsonrpc_calls(body: bytes) -> tuple[list[Call], bool]:
    """The messages of a POST body and whether it was a batch; an empty body has none.
    ``RequestRefusedError`` for bytes that are not strict JSON or not JSON-RPC enough to
    tell a call's method and target."""
    if not body:
        return [], False
    try:
        document = _STRICT_JSON.decode(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RequestRefusedError(PARSE_ERROR, f"body is not strict JSON: {str(exc)[:120]}") from None
    if isinstance(document, list):
        if not document:
            raise RequestRefusedError(INVALID_REQUEST, "empty batch")
        return [_message_call(message) for message in document], True
    call = _message_call(document)
    return [call], False


def header_values(headers: Mapping[str, Any], name: str) -> list[str]:
    """Every value of a header in CloudFront's ``{name: [{key, value}]}`` shape."""
    entries = headers.get(name)
    if not isinstance(entries, list):
        return []
    return [entry["value"] for entry in entries
            if isinstance(entry, dict) and isinstance(entry.get("value"), str)]


def _single_header(headers: Mapping[str, Any], name: str) -> str | None:
    values = header_values(headers, name)
    if len(values) > 1:
        raise RequestRefusedError(HEADER_MISMATCH, f"more than one {name} header")
    return values[0].strip(_OWS) if values else None


def decoded_header_value(value: str) -> str:
    """A header value, with the ``=?base64?...?=`` form (for values a header cannot carry
    as they are) decoded; ``RequestRefusedError`` when that form does not decode."""
    encoded = _ENCODED.fullmatch(value)
    if encoded is None:
        return value
    try:
        return base64.b64decode(encoded.group(1), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise RequestRefusedError(HEADER_MISMATCH, "Mcp-Name is not valid base64 UTF-8") from None


def header_era(headers: Mapping[str, Any]) -> bool:
    """Whether the request states a protocol version that carries Mcp-Method/Mcp-Name."""
    values = header_values(headers, VERSION_HEADER)
    return len(values) == 1 and values[0].strip(_OWS) >= HEADER_ERA


def check_batch(headers: Mapping[str, Any], batch: bool) -> None:
    """``RequestRefusedError`` (invalid request) for a batch that states a revision after
    ``BATCH_REVISION``; the revisions that have batches (or an earlier or no version,
    which the origin answers) pass."""
    if not batch:
        return
    version = _single_header(headers, VERSION_HEADER)
    if version is not None and version > BATCH_REVISION:
        raise RequestRefusedError(INVALID_REQUEST, f"JSON-RPC batches are not part of MCP {version[:40]} (only "
                                  f"{BATCH_REVISION} has them): send each message as its own POST")


def check_mcp_headers(headers: Mapping[str, Any], calls: list[Call], batch: bool) -> None:
    """``RequestRefusedError`` (HeaderMismatch) unless ``Mcp-Method``/``Mcp-Name`` agree
    with the body. Present headers must equal the values of every message in the body
    (so a batch of different calls cannot carry them); a request of the header era must
    send ``Mcp-Method`` for a method, and ``Mcp-Name`` for a named method."""
    method = _single_header(headers, METHOD_HEADER)
    name = _single_header(headers, NAME_HEADER)
    if name is not None:
        name = decoded_header_value(name)
    required = header_era(headers)
    only_id = calls[0].request_id if len(calls) == 1 and not batch else None
    for call in calls:
        if method is not None and method != call.method:
            raise RequestRefusedError(HEADER_MISMATCH, f"Mcp-Method {method!r} does not match the body's "
                                      f"{call.method!r}", only_id)
        if name is not None and name != call.target:
            raise RequestRefusedError(HEADER_MISMATCH, "Mcp-Name does not match the body", only_id)
        if required and call.method is not None and method is None:
            raise RequestRefusedError(HEADER_MISMATCH, f"{HEADER_ERA} requests need Mcp-Method", only_id)
        if required and call.target is not None and name is None:
            raise RequestRefusedError(HEADER_MISMATCH, f"{HEADER_ERA} {call.method} requests need Mcp-Name",
                                      only_id)
    if not calls and (method is not None or name is not None):
        raise RequestRefusedError(HEADER_MISMATCH, "Mcp-Method/Mcp-Name sent without a JSON-RPC body")


def bearer_token(headers: Mapping[str, Any]) -> str | None:
    """The request's bearer token; None when no ``Authorization`` header was sent;
    ``BearerError`` when one was but is not exactly one header with one bearer token."""
    values = header_values(headers, "authorization")
    if not values and "authorization" not in headers:
        return None
    if len(values) != 1:
        raise BearerError("exactly one Authorization header is allowed")
    match = _BEARER.fullmatch(values[0].strip(_OWS))
    if match is None:
        raise BearerError("Authorization is not one Bearer token")
    return match.group(1)


def scopes_needed(calls: Iterable[Call], base: Iterable[str],
                  scoped: Mapping[str, Mapping[str, Iterable[str]]]) -> frozenset[str]:
    """The base scopes and, for each call of a scoped method, its target's scopes."""
    needed = set(base)
    for call in calls:
        if call.method is not None and call.target is not None:
            needed.update(scoped.get(call.method, {}).get(call.target, ()))
    return frozenset(needed)


def granted_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """OAuth scopes of verified claims: ``scope`` (space-separated, RFC 9068) or ``scp``."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str))
    if isinstance(scp, str):
        return frozenset(scp.split())
    return frozenset()


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(resource_metadata: str, error: str | None = None, scope: Iterable[str] | None = None) -> str:
    """A ``WWW-Authenticate: Bearer`` value with the RFC 9728 ``resource_metadata``."""
    params = []
    if error is not None:
        params.append(f"error={_quoted(error)}")
    if scope is not None:
        params.append(f"scope={_quoted(' '.join(sorted(scope)))}")
    params.append(f"resource_metadata={_quoted(resource_metadata)}")
    return "Bearer " + ", ".join(params)


_HEADER_SAFE = frozenset(chr(c) for c in range(0x20, 0x7F)) - {"%"}
_ALL_HEADER_SAFE = re.compile(r"[\x21-\x24\x26-\x7e]([\x20-\x24\x26-\x7e]*[\x21-\x24\x26-\x7e])?")


def header_safe(value: str) -> str:
    """``value`` as a header value: printable ASCII as is, anything else (and ``%``, and a
    leading or trailing space, which HTTP would trim) percent-encoded as UTF-8, so that no
    claim can break, forge or alter a header."""
    if _ALL_HEADER_SAFE.fullmatch(value):
        return value  # the common case, in one compiled match: nothing to encode
    out = [ch if ch in _HEADER_SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
           for ch in value]
    if out and out[0] == " ":
        out[0] = "%20"
    if out and out[-1] == " ":
        out[-1] = "%20"
    return "".join(out)
