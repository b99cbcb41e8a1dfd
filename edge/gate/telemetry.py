"""What the edge tells operators about each request (standard library only).

- Trace context (W3C Trace Context): the viewer's ``traceparent`` header is continued
  when it is well formed; otherwise the ``params._meta.traceparent`` of the request's
  (single) JSON-RPC message, which MCP clients may carry there; otherwise a new trace
  starts. The origin receives a ``traceparent`` with the same trace id and the edge's own
  span id (and the viewer's ``tracestate`` only beside a viewer traceparent that was
  kept). A trace id is a correlation handle a viewer chooses: it never decides anything
  and is never an identity.
- One CloudWatch embedded metric format (EMF) record per request, printed as one JSON
  line (Lambda@Edge writes it to the log group of the region it ran in, where CloudWatch
  extracts the metrics): ``Requests`` and ``GateMilliseconds`` in ``NAMESPACE`` by
  ``ServerId`` + ``Decision``, and ``Requests`` alone by ``ServerId`` + ``Method`` +
  ``Decision`` and, for ``tools/call``, ``ServerId`` + ``Tool`` + ``Decision``. Every
  distinct dimension value is a custom metric billed by the month, and the names come
  from the viewer's body: ``Method`` is one of the methods MCP defines (else ``other``)
  and ``Tool`` one the stack names (``metric_tools``: the dashboard's tool panels; else
  ``other``), so no client can mint metrics; ``Requests`` by ``ServerId`` + ``Client`` +
  ``Decision`` tells the probes' traffic apart (``Client`` is ``probe`` for a request whose
  verified token was issued to the probes' client, else ``other``: two values, never a
  client id, so no client can mint a metric here either; a 401 is ``probe`` too when the
  probes' own token, verified, came beside it: their forged-token check, marked
  ``mcp.edge.probe_check``). ``Refusals`` (4xx answered at the edge)
  and ``EdgeErrors`` (5xx) are members of the record, not metrics (the ``Decision``
  dimension already tells them apart). The record's other members follow
  OpenTelemetry's MCP semantic conventions (``mcp.method.name``, ``gen_ai.tool.name``
  with the real names, ``jsonrpc.request.id``, ``mcp.protocol.version``) plus the
  decision, the trace ids and ``mcp.edge.client_id`` (the verified client id, null when
  the gate verified no token), for log queries.

The body is never parsed here: the gate parses it once, strictly
(``mcp_request.jsonrpc_calls``), and records what it authorized on the request's
``Observation`` (``Observation.authorized``: the calls, whether a batch, the verified
client id). A record names a method, a tool and a client only from there, so the metrics
cannot name a tool the gate did not read (a body with duplicate members is refused, and
its record names no tool), and a request refused before that point (401, 400, 413) is
recorded by its HTTP method alone, its client ``other``. The ``_meta.traceparent`` of a
single message, too, comes from the gate's parse; the ``traceparent`` toward the origin is
set after the gate decided (``continue_trace``): it is not among the signed headers.
"""

from __future__ import annotations

import json
import os
import re
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from .mcp_request import Call

NAMESPACE = "McpEdge"
SERVER_DIMENSION = "ServerId"
DECISION_DIMENSION = "Decision"
METHOD_DIMENSION = "Method"
TOOL_DIMENSION = "Tool"
CLIENT_DIMENSION = "Client"
PROBE_CLIENT = "probe"  # the Client dimension of a request whose verified token is the probes'
REQUESTS = "Requests"
REFUSALS = "Refusals"
EDGE_ERRORS = "EdgeErrors"
GATE_MILLISECONDS = "GateMilliseconds"
# Every decision the edge records: forwarded, metadata served, or the refusal's reason.
DECISIONS = ("allowed", "metadata", "400", "401", "403_scope", "403", "404", "405", "413", "415", "502", "503")
# 403_scope: a step-up (insufficient_scope); 403: any other (a preflight from an origin not allowed).
REFUSAL_DECISIONS = ("400", "401", "403_scope", "403", "404", "405", "413", "415")
ERROR_DECISIONS = ("502", "503")
# The methods MCP's revisions define, client to server: the Method dimension's values.
MCP_METHODS = frozenset({
    "initialize", "ping", "server/discover", "tools/list", "tools/call", "resources/list", "resources/read",
    "resources/templates/list", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "completion/complete", "logging/setLevel", "notifications/initialized", "notifications/cancelled",
    "notifications/progress", "notifications/roots/list_changed", "tasks/get", "tasks/result", "tasks/list",
    "tasks/cancel",
})
OTHER = "other"  # the dimension value of a method, tool or client the metrics do not name
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_SAMPLED = 0x01
_CREDENTIAL_REGION = re.compile(r"Credential=[^/,]+/\d{8}/([a-z0-9-]+)/")
_TARGET_FACT = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "resource"}
_MAX_PROPERTY = 256  # a property value longer than this is cut: records stay small


