"""The status page's trace view and per-tool panel, from what the local topology logs.

- The edge: the origin-request function (the gate) prints one CloudWatch EMF record per
  request (``edge/gate/telemetry.py``) to the edge's log (``logs/edge.log``), as Lambda@Edge
  writes it to CloudWatch Logs: trace id, the edge's span id and its parent (the viewer's),
  the decision, the MCP method and tool, the gate's milliseconds.
- The origin: each region's local Function URL prints one ``span`` line per invocation
  (``local/aws/function_url.py``: the local counterpart of active tracing's segment) to
  ``logs/function-url-<region>.log``, its parent the edge's span (the ``traceparent`` the
  gate sent).
- The server: lines of the origin's own log (``logs/origin-<region>.log``) that name the
  trace id (a server that logs its ``traceparent`` or exports its spans as JSON lines).

``read_traces(log_dir)`` joins them by trace id, newest first; ``tool_calls(log_dir)`` counts
the edge's records of ``tools/call`` per tool and decision (what the dashboard's per-tool
panel sums on AWS), all of them or only the probes' or only the others' (``probes``). Both
read the files afresh on each call and hold no state. Each edge record carries the client
id of the token the gate verified (``mcp.edge.client_id``, null when it verified none) and
its ``Client`` dimension (``probe`` or ``other``): the views show the client and count the
probes' traffic apart, so that it can be told from users'.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edge.gate import telemetry

EDGE_LOG = "edge.log"
FUNCTION_URL_LOG_PREFIX = "function-url-"
ORIGIN_LOG_PREFIX = "origin-"
RECENT_TRACES = 20
MAX_LOG_BYTES = 8 * 1024 * 1024  # the tail of a log read; older lines drop out of the view


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - MAX_LOG_BYTES))
            data = f.read()
    except FileNotFoundError:
        return
    for raw in data.splitlines():
        if not raw.startswith(b"{"):
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            yield line


def edge_records(log_dir: Path) -> list[dict[str, Any]]:
    """The edge's EMF records, oldest first."""
    return [line for line in _json_lines(log_dir / EDGE_LOG) if "_aws" in line and "trace_id" in line]


def origin_spans(log_dir: Path) -> list[dict[str, Any]]:
    """Every region's Function URL invocation spans, oldest first."""
    spans = [line for path in sorted(log_dir.glob(f"{FUNCTION_URL_LOG_PREFIX}*.log")) for line in _json_lines(path)
             if line.get("functionUrl") == "span"]
    return sorted(spans, key=lambda s: s.get("startedAt") or 0)


