"""Pure state transitions of the results consumer: no AWS, no I/O.

Latest state: one item per (server, target, probe region), evolved by every newer
outcome. It keeps the last known schema hash across failures, so:

- schema drift: a successful outcome whose hash differs from the stored one;
- target down: ``down_after`` consecutive failures (alerted once, until it recovers);
- target recovered: a success after a down alert;
- promise broken: the platform answered what it must refuse (a forged token at the edge,
  an unsigned request at a Function URL), alerted once until a check passes again
  (promise kept); an "unknown" check changes nothing.

Skew: over the latest items one probe region holds for a server, the distinct schema
hashes of recently successful targets; more than one is skew. Skew alerts fire when
the *set of hashes* changes (not on every region that catches up during a rollout),
and once more when the hashes agree again.

Every alert carries a ``dedup_key`` that names the change itself, not who saw it:
every probe region observes the same change, and the key lets the first observer's
alert stand for all of them (see ``store.claim_alert``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from .envelope import ProbeOutcome


@dataclass(frozen=True)
class Alert:
    id: str  # unique per triggering outcome
    kind: str
    dedup_key: str  # the change itself: equal across probe regions
    server_id: str
    subject: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Alert:
        return cls(**{k: str(data[k]) for k in ("id", "kind", "dedup_key", "server_id", "subject", "message")})


def iso_ms(ts: dt.datetime) -> str:
    """UTC, millisecond precision, Z: the form every time in the table takes."""
    return ts.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _short(h: str | None) -> str:
    return h[:12] if h else "none"


def make_alert(kind: str, dedup_key: str, request_id: str, server_id: str, subject: str, lines: list[str], details: dict[str, Any]) -> Alert:
    alert_id = hashlib.sha256(f"{kind}|{dedup_key}|{request_id}".encode()).hexdigest()[:32]
    subject = f"[{server_id}] {subject}"
    # SNS subjects: at most 100 printable ASCII characters, no line breaks.
    subject = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in subject)[:100]
    message = "\n".join([*lines, "", "Details: " + json.dumps(details, sort_keys=True, default=str)])
    return Alert(alert_id, kind, dedup_key, server_id, subject, message)


def is_newer(outcome: ProbeOutcome, latest: dict[str, Any] | None) -> bool:
    if latest is None:
        return True
    return (outcome.epoch_ms, outcome.request_id) > (int(latest["checkedAtMs"]), str(latest["lastRequestId"]))


def evolve_latest(
    previous: dict[str, Any] | None, outcome: ProbeOutcome, *, down_after: int = 2
) -> tuple[dict[str, Any], list[Alert]]:
    """The next latest-state item for ``outcome``'s target, and the alerts the change raises.

    ``previous`` must be older than ``outcome`` (``is_newer``); the caller enforces it.
    """
    assert outcome.target is not None
    target = outcome.target
    prev = previous or {}
    alerts: list[Alert] = []
    when = iso_ms(outcome.timestamp)
    item: dict[str, Any] = {
        "serverId": target.server_id,
        "endpoint": target.endpoint,
        "target": target.target,
        "targetRegion": target.target_region,
        "probeRegion": outcome.probe_region,
        "label": target.label,
        "status": outcome.status,
        "lastRequestId": outcome.request_id,
        "checkedAt": when,
        "checkedAtMs": outcome.epoch_ms,
        "version": int(prev.get("version", 0)) + 1,
        # carried over unless this outcome changes them
        "schemaHash": prev.get("schemaHash"),
        "previousSchemaHash": prev.get("previousSchemaHash"),
        "schemaChangedAt": prev.get("schemaChangedAt"),
        "toolCount": prev.get("toolCount"),
        "lastSuccessAt": prev.get("lastSuccessAt"),
        "lastSuccessMs": prev.get("lastSuccessMs"),
        "consecutiveFailures": int(prev.get("consecutiveFailures", 0)),
        "downAlerted": bool(prev.get("downAlerted", False)),
        "promiseCheck": prev.get("promiseCheck"),
        "promiseStatus": prev.get("promiseStatus"),
        "promiseHttpStatus": prev.get("promiseHttpStatus"),
        "promiseCheckedAt": prev.get("promiseCheckedAt"),
        "promiseBrokenSince": prev.get("promiseBrokenSince"),
        "promiseAlerted": bool(prev.get("promiseAlerted", False)),
    }
    base = {"target": target.label, "endpoint": target.endpoint, "probeRegion": outcome.probe_region, "at": when}
    alerts.extend(_evolve_promise(item, prev, outcome, base, when))

    if outcome.succeeded:
        old_hash = prev.get("schemaHash")
        item.update(
            schemaHash=outcome.schema_hash,
            toolCount=outcome.tool_count,
            latencyMs=outcome.latency_ms,
            era=outcome.era,
            protocolVersion=outcome.protocol_version,
            servedRegion=outcome.served_region,
            httpStatus=outcome.http_status,
            degradedReasons=list(outcome.degraded_reasons) or None,
            lastSuccessAt=when,
            lastSuccessMs=outcome.epoch_ms,
            consecutiveFailures=0,
            downAlerted=False,
            lastErrorType=None,
            lastErrorMessage=None,
        )
        if old_hash and old_hash != outcome.schema_hash:
            item.update(previousSchemaHash=old_hash, schemaChangedAt=when)
            alerts.append(make_alert(
                "schema-drift", f"schema-drift#{old_hash}->{outcome.schema_hash}", outcome.request_id, target.server_id,
                f"schema drift: tools changed at {target.label}",
                [
                    f"The tools advertised by MCP server {target.server_id} changed.",
                    f"First seen at {target.label} ({target.endpoint}) by the probes in {outcome.probe_region} at {when}.",
                    f"Schema hash {_short(old_hash)}... -> {_short(outcome.schema_hash)}..., "
                    f"tool count {prev.get('toolCount')} -> {outcome.tool_count}.",
                    "Expected after a release; otherwise roll back. Other targets making the same change "
                    "are not alerted again.",
                ],
                {**base, "previousSchemaHash": old_hash, "schemaHash": outcome.schema_hash,
                 "previousToolCount": prev.get("toolCount"), "toolCount": outcome.tool_count},
            ))
        if prev.get("downAlerted"):
            alerts.append(make_alert(
                "target-recovered", f"target-recovered#{target.label}", outcome.request_id,
                target.server_id, f"recovered: {target.label} answers again",
                [
                    f"{target.label} ({target.endpoint}) of MCP server {target.server_id} answers again "
                    f"({outcome.status}, {outcome.latency_ms:.0f} ms), seen from {outcome.probe_region} at {when}.",
                    f"It had failed since {prev.get('downSince')}.",
                ],
                {**base, "status": outcome.status, "latencyMs": outcome.latency_ms, "downSince": prev.get("downSince")},
            ))
        item["downSince"] = None
    else:
        failures = int(prev.get("consecutiveFailures", 0)) + 1
        down_since = prev.get("downSince") or when
        item.update(
            consecutiveFailures=failures,
            lastErrorType=outcome.error_type,
            lastErrorMessage=outcome.error_message,
            downSince=down_since,
            latencyMs=None,
        )
        if failures >= down_after and not prev.get("downAlerted"):
            item["downAlerted"] = True
            alerts.append(make_alert(
                "target-down", f"target-down#{target.label}", outcome.request_id, target.server_id,
                f"down: {target.label} fails ({outcome.error_type})",
                [
                    f"{target.label} ({target.endpoint}) of MCP server {target.server_id} failed {failures} probes "
                    f"in a row, seen from {outcome.probe_region}, the latest at {when}.",
                    f"{outcome.error_type}: {outcome.error_message}",
                ],
                {**base, "errorType": outcome.error_type, "errorMessage": outcome.error_message,
                 "consecutiveFailures": failures, "downSince": down_since},
            ))
    return item, alerts


def _evolve_promise(item: dict[str, Any], prev: dict[str, Any], outcome: ProbeOutcome, base: dict[str, Any],
                   when: str) -> list[Alert]:
    """Update ``item``'s promise fields from ``outcome``; the alert a change raises."""
    assert outcome.target is not None
    target, status = outcome.target, outcome.promise_status
    if status is None:
        return []
    item.update(promiseCheck=outcome.promise_check, promiseStatus=status,
                promiseHttpStatus=outcome.promise_http_status, promiseCheckedAt=when)
    what = ("the edge let a forged token (right issuer, audience and expiry, signed by another key) through to "
            "the server"
            if outcome.promise_check == "forged-token" else "the Function URL answered a request without a signature")
    details = {**base, "check": outcome.promise_check, "httpStatus": outcome.promise_http_status,
               "detail": outcome.promise_detail}
    if status == "broken":
        item["promiseBrokenSince"] = prev.get("promiseBrokenSince") or when
        if prev.get("promiseAlerted"):
            return []
        item["promiseAlerted"] = True
        return [make_alert(
            "promise-broken", f"promise-broken#{target.label}#{outcome.promise_check}", outcome.request_id,
            target.server_id, f"SECURITY: {target.label} lets unverified requests through",
            [
                f"At {target.label} ({target.endpoint}) of MCP server {target.server_id}, {what}: "
                f"HTTP {outcome.promise_http_status}, seen from {outcome.probe_region} at {when}.",
                "Requests reach the server without the platform's checks. Find what changed (the edge "
                "function, the Function URL's AuthType, its resource policy) and restore it now.",
                f"{outcome.promise_detail or ''}",
            ],
            details,
        )]
    if status == "pass":
        item["promiseBrokenSince"] = None
        if prev.get("promiseAlerted"):
            item["promiseAlerted"] = False
            return [make_alert(
                "promise-kept", f"promise-kept#{target.label}#{outcome.promise_check}", outcome.request_id,
                target.server_id, f"resolved: {target.label} refuses unverified requests again",
                [f"{target.label} ({target.endpoint}) of MCP server {target.server_id} refuses what it must again "
                 f"(HTTP {outcome.promise_http_status}), seen from {outcome.probe_region} at {when}.",
                 f"It had let them through since {prev.get('promiseBrokenSince')}."],
                {**details, "brokenSince": prev.get("promiseBrokenSince")},
            )]
    return []


