"""Region health from probe outcomes: pure logic, no AWS, no I/O.

The edge routes around the origin regions listed in one CloudFront KeyValueStore
document (key ``REGION_HEALTH_KEY``)::

    {"v":1,"avoid":["eu-west-1"],"at":"2026-11-29T10:02:03.456Z"}

Every results consumer (one per probe region) derives the next document from the
same evidence, relative to the document currently published:

**Streaks.** Per (probe region, origin region, target), where the target is ``edge``
(through CloudFront, pinned to the origin region) or ``origin`` (the Function URL
directly), the consecutive failures and successes of the newest outcomes
(``evolve_streak``; SQS does not keep order, so an older outcome changes nothing).

**Votes.** A probe region votes an origin region *down* when either of its two
targets for it has failed ``failure_threshold`` consecutive rounds, and *up* when
every target it has fresh evidence for has succeeded ``recovery_threshold``
consecutive rounds (both, normally); otherwise it abstains. Only evidence newer than
the published document (its ``at``) and younger than ``vote_max_age_ms`` counts: a
probe region whose schedules stopped, or a replica still catching up on outcomes the
published decision already took into account, has no say.

**Quorum and hysteresis.** A region not avoided is avoided when at least ``quorum``
probe regions vote it down and fewer than ``quorum`` vote it up; an avoided region is
restored when at least ``quorum`` vote it up and fewer than ``quorum`` vote it down.
Anything else leaves the published state as it is. With the default quorum (a
majority of the probe regions) one probe region that lost its own network, and so
sees every other region fail, can never take a healthy region out.

**Whose copy.** Each consumer reads the streaks from its own region's replica, where
the other probe regions' streaks arrive by replication, about a second after their
consumers wrote them. When the round that completes a quorum reaches every consumer
within that second, none sees the quorum there; so a consumer whose own vote is for a
change its replica's votes do not carry (``awaits_others``) reads the other probe
regions' streaks where their consumers write them, and decides on the newest copy of
each (``newest``). The last of them to write its streak then sees every other one.

**Only what can be true.** Outcomes for an origin region the stack does not deploy
(``origin_regions``) count for nothing and the document never lists one, so it stays
within the store's 1 KB whatever the probes report. An outcome stamped later than the
consumer's clock counts as of now (``evolve_streak``): a stamp in the future would
otherwise hide every real outcome after it and keep its vote fresh for as long, as a
streak already stored with one does not (``vote``).

Failing static (every region avoided, or the document missing or unreadable) is the
edge's job; the document can list every region and stays within the store's 1 KB
per item for the whole AWS region catalog.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .contract import (
    HEALTH_FAILURE_ROUNDS_DEFAULT,
    HEALTH_RECOVERY_ROUNDS_DEFAULT,
    PROBE_INTERVAL_S_DEFAULT,
    REGION_HEALTH_KEY,
    REGION_HEALTH_VERSION,
    TARGET_KINDS,
)
from .state import Alert, iso_ms, make_alert

# CloudFront KeyValueStore: key + value at most 1 KB (UTF-8 bytes).
MAX_ITEM_BYTES = 1024
TARGETS = TARGET_KINDS
_REGION = re.compile(r"[a-z0-9-]{1,32}")  # as envelope.py accepts a target region

Vote = Literal["down", "up"]
Transition = Literal["avoid", "restore"]

# A round's outcome may arrive up to the probe's timeout (30 s by default) after the round began
# (a hanging target), so evidence from the last minute votes however short the interval.
VOTE_MAX_AGE_FLOOR_S = 60


def vote_max_age_s(interval_s: int) -> int:
    """Evidence older than this has no vote: 3 probe rounds, at least a minute."""
    return max(3 * interval_s, VOTE_MAX_AGE_FLOOR_S)


@dataclass(frozen=True)
class HealthSettings:
    probe_regions: tuple[str, ...]
    quorum: int
    failure_threshold: int = HEALTH_FAILURE_ROUNDS_DEFAULT
    recovery_threshold: int = HEALTH_RECOVERY_ROUNDS_DEFAULT
    vote_max_age_ms: int = vote_max_age_s(PROBE_INTERVAL_S_DEFAULT) * 1000
    # The origin regions the stack deploys (empty: not known, every region counts).
    origin_regions: tuple[str, ...] = ()

    def deploys(self, region: str) -> bool:
        return not self.origin_regions or region in self.origin_regions

    def __post_init__(self) -> None:
        n = len(self.probe_regions)
        if n == 0:
            raise ValueError("at least one probe region is needed to vote on region health")
        if len(set(self.probe_regions)) != n:
            raise ValueError(f"probe regions {', '.join(self.probe_regions)} list a region twice")
        if not 1 <= self.quorum <= n:
            raise ValueError(f"quorum {self.quorum} must be between 1 and the number of probe regions ({n})")
        if self.failure_threshold < 1 or self.recovery_threshold < 1:
            raise ValueError("failure and recovery thresholds must be at least 1")
        if self.vote_max_age_ms < 1:
            raise ValueError("the maximum vote age must be positive")


# --- streaks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Streak:
    """One (probe region, origin region, target) streak, as the table holds it."""

    probe_region: str
    origin_region: str
    target: str  # edge | origin
    failures: int  # consecutive, newest first
    successes: int
    checked_ms: int  # time of the newest outcome counted
    request_id: str

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Streak:
        return cls(
            str(item["probeRegion"]), str(item["originRegion"]), str(item["target"]),
            int(item.get("failures", 0)), int(item.get("successes", 0)),
            int(item["checkedAtMs"]), str(item["lastRequestId"]),
        )


def evolve_streak(
    previous: dict[str, Any] | None,
    *,
    probe_region: str,
    origin_region: str,
    target: str,
    succeeded: bool,
    at: dt.datetime,
    request_id: str,
    now: dt.datetime,
) -> dict[str, Any] | None:
    """The next streak item for one outcome, or None when the outcome is not newer than
    the one the item counted last (a redelivery, or SQS delivering out of order).

    An outcome stamped after ``now`` (a probe's clock, or a forged envelope) counts as of
    ``now``: kept in the future, its stamp would make every real outcome before it look
    old. A stored stamp in the future orders nothing: the next outcome counts."""
    at = min(at, now)
    at_ms, now_ms = int(at.timestamp() * 1000), int(now.timestamp() * 1000)
    prev = previous or {}
    if previous is not None:
        prev_ms, prev_id = int(prev["checkedAtMs"]), str(prev["lastRequestId"])
        if request_id == prev_id or (prev_ms <= now_ms and (at_ms, request_id) <= (prev_ms, prev_id)):
            return None
    failures, successes = int(prev.get("failures", 0)), int(prev.get("successes", 0))
    return {
        "probeRegion": probe_region,
        "originRegion": origin_region,
        "target": target,
        "failures": 0 if succeeded else failures + 1,
        "successes": successes + 1 if succeeded else 0,
        "checkedAt": iso_ms(at),
        "checkedAtMs": at_ms,
        "lastRequestId": request_id,
        "pendingAlerts": dict(prev.get("pendingAlerts") or {}),
        "version": int(prev.get("version", 0)) + 1,
    }


# --- votes and the decision ---------------------------------------------------------------


def evidence_since(doc: HealthDoc, settings: HealthSettings, now_ms: int) -> int:
    """Only evidence newer than this counts: the published decision's time, unless that
    lies further in the future than any clock skew explains (a hand-edited document must
    not freeze every decision until then)."""
    return 0 if doc.at_ms > now_ms + settings.vote_max_age_ms else doc.at_ms


def vote(streaks: Iterable[Streak], settings: HealthSettings, *, now_ms: int, since_ms: int) -> Vote | None:
    """One probe region's vote on one origin region, from its streaks for it. A streak
    stamped further in the future than clock skew explains has no say, as the published
    document's own time has none (``evidence_since``)."""
    fresh = [s for s in streaks if s.checked_ms > since_ms
             and abs(now_ms - s.checked_ms) <= settings.vote_max_age_ms]
    if not fresh:
        return None
    if any(s.failures >= settings.failure_threshold for s in fresh):
        return "down"
    if all(s.successes >= settings.recovery_threshold for s in fresh):
        return "up"
    return None


def newest(streaks: Iterable[Streak]) -> list[Streak]:
    """One streak per (probe region, target), the one that counted the newest outcome
    (``evolve_streak``'s order), from copies of the same items read in several places
    (this region's replica of the table, and the copy its probe region's consumer writes)."""
    best: dict[tuple[str, str], Streak] = {}
    for s in streaks:
        key = (s.probe_region, s.target)
        if key not in best or (s.checked_ms, s.request_id) > (best[key].checked_ms, best[key].request_id):
            best[key] = s
    return list(best.values())


@dataclass(frozen=True)
class Tally:
    down: tuple[str, ...]  # probe regions voting the region down
    up: tuple[str, ...]


def tally(streaks: Iterable[Streak], settings: HealthSettings, *, now_ms: int, since_ms: int) -> Tally:
    """Every probe region's vote on one origin region (streaks of other probe regions than
    the configured ones do not count)."""
    by_probe: dict[str, list[Streak]] = {}
    for s in streaks:
        if s.probe_region in settings.probe_regions and s.target in TARGETS:
            by_probe.setdefault(s.probe_region, []).append(s)
    votes = {p: vote(ss, settings, now_ms=now_ms, since_ms=since_ms) for p, ss in sorted(by_probe.items())}
    return Tally(tuple(p for p, v in votes.items() if v == "down"), tuple(p for p, v in votes.items() if v == "up"))


def decide(avoided: bool, votes: Tally, quorum: int) -> Transition | None:
    """The change to publish for one region (None: leave it as published)."""
    down, up = len(votes.down), len(votes.up)
    if not avoided and down >= quorum and up < quorum:
        return "avoid"
    if avoided and up >= quorum and down < quorum:
        return "restore"
    return None


def awaits_others(avoided: bool, votes: Tally, own: str, quorum: int) -> bool:
    """Whether ``own`` (the probe region whose outcome is being decided on) votes for a
    change that ``votes`` do not carry: the other probe regions' evidence of the same
    round may not have replicated yet, so it is worth reading where they write it."""
    toward = votes.up if avoided else votes.down
    return own in toward and decide(avoided, votes, quorum) is None


# --- the published document ------------------------------------------------------------


@dataclass(frozen=True)
class HealthDoc:
    avoid: frozenset[str]
    at_ms: int  # 0: no document, or one this consumer cannot read

    def encode(self, at: dt.datetime) -> str:
        doc = {"v": REGION_HEALTH_VERSION, "avoid": sorted(self.avoid), "at": iso_ms(at)}
        return json.dumps(doc, separators=(",", ":"))

    def changed(self, region: str, transition: Transition, at: dt.datetime,
                deployed: Iterable[str] = ()) -> HealthDoc:
        """The document after ``transition``; with ``deployed``, regions outside it (a
        document written by hand, or before the stack dropped a region) are left out."""
        avoid = self.avoid | {region} if transition == "avoid" else self.avoid - {region}
        keep = frozenset(deployed)
        return HealthDoc(frozenset(avoid & keep if keep else avoid), int(at.timestamp() * 1000))


EMPTY = HealthDoc(frozenset(), 0)


def parse_doc(value: str | None) -> HealthDoc:
    """The published document; EMPTY when missing or not one this version writes (the
    next change overwrites it with a well-formed one). Never raises."""
    if value is None:
        return EMPTY
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):
        return EMPTY
    if not isinstance(doc, dict) or doc.get("v") != REGION_HEALTH_VERSION:
        return EMPTY
    avoid, at = doc.get("avoid"), doc.get("at")
    if not isinstance(avoid, list) or not all(isinstance(r, str) and _REGION.fullmatch(r) for r in avoid):
        return EMPTY
    if not isinstance(at, str):
        return EMPTY
    try:
        when = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return EMPTY
    if when.tzinfo is None:
        return EMPTY
    return HealthDoc(frozenset(avoid), int(when.timestamp() * 1000))