class TraceContext:
    """A W3C trace context: ``trace_id`` (32 hex), ``parent_id`` (16 hex), ``flags``."""

    __slots__ = ("trace_id", "parent_id", "flags")

    def __init__(self, trace_id: str, parent_id: str, flags: int):
        self.trace_id = trace_id
        self.parent_id = parent_id
        self.flags = flags

    def header(self) -> str:
        return f"00-{self.trace_id}-{self.parent_id}-{self.flags:02x}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TraceContext) and self.header() == other.header()

    def __repr__(self) -> str:
        return f"TraceContext({self.header()!r})"


def parse_traceparent(value: Any) -> TraceContext | None:
    """The context of a ``traceparent`` value, or None when it is not valid per W3C Trace
    Context: lower-case hex fields, version not ``ff``, version ``00`` exactly 55
    characters (a later version may append ``-``-separated fields), trace id and parent
    id not all zeros."""
    if not isinstance(value, str):
        return None
    value = value.strip(" \t")
    match = _TRACEPARENT.match(value)
    if match is None:
        return None
    version, trace_id, parent_id, flags = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    if len(value) != 55 and (version == "00" or value[55] != "-"):
        return None
    return TraceContext(trace_id, parent_id, int(flags, 16))


# os.urandom is what secrets.token_hex reads; importing secrets (and random) is not the floor.
def new_span_id() -> str:
    while True:
        span = os.urandom(8).hex()
        if span != _ZERO_SPAN:
            return span


def new_trace_id() -> str:
    while True:
        trace = os.urandom(16).hex()
        if trace != _ZERO_TRACE:
            return trace


def _header_values(headers: Mapping[str, Any], name: str) -> list[str]:
    entries = headers.get(name)
    if not isinstance(entries, list):
        return []
    return [e["value"] for e in entries if isinstance(e, dict) and isinstance(e.get("value"), str)]


class Observation:
    """What the edge knows of one request: the viewer's trace context (continued or new),
    the span the edge opens, the protocol version header, and what the gate recorded
    (``authorized``): the calls it parsed, whether a batch, the verified client id."""

    def __init__(self, parent: TraceContext | None, span_id: str, started: float,
                 protocol_version: str | None = None):
        self.parent = parent
        self.source = "header" if parent is not None else "new"  # then "meta" (continue_trace)
        self.trace_id = parent.trace_id if parent is not None else new_trace_id()
        self.flags = parent.flags if parent is not None else _SAMPLED
        self.span_id = span_id
        self.started = started
        self.protocol_version = protocol_version
        self.calls: Sequence[Call] = ()
        self.batch = False
        self.client_id: str | None = None  # None: no verified token
        self.probe_check = False  # a 401 the probes' verified token beside it marks as their check

    def authorized(self, calls: Sequence[Call], batch: bool, client_id: str) -> None:
        """What the gate parsed (strictly) and whose verified token it was."""
        self.calls = calls
        self.batch = batch
        self.client_id = client_id

    @property
    def facts(self) -> dict[str, Any]:
        return mcp_facts(self.calls, self.batch, self.protocol_version)

    @property
    def outgoing(self) -> TraceContext:
        """The context the origin receives: this trace, the edge's span as its parent."""
        return TraceContext(self.trace_id, self.span_id, self.flags)