# Skew compares the schemas targets answered with lately: a target silent for 5 probe rounds,
# and 15 minutes at least (a short outage is not a removed region), no longer counts.
SKEW_FRESH_FLOOR_S = 15 * 60


def skew_fresh_s(interval_s: int) -> int:
    return max(5 * interval_s, SKEW_FRESH_FLOOR_S)


def skew_view(latest_items: list[dict[str, Any]], now_ms: int, fresh_ms: int) -> dict[str, list[str]]:
    """schema hash -> the target labels serving it (recent successes only)."""
    view: dict[str, list[str]] = {}
    for item in latest_items:
        schema_hash, success_ms = item.get("schemaHash"), item.get("lastSuccessMs")
        if not schema_hash or success_ms is None or now_ms - int(success_ms) > fresh_ms:
            continue  # never answered, or a target gone quiet (removed region, long outage)
        view.setdefault(str(schema_hash), []).append(str(item["label"]))
    return {h: sorted(labels) for h, labels in sorted(view.items())}


def evolve_skew(
    previous: dict[str, Any] | None, view: dict[str, list[str]], *, server_id: str, probe_region: str,
    request_id: str, at: dt.datetime,
) -> tuple[dict[str, Any] | None, list[Alert]]:
    """The next skew-state item (None: unchanged) and the alerts a change of hash set raises."""
    if not view:
        return None, []  # no recent success anywhere: no evidence either way
    hashes = sorted(view)
    prev = previous or {}
    prev_hashes = list(prev.get("hashes") or [])
    prev_skewed = len(prev_hashes) > 1
    skewed = len(hashes) > 1
    alertable = (skewed and hashes != prev_hashes) or (prev_skewed and not skewed)
    if not alertable and prev.get("view") == view and prev_hashes == hashes:
        return None, []
    state = {
        "serverId": server_id,
        "probeRegion": probe_region,
        "hashes": hashes,
        "view": view,
        "skewed": skewed,
        "since": iso_ms(at) if alertable or previous is None else prev.get("since"),
        "version": int(prev.get("version", 0)) + 1,
    }
    if not alertable:
        return state, []
    when = iso_ms(at)
    alerts: list[Alert] = []
    if skewed:
        by_hash = [f"  {_short(h)}...: {', '.join(labels)}" for h, labels in view.items()]
        alerts.append(make_alert(
            "schema-skew", "schema-skew#" + "+".join(hashes), request_id, server_id,
            f"schema skew: {len(hashes)} different tool sets across regions",
            [
                f"Regions of MCP server {server_id} serve different tools (seen from {probe_region} at {when}):",
                *by_hash,
                "Finish deploying every region (pulumi up), or roll back the odd one out.",
            ],
            {"probeRegion": probe_region, "at": when, "view": view},
        ))
    elif prev_skewed:
        alerts.append(make_alert(
            "schema-skew-resolved", "schema-skew-resolved#" + "+".join(prev_hashes), request_id, server_id,
            "schema skew resolved: every region serves the same tools",
            [f"Every region of MCP server {server_id} serves the same tools again (seen from {probe_region} at {when})."],
            {"probeRegion": probe_region, "at": when, "view": view, "previousHashes": prev_hashes},
        ))
    return state, alerts
