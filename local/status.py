"""The local status page: where the edge routes, then what the probes found, per probe region and target.

First what an operator looks at first: which regions the edge avoids and since when
(the region-health document in the stack's KeyValueStore, read from the emulator's
file as the local edge reads it), a region x target grid of current health (one
column per probe region and target kind), and the active alerts; then the details.

Read from the results table in the emulator, each probe region's outcomes from that
region's copy (where its consumer writes them), in the layout ``functions/results/store.py`` writes:
``LATEST#<server>`` items (the latest state of each target as seen from each probe
region), ``HISTORY#<server>#<probe region>#<target>`` items (one per outcome) and
``ALERT#<server>`` items (the alerts raised). ``/`` is HTML that refreshes itself;
``/status.json`` is the same snapshot as JSON.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from functions.contract import REGION_HEALTH_KEY, REGION_HEALTH_VERSION
from functions.results.store import alert_pk, history_pk, latest_pk, target_sk_prefix
from local.aws.resources import client
from local.cloudfront.key_value_store import StoreReader
from local.firewall_status import web_acl_blocks, web_acl_section
from local.plan import LocalPlan

PLAN_ENV = "MCPEDGE_LOCAL_PLAN"
HISTORY_POINTS = 30
FAILURES_SHOWN = 3
REFRESH_S = 5
_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class Point:
    at: str
    latency_ms: float | None
    ok: bool


@dataclass(frozen=True)
class Failure:
    at: str
    error_type: str
    message: str
    condition: str


@dataclass(frozen=True)
class TargetStatus:
    probe_region: str
    label: str
    endpoint: str
    status: str
    checked_at: str
    latency_ms: float | None
    tool_count: int | None
    schema_hash: str | None
    served_region: str | None
    consecutive_failures: int
    history: list[Point] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


@dataclass(frozen=True)
class Alert:
    kind: str
    key: str
    state: str
    claimed_at: str


@dataclass(frozen=True)
class AvoidedRegion:
    region: str
    since: str  # when the region-avoided alert was claimed, else when the document was published


@dataclass(frozen=True)
class EdgeRouting:
    """What the edge does with region health: the document in the stack's KeyValueStore."""

    store: bool  # the stack has a region-health store
    readable: bool  # the document is there and well-formed (else the edge fails static)
    published_at: str
    avoided: list[AvoidedRegion]
    fail_static: bool  # nothing is avoided because the document is unreadable or lists every region


@dataclass(frozen=True)
class Snapshot:
    stack: str
    server_id: str
    generated_at: str
    probe_regions: list[str]
    targets: list[TargetStatus]
    alerts: list[Alert]
    regions: list[str] = field(default_factory=list)
    routing: EdgeRouting | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _items(ddb: Any, table: str, pk: str, *, newest_first: bool = False, limit: int | None = None) -> list[dict]:
    kwargs: dict[str, Any] = {
        "TableName": table, "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": pk}}, "ScanIndexForward": not newest_first,
    }
    items: list[dict] = []
    while True:
        if limit is not None:
            kwargs["Limit"] = limit - len(items)
        page = ddb.query(**kwargs)
        items.extend(_plain({k: _deserializer.deserialize(v) for k, v in i.items()}) for i in page.get("Items", []))
        if "LastEvaluatedKey" not in page or (limit is not None and len(items) >= limit):
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _target_status(ddb: Any, table: str, server: str, latest: dict[str, Any]) -> TargetStatus:
    region, label = latest["probeRegion"], latest["label"]
    history = _items(ddb, table, history_pk(server, region, label), newest_first=True, limit=HISTORY_POINTS)
    history.reverse()
    return TargetStatus(
        probe_region=region, label=label, endpoint=str(latest.get("endpoint", "")),
        status=str(latest.get("status", "?")), checked_at=str(latest.get("checkedAt", "")),
        latency_ms=latest.get("latencyMs"), tool_count=latest.get("toolCount"),
        schema_hash=latest.get("schemaHash"), served_region=latest.get("servedRegion"),
        consecutive_failures=int(latest.get("consecutiveFailures", 0)),
        history=[Point(at=str(h.get("sk", "")).split("#")[0], latency_ms=h.get("latencyMs"),
                       ok=h.get("status") != "failed") for h in history],
        failures=[Failure(at=str(h.get("sk", "")).split("#")[0], error_type=str(h.get("errorType") or ""),
                          message=str(h.get("errorMessage") or ""), condition=str(h.get("condition") or ""))
                  for h in reversed(history) if h.get("status") == "failed"][:FAILURES_SHOWN],
    )