def mcp_facts(calls: Sequence[Call], batch: bool, protocol_version: str | None = None) -> dict[str, Any]:
    """The MCP facts of the calls the gate parsed: the method, the tool (``tools/call``),
    resource or prompt named, the JSON-RPC id, the protocol version (the header, else
    ``initialize``'s ``protocolVersion``) and the batch size."""
    facts: dict[str, Any] = {}
    if protocol_version is not None:
        facts["protocol_version"] = protocol_version
    if batch:
        facts["batch_size"] = len(calls)
        return facts
    if len(calls) != 1:
        return facts
    call = calls[0]
    if call.method is not None:
        facts["method"] = call.method
    request_id = call.request_id
    if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
        facts["request_id"] = str(request_id)
    if call.target is not None:
        facts[_TARGET_FACT.get(call.method or "", "target")] = call.target
    if call.protocol_version is not None:
        facts.setdefault("protocol_version", call.protocol_version)
    return facts


def begin(request: dict[str, Any], now: float | None = None) -> Observation:
    """Read the request's trace context header and protocol version (never the body: the
    gate parses that); a ``tracestate`` beside no valid ``traceparent`` is dropped."""
    headers: dict[str, Any] = request.setdefault("headers", {})
    sent = _header_values(headers, TRACEPARENT)
    parent = parse_traceparent(sent[0]) if len(sent) == 1 else None
    if parent is None:
        headers.pop(TRACESTATE, None)  # a tracestate belongs to the traceparent beside it
    versions = _header_values(headers, "mcp-protocol-version")
    version = versions[0].strip(" \t") if len(versions) == 1 else None
    return Observation(parent, new_span_id(), time.perf_counter() if now is None else now, version)


def continue_trace(observation: Observation, request: dict[str, Any]) -> None:
    """Without a valid ``traceparent`` header, continue the ``params._meta.traceparent`` of
    the single message the gate parsed, if valid; then set the ``traceparent`` the origin
    receives (viewer-sent copies replaced). Not a signed header, so this follows signing."""
    if observation.parent is None and not observation.batch and len(observation.calls) == 1:
        meta = parse_traceparent(observation.calls[0].traceparent)
        if meta is not None:
            observation.parent, observation.source = meta, "meta"
            observation.trace_id, observation.flags = meta.trace_id, meta.flags
    headers: dict[str, Any] = request.setdefault("headers", {})
    headers[TRACEPARENT] = [{"key": TRACEPARENT, "value": observation.outgoing.header()}]


def decision_of(result: Mapping[str, Any]) -> str:
    """``allowed`` for a request forwarded to the origin, else what the edge answered."""
    if "status" not in result:
        return "allowed"
    status = str(result["status"])
    if status in ("200", "204"):  # the metadata document, or its CORS preflight
        return "metadata"
    if status == "403":
        challenge = _header_values(result.get("headers", {}), "www-authenticate")
        return "403_scope" if challenge and "insufficient_scope" in challenge[0] else "403"
    return status


def served_region(result: Mapping[str, Any]) -> str | None:
    """The region of the origin a forwarded request goes to: its SigV4 credential scope."""
    if "status" in result:
        return None
    values = _header_values(result.get("headers", {}), "authorization")
    match = _CREDENTIAL_REGION.search(values[0]) if values else None
    return match.group(1) if match else None


