"""The local status page: where the edge routes, then what the probes found, per probe region and target.

First what an operator looks at first: which regions the edge avoids and since when
(the region-health document in the stack's KeyValueStore, read from the emulator's
file as the local edge reads it), a region x target grid of current health (one
column per probe region and target kind), and the active alerts; then the details.

Read from the results table in the emulator, each probe region's outcomes from that
region's copy (where its consumer writes them), in the layout ``functions/results/store.py`` writes:
``LATEST#<server>`` items (the latest state of each target as seen from each probe
region), ``HISTORY#<server>#<probe region>#<target>`` items (one per outcome) and
``ALERT#<server>`` items (the alert claims: one per change, in the home region's
copy, marked ``sent`` once the consumer published it to the alert topic), and the
region-health streaks (``HEALTH#<server>#<origin region>``) for the recovery progress
of avoided regions.

"Active alerts" are the alerts that went out and are not resolved yet, one line per
event: a region's outage (its targets' down alerts and its region-avoided alert
together, naming the probe regions whose latest outcome still fails), a schema skew,
or a schema drift (an event with nothing to resolve it: listed for the dedup window
of its claim). ``/`` is HTML that refreshes itself; ``/status.json`` is the same
snapshot as JSON.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import json
import os
import secrets
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio.to_thread
from boto3.dynamodb.types import TypeDeserializer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from functions.contract import REGION_HEALTH_KEY, REGION_HEALTH_VERSION
from functions.results.contract import HEALTH_RECOVERY_ROUNDS_DEFAULT, ConsumerEnv, majority
from functions.results.store import alert_pk, health_pk, history_pk, latest_pk, streak_sk_prefix, target_sk_prefix
from local.aws.resources import client
from local.cloudfront.key_value_store import StoreReader
from local.control import ControlError, control_socket_in
from local.control import request as control_request
from local.faults import MODES
from local.firewall_status import web_acl_blocks, web_acl_section
from local.plan import LocalPlan
from local.traces import read_traces, tool_calls, tools_section, traces_section

PLAN_ENV = "MCPEDGE_LOCAL_PLAN"
HISTORY_POINTS = 30
FAILURES_SHOWN = 3
REFRESH_S = 5
OPERATOR_TIMEOUT_S = 2.0  # a page view does not wait for a restore in progress
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
    """One alert claim: ``state`` is ``sent`` once the consumer published it to the topic."""

    kind: str
    key: str
    state: str
    claimed_at: str
    expires_at: str = ""  # the end of its dedup window

    @property
    def sent(self) -> bool:
        return self.state == "sent"


@dataclass(frozen=True)
class Recovery:
    """An avoided region's way back: ``rounds`` successful rounds seen by a quorum of
    probe regions, of the ``needed`` that restore it."""

    rounds: int
    needed: int


@dataclass(frozen=True)
class AvoidedRegion:
    region: str
    since: str  # when the region-avoided alert was claimed, else when the document was published
    recovery: Recovery | None = None  # probes green again, not yet restored


@dataclass(frozen=True)
class ActiveEvent:
    """One thing an operator was alerted about and that is not over: every alert sent for it."""

    kind: str  # outage | schema-skew | schema-drift
    subject: str  # the origin region of an outage; the change of a drift or skew
    since: str
    alerts: list[str]  # what was sent for it, e.g. "down: origin@eu-west-1", "region avoided"
    seen_from: list[str] = field(default_factory=list)  # probe regions whose latest outcome still fails
    recovery: Recovery | None = None
    until: str = ""  # a drift: listed until its dedup window ends


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
    active: list[ActiveEvent] = field(default_factory=list)

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


def _iso(epoch_s: Any) -> str:
    return dt.datetime.fromtimestamp(int(epoch_s or 0), dt.UTC).isoformat()


def health_settings(plan: LocalPlan) -> tuple[int, int]:
    """(quorum, recovery rounds) as the results consumers run with (their environment)."""
    for fn in plan.functions:
        env = fn.environment
        if ConsumerEnv.HEALTH_PROBE_REGIONS in env:
            voters = [r for r in env[ConsumerEnv.HEALTH_PROBE_REGIONS].split(",") if r]
            # 0 or unset: a majority, as the consumer reads it
            quorum = int(env.get(ConsumerEnv.HEALTH_QUORUM) or 0) or majority(len(voters))
            return quorum, int(env.get(ConsumerEnv.HEALTH_RECOVERY_THRESHOLD) or HEALTH_RECOVERY_ROUNDS_DEFAULT)
    return majority(len(plan.probe_regions)), HEALTH_RECOVERY_ROUNDS_DEFAULT


def recovery_progress(successes: Mapping[str, Mapping[str, int]], quorum: int, needed: int) -> Recovery | None:
    """How far an avoided region is on its way back, from each probe region's success
    streaks per target (``{probe region: {target: successes}}``).

    A probe region votes *up* when every target it probes has succeeded ``needed``
    rounds in a row, so its progress is its smallest streak; the region is restored
    when ``quorum`` probe regions vote up, so the region's progress is the streak the
    ``quorum``-th best probe region has reached. None while no quorum sees any success.
    """
    per_probe = sorted((min(targets.values()) for targets in successes.values() if targets), reverse=True)
    if quorum < 1 or len(per_probe) < quorum or per_probe[quorum - 1] <= 0:
        return None
    return Recovery(rounds=min(per_probe[quorum - 1], needed), needed=needed)


def _target_region(label: str) -> str:
    return label.rsplit("@", 1)[-1]


def active_events(alerts: Sequence[Alert], targets: Sequence[TargetStatus], now: str,
                  recovering: Mapping[str, Recovery] | None = None) -> list[ActiveEvent]:
    """The alerts that were sent and are not resolved, one event per outage, skew or drift.

    Resolved: a target's down alert by a later recovered alert for the same target, a
    region-avoided alert by a later region-restored one, a skew by a later skew-resolved
    (or a skew between other hashes, which is its own event). A drift has nothing that
    resolves it and is listed until its claim's dedup window ends (``now`` compared to
    ``expires_at``, both ISO 8601 UTC).
    """
    sent = [a for a in alerts if a.sent]

    def latest(prefix: str, rest: str) -> Alert | None:
        matching = [a for a in sent if a.key.startswith(prefix) and a.key[len(prefix):].startswith(rest)]
        return max(matching, key=lambda a: a.claimed_at, default=None)

    outages: dict[str, list[tuple[str, str]]] = {}  # origin region -> (since, what was sent)
    for alert in sent:
        if alert.kind == "target-down":
            label = alert.key.split("#", 1)[1]
            recovered = max((a for a in sent if a.key == f"target-recovered#{label}"),
                            key=lambda a: a.claimed_at, default=None)
            if recovered is None or recovered.claimed_at < alert.claimed_at:
                outages.setdefault(_target_region(label), []).append((alert.claimed_at, f"down: {label}"))
        elif alert.kind == "region-avoided":
            region = alert.key.split("#")[1]
            newest = latest("region-avoided#", region + "#")
            restored = latest("region-restored#", region + "#")
            if newest is alert and (restored is None or restored.claimed_at < alert.claimed_at):
                outages.setdefault(region, []).append((alert.claimed_at, "region avoided"))
    events = []
    for region, sent_for in outages.items():
        failing = sorted({t.probe_region for t in targets
                          if t.status == "failed" and _target_region(t.label) == region})
        events.append(ActiveEvent(
            kind="outage", subject=region, since=min(since for since, _ in sent_for),
            alerts=sorted({what for _, what in sent_for}, key=lambda w: (w == "region avoided", w)),
            seen_from=failing, recovery=(recovering or {}).get(region)))
    skews = [a for a in sent if a.kind in ("schema-skew", "schema-skew-resolved")]
    newest_skew = max(skews, key=lambda a: a.claimed_at, default=None)
    if newest_skew is not None and newest_skew.kind == "schema-skew":
        events.append(ActiveEvent(kind="schema-skew", subject=newest_skew.key.split("#", 1)[1],
                                  since=newest_skew.claimed_at, alerts=["schema skew"]))
    for alert in sent:
        if alert.kind == "schema-drift" and (not alert.expires_at or alert.expires_at > now):
            events.append(ActiveEvent(kind="schema-drift", subject=alert.key.split("#", 1)[1],
                                      since=alert.claimed_at, alerts=["schema drift"], until=alert.expires_at))
    events.sort(key=lambda e: (e.kind != "outage", e.since))
    return events


def _streak_successes(plan: LocalPlan, clients: Mapping[str, Any], table: str, region: str) -> dict[str, dict[str, int]]:
    """{probe region: {target: successes}} for one origin region, each probe region's
    streaks read in its own copy of the table, where its consumer writes them."""
    found: dict[str, dict[str, int]] = {}
    home = plan.tables[0].region
    for probe in plan.probe_regions:
        ddb = clients.get(probe) or clients[home]
        items = [i for i in _items(ddb, table, health_pk(plan.server_id, region))
                 if str(i.get("sk", "")).startswith(streak_sk_prefix(probe))]
        if items:
            found[probe] = {str(i.get("target", "")): int(i.get("successes", 0)) for i in items}
    return found


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
                    claimed_at=_iso(a.get("claimedAt")),
                    expires_at=_iso(a["expiresAt"]) if a.get("expiresAt") is not None else "")
              for a in _items(ddb, table.name, alert_pk(server))]
    alerts.sort(key=lambda a: a.claimed_at, reverse=True)
    routing = edge_routing(plan, alerts)
    if routing.avoided:
        quorum, needed = health_settings(plan)
        recovering = {a.region: recovery_progress(_streak_successes(plan, clients, table.name, a.region),
                                                  quorum, needed) for a in routing.avoided}
        routing = dataclasses.replace(routing, avoided=[dataclasses.replace(a, recovery=recovering[a.region])
                                                        for a in routing.avoided])
    now = dt.datetime.now(dt.UTC).isoformat()
    return Snapshot(stack=plan.stack, server_id=server, generated_at=now,
                    probe_regions=plan.probe_regions, targets=targets, alerts=alerts, regions=list(plan.regions),
                    routing=routing,
                    active=active_events(alerts, targets, now,
                                         {a.region: a.recovery for a in routing.avoided if a.recovery}))


def first_publication(at: str) -> str:
    """``at`` of the region-health document, or "" for the placeholder the program seeds
    before any consumer published (the Unix epoch)."""
    try:
        when = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return at
    return "" if when.timestamp() <= 0 else at


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
    published_at = first_publication(str(doc.get("at", ""))) if isinstance(doc, dict) else ""
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
# Region names never break (a browser may break "eu-west-1" at its hyphens); long
# endpoints and error messages do, anywhere, so no table outgrows a 1280 px window.
_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}h1{font-size:1.3em}
h2{font-size:1.1em;margin-top:1.5em}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #ddd;vertical-align:top}th{background:#f5f5f5}
.ok{color:#2e7d32;font-weight:600}.warn{color:#ef6c00;font-weight:600}.bad{color:#c62828;font-weight:600}
code{font-size:12px}.muted{color:#777}.fail{font-size:12px;color:#c62828;overflow-wrap:anywhere}
.region,.when{white-space:nowrap}.endpoint{overflow-wrap:anywhere}.recovering{color:#ef6c00;font-weight:600}
form{display:inline}li{margin:2px 0}
"""