def _server_lines(log_dir: Path, trace_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(log_dir.glob(f"{ORIGIN_LOG_PREFIX}*.log")):
        for line in _json_lines(path):
            trace_id = line.get("trace_id") or line.get("traceId")
            if trace_id in trace_ids:
                found.setdefault(str(trace_id), []).append({**line, "log": path.stem})
    return found


@dataclass
class Trace:
    """One trace as the local topology saw it: the edge's record, the origin's spans under it
    and the server's own lines."""

    trace_id: str
    edge: dict[str, Any] | None = None
    origin: list[dict[str, Any]] = field(default_factory=list)
    server: list[dict[str, Any]] = field(default_factory=list)

    @property
    def started_ms(self) -> float:
        if self.edge is not None:
            return float(self.edge["_aws"]["Timestamp"])
        return min((float(s["startedAt"]) * 1000 for s in self.origin), default=0.0)

    def to_json(self) -> dict[str, Any]:
        spans: list[dict[str, Any]] = []
        if self.edge is not None:
            e = self.edge
            spans.append({
                "kind": "edge", "spanId": e.get("span_id"), "parentSpanId": e.get("parent_span_id"),
                "name": f"edge {e.get('mcp.method.name') or e.get(telemetry.METHOD_DIMENSION)}",
                "decision": e.get("mcp.edge.decision"), "tool": e.get("gen_ai.tool.name"),
                "originRegion": e.get("mcp.edge.origin_region"), "durationMs": e.get(telemetry.GATE_MILLISECONDS),
                "traceSource": e.get("trace_source"), "client": e.get("mcp.edge.client_id"),
                "probe": e.get(telemetry.CLIENT_DIMENSION) == telemetry.PROBE_CLIENT,
                "at": datetime.fromtimestamp(float(e["_aws"]["Timestamp"]) / 1000, UTC).isoformat(timespec="milliseconds"),
            })
        for s in self.origin:
            spans.append({"kind": "origin", "spanId": s.get("spanId"), "parentSpanId": s.get("parentSpanId"),
                          "name": s.get("name"), "region": s.get("region"), "status": s.get("status"),
                          "durationMs": s.get("durationMs"),
                          "at": datetime.fromtimestamp(float(s["startedAt"]), UTC).isoformat(timespec="milliseconds")})
        spans += [{"kind": "server", **line} for line in self.server]
        return {"traceId": self.trace_id, "spans": spans}


def read_traces(log_dir: str | Path, trace_id: str | None = None, limit: int = RECENT_TRACES) -> list[Trace]:
    """The newest ``limit`` traces (or the one with ``trace_id``), each with its edge record, the
    origin spans under it and the server's lines naming it."""
    log_dir = Path(log_dir)
    traces: dict[str, Trace] = {}
    for record in edge_records(log_dir):
        tid = str(record["trace_id"])
        if trace_id is None or tid == trace_id:
            traces.setdefault(tid, Trace(tid)).edge = record
    for span in origin_spans(log_dir):
        tid = str(span.get("traceId"))
        if (trace_id is None and tid in traces) or tid == trace_id:
            traces.setdefault(tid, Trace(tid)).origin.append(span)
    newest = sorted(traces.values(), key=lambda t: t.started_ms, reverse=True)[:limit]
    server = _server_lines(log_dir, {t.trace_id for t in newest})
    for t in newest:
        t.server = server.get(t.trace_id, [])
    return newest


def is_probe(record: dict[str, Any]) -> bool:
    """Whether the gate verified the record's token as the probes' client's."""
    return record.get(telemetry.CLIENT_DIMENSION) == telemetry.PROBE_CLIENT


def tool_calls(log_dir: str | Path, probes: bool | None = None) -> dict[str, dict[str, int]]:
    """Tool name -> decision -> the edge's records of ``tools/call`` of it, since the topology
    started: every record, or (``probes``) only the probes' or only everyone else's."""
    counts: dict[str, dict[str, int]] = {}
    for record in edge_records(Path(log_dir)):
        tool = record.get("gen_ai.tool.name")  # the real name (the metric's dimension may say "other")
        if isinstance(tool, str) and (probes is None or is_probe(record) == probes):
            decision = str(record.get(telemetry.DECISION_DIMENSION))
            by_decision = counts.setdefault(tool, {})
            by_decision[decision] = by_decision.get(decision, 0) + 1
    return dict(sorted(counts.items()))


def tools_section(log_dir: str | Path) -> str:
    """The per-tool panel: calls per tool by the edge's decision."""
    e = html.escape
    counts, probes = tool_calls(log_dir, probes=False), tool_calls(log_dir, probes=True)
    parts = ["<h2>Tools</h2><p class='muted'>tools/call requests the edge saw since the topology started, by its "
             "decision (the edge function's EMF records; on AWS the dashboard's per-tool panels), without the "
             "probes' calls, which are counted apart (their token verified as the probes' client).</p>"]
    if not counts and not probes:
        return "".join([*parts, "<p class='muted'>No tool call yet.</p>"])
    decisions = [d for d in telemetry.DECISIONS if any(d in c for c in counts.values())]
    parts.append("<table><tr><th>Tool</th>" + "".join(f"<th>{e(d)}</th>" for d in decisions)
                 + "<th>probes</th></tr>")
    for tool in sorted({*counts, *probes}):
        by_decision = counts.get(tool, {})
        parts.append(f"<tr><td><code>{e(tool)}</code></td>"
                     + "".join(f"<td>{by_decision.get(d, 0)}</td>" for d in decisions)
                     + f"<td>{sum(probes.get(tool, {}).values())}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _client_cell(edge: dict[str, Any]) -> str:
    """The verified client of an edge span, marked when it is the probes'; else unverified
    (or the probes' forged-token check, their real token verified beside it)."""
    if edge.get("client") is None:
        return "<span class='muted'>unverified</span>" + (" (probe check)" if edge.get("probe") else "")
    if not edge["client"]:
        return "<span class='muted'>verified, no client id</span>"  # a token with neither client_id nor azp
    return f"<code>{html.escape(str(edge['client']))}</code>" + (" (probe)" if edge.get("probe") else "")


def traces_section(log_dir: str | Path, limit: int = 10) -> str:
    """The trace view: the last requests, each with its edge and origin spans."""
    e = html.escape
    parts = ["<h2>Traces</h2><p class='muted'>The last requests through the edge, by W3C trace id: the edge "
             "function's span and the origin invocation's under it (<code>/traces/&lt;trace id&gt;</code> has every "
             "span, with the server's own log lines naming the trace).</p>"]
    traces = read_traces(log_dir, limit=limit)
    if not traces:
        return "".join([*parts, "<p class='muted'>No request yet.</p>"])
    parts.append("<table><tr><th>Trace</th><th>Edge</th><th>Client</th><th>Origin</th></tr>")
    for trace in traces:
        doc = trace.to_json()
        edge = next((s for s in doc["spans"] if s["kind"] == "edge"), None)
        origin = [s for s in doc["spans"] if s["kind"] == "origin"]
        edge_cell = (f"{e(str(edge['name']))}{' ' + e(str(edge['tool'])) if edge.get('tool') else ''}: "
                     f"{e(str(edge['decision']))} ({edge['durationMs']} ms)") if edge else "-"
        origin_cell = "<br>".join(f"{e(str(s['region']))} {s['status']} ({s['durationMs']} ms)" for s in origin) or "-"
        client_cell = "-" if edge is None else _client_cell(edge)
        parts.append(f"<tr><td><a href='/traces/{e(trace.trace_id)}'><code>{e(trace.trace_id)}</code></a></td>"
                     f"<td>{edge_cell}</td><td>{client_cell}</td><td>{origin_cell}</td></tr>")
    parts.append("</table>")
    return "".join(parts)