def server_id(config: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> str:
    """The ``ServerId`` dimension: the rendered ``server_id``, else the function's name
    without the ``us-east-1.`` prefix Lambda@Edge gives its replicas."""
    configured = config.get("server_id")
    if isinstance(configured, str) and configured:
        return configured
    return environ.get("AWS_LAMBDA_FUNCTION_NAME", "unknown").removeprefix("us-east-1.")


def _cut(value: str) -> str:
    return value if len(value) <= _MAX_PROPERTY else value[:_MAX_PROPERTY]


def client_of(client_id: str | None, probe_client_id: str) -> str:
    """The ``Client`` dimension: ``probe`` for the probes' verified client, else ``other``."""
    return PROBE_CLIENT if probe_client_id and client_id == probe_client_id else OTHER


def record(observation: Observation, result: Mapping[str, Any], server_id: str, *,
           http_method: str = "POST", metric_tools: frozenset[str] = frozenset(), probe_client_id: str = "",
           now: float | None = None, timestamp_ms: int | None = None,
           environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The EMF record of one request, as a JSON-ready dict."""
    facts = observation.facts
    decision = decision_of(result)
    elapsed_ms = ((time.perf_counter() if now is None else now) - observation.started) * 1000
    method = facts.get("method") or ("batch" if "batch_size" in facts else f"http:{http_method.upper()}")
    if "method" in facts and method not in MCP_METHODS:
        method = OTHER
    by_call = [[SERVER_DIMENSION, METHOD_DIMENSION, DECISION_DIMENSION],
               [SERVER_DIMENSION, CLIENT_DIMENSION, DECISION_DIMENSION]]
    document: dict[str, Any] = {
        SERVER_DIMENSION: server_id,
        DECISION_DIMENSION: decision,
        METHOD_DIMENSION: _cut(method),
        CLIENT_DIMENSION: PROBE_CLIENT if observation.probe_check else client_of(observation.client_id,
                                                                                 probe_client_id),
        REQUESTS: 1,
        REFUSALS: 1 if decision in REFUSAL_DECISIONS else 0,
        EDGE_ERRORS: 1 if decision in ERROR_DECISIONS else 0,
        GATE_MILLISECONDS: round(elapsed_ms, 3),
        "mcp.edge.decision": decision,
        "trace_id": observation.trace_id,
        "span_id": observation.span_id,
        "trace_source": observation.source,
        "http.request.method": http_method.upper(),
        # Only ever a verified token's client (null: none verified), so a forged claim names nobody.
        "mcp.edge.client_id": None if observation.client_id is None else _cut(observation.client_id),
    }
    if observation.probe_check:
        document["mcp.edge.probe_check"] = True
    if observation.parent is not None:
        document["parent_span_id"] = observation.parent.parent_id
    if "method" in facts:
        document["mcp.method.name"] = _cut(facts["method"])
    if "tool" in facts:
        document[TOOL_DIMENSION] = facts["tool"] if facts["tool"] in metric_tools else OTHER
        document["gen_ai.tool.name"] = _cut(facts["tool"])
        document["gen_ai.operation.name"] = "execute_tool"
        by_call.append([SERVER_DIMENSION, TOOL_DIMENSION, DECISION_DIMENSION])
    if "prompt" in facts:
        document["gen_ai.prompt.name"] = _cut(facts["prompt"])
    if "resource" in facts:
        document["mcp.resource.uri"] = _cut(facts["resource"])
    if "request_id" in facts:
        document["jsonrpc.request.id"] = _cut(facts["request_id"])
    if "protocol_version" in facts:
        document["mcp.protocol.version"] = _cut(facts["protocol_version"])
    if "batch_size" in facts:
        document["jsonrpc.batch.size"] = facts["batch_size"]
    if (region := served_region(result)) is not None:
        document["mcp.edge.origin_region"] = region
    if environ.get("AWS_REGION"):
        document["cloud.region"] = environ["AWS_REGION"]  # where this edge function ran
    document["_aws"] = {
        "Timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
        "CloudWatchMetrics": [
            {"Namespace": NAMESPACE, "Dimensions": [[SERVER_DIMENSION, DECISION_DIMENSION]],
             "Metrics": [{"Name": REQUESTS, "Unit": "Count"}, {"Name": GATE_MILLISECONDS, "Unit": "Milliseconds"}]},
            {"Namespace": NAMESPACE, "Dimensions": by_call, "Metrics": [{"Name": REQUESTS, "Unit": "Count"}]},
        ],
    }
    return document


# What json.dumps(..., separators=(",", ":")) builds on every call, built once.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def emit(observation: Observation, result: Mapping[str, Any], server_id: str, http_method: str = "POST",
         metric_tools: frozenset[str] = frozenset(), probe_client_id: str = "") -> None:
    """Print the request's EMF record as one line; a failure to build it never fails the request."""
    try:
        line = _COMPACT_JSON.encode(record(observation, result, server_id, http_method=http_method,
                                           metric_tools=metric_tools, probe_client_id=probe_client_id))
    except (TypeError, ValueError) as exc:
        line = json.dumps({"edge_gate_telemetry_error": str(exc)[:200]})
    print(line, flush=True)