def _region(name: str) -> str:
    return f"<span class='region'>{html.escape(name)}</span>"


def _recovery(recovery: Recovery | None) -> str:
    if recovery is None:
        return "<span class='bad'>down</span>"
    return f"<span class='recovering'>recovering ({recovery.rounds} of {recovery.needed} rounds)</span>"


def _event(event: ActiveEvent, probe_regions: int) -> str:
    e = html.escape
    sent = "<span class='muted'>sent: " + ", ".join(_region(a) for a in event.alerts) + "</span>"
    if event.kind == "outage":
        if event.seen_from:
            seen = (f"failing from {len(event.seen_from)} of {probe_regions} probe regions ("
                    + ", ".join(_region(r) for r in event.seen_from) + ")")
        else:
            seen = "probes green again"
        state = f" · {_recovery(event.recovery)}" if event.recovery else ""
        return (f"<span class='bad'>outage: {_region(event.subject)}</span> since {e(event.since)} · {seen}"
                f"{state} · {sent}")
    if event.kind == "schema-skew":
        return (f"<span class='warn'>schema skew</span>: regions serve different tools "
                f"(<code>{e(event.subject)}</code>) since {e(event.since)} · {sent}")
    return (f"<span class='warn'>schema drift</span>: <code>{e(event.subject)}</code> at {e(event.since)}"
            f" <span class='muted'>(listed until {e(event.until)})</span> · {sent}")


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
        parts.append("<table><tr><th>Avoided region</th><th>Since</th><th>State</th></tr>" + "".join(
            f"<tr><td class='bad'>{_region(a.region)}</td><td>{e(a.since or 'not published yet')}</td>"
            f"<td>{_recovery(a.recovery)}</td></tr>" for a in routing.avoided) + "</table>")
    else:
        published = (f"Document published {e(routing.published_at)}" if routing.published_at
                     else "Document not published yet: no consumer has changed it since the stack was created")
        parts.append(f"<p class='ok'>No region avoided: every viewer goes to its nearest deployed region."
                     f"</p><p class='muted'>{published}</p>")

    latest = {(t.probe_region, t.label): t for t in snapshot.targets}
    kinds = ("edge", "origin")
    parts.append("<h2>Health by region</h2><table><tr><th>Region</th>" + "".join(
        f"<th>{e(kind)} from {_region(probe)}</th>" for probe in snapshot.probe_regions for kind in kinds) + "</tr>")
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
        parts.append(f"<tr><td><b>{_region(region)}</b>{mark}</td>{''.join(cells)}</tr>")
    parts.append("</table>")

    parts.append("<h2>Active alerts</h2>")
    if not snapshot.active:
        parts.append("<p class='ok'>None: no alert sent is unresolved.</p>")
    else:
        parts.append("<ul>" + "".join(f"<li>{_event(event, len(snapshot.probe_regions))}</li>"
                                      for event in snapshot.active) + "</ul>")
    return parts