def table_clients(plan: LocalPlan) -> dict[str, Any]:
    """A DynamoDB client per region holding a copy of a results table: built once per
    app, not per page view (each boto3 client costs milliseconds to build)."""
    return {region: client(plan, "dynamodb", region) for table in plan.tables for region in table.copy_regions}


def read_snapshot(plan: LocalPlan, clients: Mapping[str, Any] | None = None) -> Snapshot:
    if not plan.tables:
        raise RuntimeError("the program defines no results table to read")
    table = plan.tables[0]
    clients = clients or table_clients(plan)
    server = plan.server_id
    targets = []
    for copy_region in table.copy_regions:
        # Each probe region's consumer writes its outcomes to its own region's copy.
        ddb = clients[copy_region]
        for latest in _items(ddb, table.name, latest_pk(server)):
            if not str(latest.get("sk", "")).startswith(target_sk_prefix(copy_region)):
                continue
            targets.append(_target_status(ddb, table.name, server, latest))
    targets.sort(key=lambda t: (plan.probe_regions.index(t.probe_region) if t.probe_region in plan.probe_regions
                                else 99, t.label.split("@")[0] != "edge", t.label))
    ddb = clients[table.region]  # every consumer claims its alerts in the home region's copy
    alerts = [Alert(kind=str(a.get("kind", "")), key=str(a.get("sk", "")), state=str(a.get("state", "")),
                    claimed_at=dt.datetime.fromtimestamp(int(a.get("claimedAt", 0)), dt.UTC).isoformat())
              for a in _items(ddb, table.name, alert_pk(server))]
    alerts.sort(key=lambda a: a.claimed_at, reverse=True)
    return Snapshot(stack=plan.stack, server_id=server, generated_at=dt.datetime.now(dt.UTC).isoformat(),
                    probe_regions=plan.probe_regions, targets=targets, alerts=alerts, regions=list(plan.regions),
                    routing=edge_routing(plan, alerts))


def edge_routing(plan: LocalPlan, alerts: Sequence[Alert]) -> EdgeRouting:
    """The region-health document as the local edge reads it (the store's file)."""
    if plan.health_store is None:
        return EdgeRouting(store=False, readable=False, published_at="", avoided=[], fail_static=True)
    raw = StoreReader(Path(plan.health_store.file)).get(REGION_HEALTH_KEY)
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = None
    avoid = doc.get("avoid") if isinstance(doc, dict) and doc.get("v") == REGION_HEALTH_VERSION else None
    if not isinstance(avoid, list):
        return EdgeRouting(store=True, readable=False, published_at="", avoided=[], fail_static=True)
    published_at = str(doc.get("at", "")) if isinstance(doc, dict) else ""
    deployed = [r for r in avoid if r in plan.regions]
    every = bool(plan.regions) and set(deployed) >= set(plan.regions)

    def since(region: str) -> str:
        claimed = [a.claimed_at for a in alerts if a.kind == "region-avoided" and a.key.split("#")[1:2] == [region]]
        return max(claimed, default=published_at)

    return EdgeRouting(store=True, readable=True, published_at=published_at, fail_static=every,
                       avoided=[AvoidedRegion(r, since(r)) for r in deployed])


# --- rendering ---------------------------------------------------------------------------