def item_bytes(value: str) -> int:
    """What the store counts against its 1 KB limit: key and value, UTF-8."""
    return len(REGION_HEALTH_KEY.encode()) + len(value.encode())


# --- the alert a published change raises -------------------------------------------------


def region_alert(
    transition: Transition, region: str, votes: Tally, settings: HealthSettings, *,
    server_id: str, request_id: str, base_etag: str, published: str,
) -> Alert:
    """``region-avoided`` / ``region-restored``. The dedup key names the change: this
    region, this way, from the store state ``base_etag``; only one consumer's write from
    that state can succeed, and a redelivery of its message alerts under the same key."""
    kind = "region-avoided" if transition == "avoid" else "region-restored"
    if transition == "avoid":
        subject = f"region avoided: the edge routes around {region}"
        lines = [
            f"Probes from {len(votes.down)} of {len(settings.probe_regions)} probe regions "
            f"({', '.join(votes.down)}) saw {region} fail {settings.failure_threshold} rounds in a row "
            f"(quorum {settings.quorum}): the edge now sends its viewers to the next-nearest healthy region.",
            f"It comes back after {settings.recovery_threshold} successful rounds seen from {settings.quorum} probe "
            "regions. Look at the origin's logs and alarms in that region.",
        ]
    else:
        subject = f"region restored: the edge routes to {region} again"
        lines = [
            f"Probes from {len(votes.up)} of {len(settings.probe_regions)} probe regions ({', '.join(votes.up)}) "
            f"saw {region} succeed {settings.recovery_threshold} rounds in a row (quorum {settings.quorum}): "
            "its viewers are served by it again.",
        ]
    details = {"region": region, "down": list(votes.down), "up": list(votes.up), "quorum": settings.quorum,
               "published": published}
    return make_alert(kind, f"{kind}#{region}#{base_etag}", request_id, server_id, subject, lines, details)