@dataclass(frozen=True)
class OperatorView:
    """The operator section: fail or restore a region through the running ``up``."""

    regions: list[str]
    faults: dict[str, str]  # region -> mode
    form_token: str  # in every form: a page from elsewhere cannot post one
    available: str = ""  # why the running topology cannot be asked, when it cannot
    message: str = ""  # the answer to the last action


def _operator(view: OperatorView) -> list[str]:
    e = html.escape
    parts = ["<h2>Operator</h2>"]
    if view.message:
        parts.append(f"<p><b>{e(view.message)}</b></p>")
    if view.available:
        parts.append(f"<p class='muted'>Fail and restore are unavailable: {e(view.available)}</p>")
        return parts
    token = f"<input type='hidden' name='token' value='{e(view.form_token)}'>"
    rows = []
    for region in view.regions:
        if region in view.faults:
            action = (f"<form method='post' action='/operator/restore'>{token}"
                      f"<input type='hidden' name='region' value='{e(region)}'><button>Restore</button></form>")
            state = f"<span class='bad'>failed ({e(view.faults[region])})</span>"
        else:
            options = "".join(f"<option>{m}</option>" for m in MODES)
            action = (f"<form method='post' action='/operator/fail'>{token}"
                      f"<input type='hidden' name='region' value='{e(region)}'><select name='mode'>{options}</select> "
                      f"<button>Fail</button></form>")
            state = "<span class='ok'>running</span>"
        rows.append(f"<tr><td>{_region(region)}</td><td>{state}</td><td>{action}</td></tr>")
    parts.append("<p class='muted'>As <code>scripts/run-local fail REGION --mode MODE</code> and <code>restore "
                 "REGION</code>: stop refuses connections, error answers 502, hang accepts and never answers.</p>"
                 "<table><tr><th>Origin</th><th>State</th><th>Action</th></tr>" + "".join(rows) + "</table>")
    return parts