def sparkline(points: Sequence[Point], width: int = 160, height: int = 32) -> str:
    """Latency over time as an inline SVG: a line through successes, red dots for failures."""
    if not points:
        return f'<svg class="spark" width="{width}" height="{height}"></svg>'
    values = [p.latency_ms for p in points if p.ok and p.latency_ms is not None]
    top = max(values, default=1.0) or 1.0
    step = width / max(len(points) - 1, 1)
    line, dots = [], []
    for i, p in enumerate(points):
        x = round(i * step, 1)
        if p.ok and p.latency_ms is not None:
            y = round(height - 2 - (p.latency_ms / top) * (height - 4), 1)
            line.append(f"{x},{y}")
        else:
            dots.append(f'<circle cx="{x}" cy="{height - 3}" r="2.5" fill="#c62828"><title>failed at '
                        f"{html.escape(p.at)}</title></circle>")
    polyline = f'<polyline fill="none" stroke="#1565c0" stroke-width="1.5" points="{" ".join(line)}"/>' if line else ""
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f"<title>max {top:.0f} ms over the last {len(points)} probes</title>{polyline}{''.join(dots)}</svg>")


_STATUS_CLASS = {"healthy": "ok", "degraded": "warn", "failed": "bad"}
_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #ddd;
vertical-align:top}th{background:#f5f5f5}.ok{color:#2e7d32;font-weight:600}.warn{color:#ef6c00;font-weight:600}
.bad{color:#c62828;font-weight:600}code{font-size:12px}.muted{color:#777}.fail{font-size:12px;color:#c62828}
"""


def _overview(snapshot: Snapshot) -> list[str]:
    """What an operator looks at first: where the edge sends viewers, the region x target
    grid of current health, and what is alerting now."""
    e = html.escape
    parts = ["<h2>Edge routing</h2>"]
    routing = snapshot.routing
    if routing is None or not routing.store:
        parts.append("<p class='muted'>This stack has no region-health store: the edge always routes to the "
                     "nearest deployed region.</p>")
    elif not routing.readable:
        parts.append("<p class='warn'>The region-health document is missing or unreadable: the edge fails "
                     "static (routes as if every region were healthy).</p>")
    elif routing.fail_static:
        parts.append("<p class='warn'>Every region is marked down: the edge fails static (routes as if every "
                     "region were healthy).</p>")
    elif routing.avoided:
        parts.append("<table><tr><th>Avoided region</th><th>Since</th></tr>" + "".join(
            f"<tr><td class='bad'>{e(a.region)}</td><td>{e(a.since)}</td></tr>" for a in routing.avoided)
            + "</table>")
    else:
        parts.append(f"<p class='ok'>No region avoided: every viewer goes to its nearest deployed region."
                     f"</p><p class='muted'>Document published {e(routing.published_at)}</p>")

    latest = {(t.probe_region, t.label): t for t in snapshot.targets}
    kinds = ("edge", "origin")
    parts.append("<h2>Health by region</h2><table><tr><th>Region</th>" + "".join(
        f"<th>{e(kind)} from {e(probe)}</th>" for probe in snapshot.probe_regions for kind in kinds) + "</tr>")
    avoided = {a.region for a in routing.avoided} if routing else set()
    for region in snapshot.regions:
        mark = " <span class='bad'>(avoided)</span>" if region in avoided else ""
        cells = []
        for probe in snapshot.probe_regions:
            for kind in kinds:
                t = latest.get((probe, f"{kind}@{region}"))
                status = t.status if t else "-"
                streak = f" ({t.consecutive_failures})" if t and t.consecutive_failures else ""
                cells.append(f"<td class='{_STATUS_CLASS.get(status, 'muted')}'>{e(status)}{e(streak)}</td>")
        parts.append(f"<tr><td><b>{e(region)}</b>{mark}</td>{''.join(cells)}</tr>")
    parts.append("</table>")

    active = [t for t in snapshot.targets if t.status == "failed"]
    parts.append("<h2>Active alerts</h2>")
    if not avoided and not active:
        parts.append("<p class='ok'>None.</p>")
    else:
        parts.append("<ul>" + "".join(f"<li class='bad'>region avoided: {e(r)}</li>" for r in sorted(avoided))
                     + "".join(f"<li class='bad'>down: {e(t.label)} from {e(t.probe_region)} "
                               f"({t.consecutive_failures} in a row)</li>" for t in active) + "</ul>")
    return parts


def render_page(snapshot: Snapshot, links: dict[str, str], sections: Sequence[str] = ()) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<meta http-equiv='refresh' content='{REFRESH_S}'>",
        f"<title>{e(snapshot.server_id)} local status</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(snapshot.server_id)}: local topology of stack <code>{e(snapshot.stack)}</code></h1>",
        "<p class='muted'>" + " · ".join(f"{e(k)}: <a href='{e(v)}'>{e(v)}</a>" for k, v in links.items())
        + f" · refreshed every {REFRESH_S} s · {e(snapshot.generated_at)}</p>",
    ]
    parts += _overview(snapshot)
    if not snapshot.targets:
        parts.append("<p>No probe outcome yet: the first probes run when the topology starts.</p>")
    parts.append("<h2>Details</h2>")
    for region in snapshot.probe_regions:
        rows = [t for t in snapshot.targets if t.probe_region == region]
        parts.append(f"<h3>Probes from {e(region)}</h3>")
        if not rows:
            parts.append("<p class='muted'>No outcome from this region yet.</p>")
            continue
        parts.append("<table><tr><th>Target</th><th>Health</th><th>Latency</th><th>Over time</th>"
                     "<th>Tools</th><th>Schema hash</th><th>Served by</th><th>Latest failures</th></tr>")
        for t in rows:
            css = _STATUS_CLASS.get(t.status, "")
            latency = f"{t.latency_ms:.0f} ms" if t.latency_ms is not None else "-"
            failures = "".join(
                f"<div class='fail'>{e(f.at)} {e(f.error_type)}: {e(f.message[:200])}</div>" for f in t.failures
            ) or "<span class='muted'>none</span>"
            streak = f" ({t.consecutive_failures} in a row)" if t.consecutive_failures else ""
            parts.append(
                f"<tr><td><b>{e(t.label)}</b><br><code class='muted'>{e(t.endpoint)}</code></td>"
                f"<td class='{css}'>{e(t.status)}{e(streak)}<br><span class='muted'>{e(t.checked_at)}</span></td>"
                f"<td>{e(latency)}</td><td>{sparkline(t.history)}</td>"
                f"<td>{'-' if t.tool_count is None else t.tool_count}</td>"
                f"<td><code title='{e(t.schema_hash or '')}'>{e((t.schema_hash or '-')[:12])}</code></td>"
                f"<td>{e(t.served_region or '-')}</td><td>{failures}</td></tr>"
            )
        parts.append("</table>")
    parts.append("<h3>Every alert</h3>")
    if snapshot.alerts:
        parts.append("<table><tr><th>When</th><th>Kind</th><th>Change</th><th>State</th></tr>")
        parts.extend(f"<tr><td>{e(a.claimed_at)}</td><td>{e(a.kind)}</td><td><code>{e(a.key)}</code></td>"
                     f"<td>{e(a.state)}</td></tr>" for a in snapshot.alerts)
        parts.append("</table>")
    else:
        parts.append("<p class='muted'>None.</p>")
    parts.extend(sections)
    parts.append("</body></html>")
    return "".join(parts)


def create_app(plan: LocalPlan | None = None) -> Starlette:
    if plan is None:
        path = os.environ.get(PLAN_ENV)
        if not path:
            raise RuntimeError(f"{PLAN_ENV} is not set: the local runner passes the plan file in it")
        plan = LocalPlan.read(path)
    the_plan = plan
    links = {"edge": the_plan.mcp_url, "issuer": the_plan.issuer.issuer, "json": the_plan.status_url + "status.json"}
    clients = table_clients(the_plan)

    def page(_: Request) -> Response:
        return HTMLResponse(render_page(read_snapshot(the_plan, clients), links, [web_acl_section(the_plan)]),
                            headers={"cache-control": "no-store"})

    def as_json(_: Request) -> Response:
        return JSONResponse({**read_snapshot(the_plan, clients).to_json(), "webAcl": web_acl_blocks(the_plan)},
                            headers={"cache-control": "no-store"})

    def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/", page), Route("/status.json", as_json), Route("/healthz", health)])