def render_page(snapshot: Snapshot, links: dict[str, str], operator: OperatorView | None = None,
                sections: Sequence[str] = ()) -> str:
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
    if operator is not None:
        parts += _operator(operator)
    if not snapshot.targets:
        parts.append("<p>No probe outcome yet: the first probes run when the topology starts.</p>")
    parts.append("<h2>Details</h2>")
    for region in snapshot.probe_regions:
        rows = [t for t in snapshot.targets if t.probe_region == region]
        parts.append(f"<h3>Probes from {_region(region)}</h3>")
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
                f"<tr><td><b class='region'>{e(t.label)}</b><br><code class='muted endpoint'>{e(t.endpoint)}</code></td>"
                f"<td class='{css}'>{e(t.status)}{e(streak)}<br><span class='muted when'>{e(t.checked_at)}</span></td>"
                f"<td>{e(latency)}</td><td>{sparkline(t.history)}</td>"
                f"<td>{'-' if t.tool_count is None else t.tool_count}</td>"
                f"<td><code title='{e(t.schema_hash or '')}'>{e((t.schema_hash or '-')[:12])}</code></td>"
                f"<td>{_region(t.served_region or '-')}</td><td>{failures}</td></tr>"
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


class OperatorActions:
    """The operator section's forms, passed on to the running ``up`` over its control socket."""

    def __init__(self, control: Path, status_url: str, regions: Sequence[str]):
        self.control = control
        own = status_url.rstrip("/")
        self.own_origins = {own, own.replace("//127.0.0.1:", "//localhost:")}
        self.regions = list(regions)
        self.form_token = secrets.token_urlsafe(16)

    def view(self, message: str = "") -> OperatorView:
        try:
            answer = control_request(self.control, {"op": "faults"}, timeout_s=OPERATOR_TIMEOUT_S)
        except ControlError as exc:
            return OperatorView(self.regions, {}, self.form_token, available=str(exc), message=message)
        faults = {str(f["region"]): str(f["mode"]) for f in answer.get("faults", [])}
        return OperatorView(self.regions, faults, self.form_token, message=message)

    async def act(self, request: Request) -> Response:
        # Loopback is reachable from any page the browser shows: only this page's own
        # forms (same origin, carrying its token) may fail a region.
        origin = request.headers.get("origin")
        form = {k: v[-1] for k, v in urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        if (origin is not None and origin not in self.own_origins) or not secrets.compare_digest(
                form.get("token", "").encode(), self.form_token.encode()):
            return PlainTextResponse("refused: post the status page's own form (reload it)", status_code=403)
        op = request.url.path.rsplit("/", 1)[-1]
        payload = {"op": op, "region": form.get("region", "")}
        if op == "fail":
            payload["mode"] = form.get("mode", "stop")
        try:
            answer = await anyio.to_thread.run_sync(lambda: control_request(self.control, payload))
            message = str(answer["message"] if answer.get("ok") else "refused: " + str(answer.get("error")))
        except ControlError as exc:
            message = str(exc)
        return RedirectResponse("/?" + urllib.parse.urlencode({"done": message}), status_code=303)

    def routes(self) -> list[Route]:
        return [Route("/operator/fail", self.act, methods=["POST"]), Route("/operator/restore", self.act,
                                                                           methods=["POST"])]


def create_app(plan: LocalPlan | None = None) -> Starlette:
    if plan is None:
        path = os.environ.get(PLAN_ENV)
        if not path:
            raise RuntimeError(f"{PLAN_ENV} is not set: the local runner passes the plan file in it")
        plan = LocalPlan.read(path)
    the_plan = plan
    links = {"edge": the_plan.mcp_url, "issuer": the_plan.issuer.issuer, "json": the_plan.status_url + "status.json"}
    clients = table_clients(the_plan)
    operator = OperatorActions(control_socket_in(the_plan.run_dir), the_plan.status_url, the_plan.regions)

    log_dir = Path(the_plan.run_dir) / "logs"

    def page(request: Request) -> Response:
        view = operator.view(request.query_params.get("done", ""))
        return HTMLResponse(render_page(read_snapshot(the_plan, clients), links, view,
                                        [web_acl_section(the_plan), tools_section(log_dir), traces_section(log_dir)]),
                            headers={"cache-control": "no-store"})

    def as_json(_: Request) -> Response:
        return JSONResponse({**read_snapshot(the_plan, clients).to_json(), "webAcl": web_acl_blocks(the_plan),
                             "tools": tool_calls(log_dir)},
                            headers={"cache-control": "no-store"})

    def recent_traces(_: Request) -> Response:
        return JSONResponse({"traces": [t.to_json() for t in read_traces(log_dir)]},
                            headers={"cache-control": "no-store"})

    def one_trace(request: Request) -> Response:
        found = read_traces(log_dir, trace_id=request.path_params["trace_id"].lower())
        if not found:
            return JSONResponse({"error": "no such trace in the local logs"}, status_code=404)
        return JSONResponse(found[0].to_json(), headers={"cache-control": "no-store"})

    def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/", page), Route("/status.json", as_json), Route("/healthz", health),
                             Route("/traces", recent_traces), Route("/traces/{trace_id}", one_trace),
                             *operator.routes()])
