"""What the consumer does with one probe outcome (independent of Powertools).

1. History item, once per request id (``ResultsStore.record_history``).
2. Latest state of the target: read, evolve (``state.evolve_latest``), write if still
   the version read; an outcome older than the stored one (SQS does not keep order)
   only adds history. Redelivery of an applied outcome changes nothing.
3. Skew state of the probe region: recomputed from the latest items.
4. Alerts raised by 2 and 3 are stored with the state change, then published once
   (claim, publish, mark sent) and removed from the item.
5. Region health (when a KeyValueStore is configured): the streak of the outcome's
   (probe region, origin region, target) moves; then every probe region's streaks for
   that origin region are read (from this region's replica; when this probe region's
   vote would complete a change the replica does not show, also from each other probe
   region's own copy, ahead of replication) and the decision (``health.decide``) is taken against
   the document the edge reads, as the table's mirror of it holds it (refreshed from
   the store when older than ``refresh_ms``). Only a change touches the store: decided
   again against the store itself (``DescribeKeyValueStore`` for the ETag, then
   ``GetKey``), written with that ETag (``PutKey`` ``IfMatch``), and a conflict
   (another consumer wrote first) means read again and decide again, a bounded number
   of times. The decision is recomputed from the table on every outcome, so a publish
   that failed (the store unreachable) is retried by the next outcome, from any probe
   region: a KeyValueStore error is reported, not raised.
6. ``count_once``: once every step succeeded, the delivery that claims the request
   marker counts the outcome in the metrics (the handler emits them right after), so
   a retry after a failure at any step counts it, and a duplicate does not.

Every step is idempotent, so a message redelivered after a crash anywhere finishes
the work without repeating it.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .envelope import ProbeOutcome
from .health import (
    MAX_ITEM_BYTES,
    HealthDoc,
    HealthSettings,
    Streak,
    Tally,
    Transition,
    awaits_others,
    decide,
    evidence_since,
    evolve_streak,
    item_bytes,
    newest,
    parse_doc,
    region_alert,
    tally,
)
from .kvs import HealthStore, HealthStoreError, Published
from .state import Alert, evolve_latest, evolve_skew, is_newer, iso_ms, skew_view
from .store import (
    ConcurrentUpdateError,
    ResultsStore,
    StreakReadError,
    health_pk,
    latest_pk,
    skew_sk,
    streak_sk,
    target_sk,
)

MAX_ATTEMPTS = 8
# After a publish went out, failing to record it would send the alert again on the
# retry: worth a few more attempts than any other write.
MARK_SENT_ATTEMPTS = 3
# Conflicting writes to the KeyValueStore before giving up until the next outcome.
PUBLISH_ATTEMPTS = 5
# After a KeyValueStore error this process leaves the store alone this long: an
# unreachable store must not cost every outcome its timeouts (the next outcome after
# the pause tries again; nothing is lost, the decision is taken from the table).
STORE_PAUSE_S = 30.0
# Likewise for another probe region's copy of the table that did not answer: its replicated
# streaks count meanwhile (a region that cannot be reached costs one timeout per pause).
OWNER_PAUSE_S = 30.0


@dataclass(frozen=True)
class HealthPublishing:
    settings: HealthSettings
    kvs: HealthStore
    # The table's mirror of the document is trusted this long after it last matched the
    # store; then the next outcome reads the store again.
    refresh_ms: int = 5 * 60_000


@dataclass
class Processed:
    outcome: ProbeOutcome
    new: bool = False  # history written by this delivery
    applied: bool = False  # latest state moved to this outcome
    stale: bool = False  # an older outcome than the stored one
    drift: bool = False
    skewed: bool | None = None  # None: not evaluated (no target)
    published: list[Alert] = field(default_factory=list)
    suppressed: list[Alert] = field(default_factory=list)
    votes: Tally | None = None  # region health: the votes the last decision counted
    health: Transition | None = None  # the change this delivery published
    health_error: str | None = None  # the KeyValueStore could not be read or written
    # Other probe regions' own copies of their streaks that could not be read (their
    # replicated copies counted instead).
    owner_read_errors: list[str] = field(default_factory=list)


class Consumer:
    def __init__(
        self,
        store: ResultsStore,
        publish: Callable[[Alert], None],
        *,
        down_after: int = 2,
        fresh_ms: int = 15 * 60 * 1000,
        health: HealthPublishing | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.publish = publish
        self.down_after = down_after
        self.fresh_ms = fresh_ms
        self.health = health
        self.clock = clock
        self._store_paused_until = 0.0
        self._owner_paused_until: dict[str, float] = {}
        self._store_error = ""

    def process(self, outcome: ProbeOutcome, queue: str) -> Processed:
        done = Processed(outcome)
        done.new = self.store.record_history(outcome, queue)
        if outcome.target is None:
            return done  # an invalid probe event: history only, nothing to attribute it to
        self._latest(outcome, done)
        self._skew(outcome, done)
        if self.health is not None:
            self._health(outcome, self.health, done)
        return done

    def count_once(self, done: Processed) -> bool:
        """True for exactly one delivery of an outcome: the one to count it in the metrics."""
        return self.store.claim_count(done.outcome.request_id, uuid.uuid4().hex)

    def _latest(self, outcome: ProbeOutcome, done: Processed) -> None:
        assert outcome.target is not None
        pk, sk = latest_pk(outcome.target.server_id), target_sk(outcome.probe_region, outcome.target)
        for _ in range(MAX_ATTEMPTS):
            previous = self.store.get(pk, sk)
            pending: dict[str, Any] = dict((previous or {}).get("pendingAlerts") or {})
            if previous is not None and previous.get("lastRequestId") == outcome.request_id:
                # Applied by an earlier delivery; finish its alerts below, and say what it did.
                done.applied = True
                done.drift = previous.get("schemaChangedAt") == iso_ms(outcome.timestamp) and outcome.succeeded
                break
            if not is_newer(outcome, previous):
                done.stale = True
                break
            item, alerts = evolve_latest(previous, outcome, down_after=self.down_after)
            pending.update({a.id: a.to_dict() for a in alerts})
            item.update(pk=pk, sk=sk, pendingAlerts=pending)
            if self.store.put_versioned(item, previous.get("version") if previous else None):
                done.applied = True
                done.drift = any(a.kind == "schema-drift" for a in alerts)
                break
        else:
            raise ConcurrentUpdateError(f"latest state {pk} {sk} kept changing under us; retry later")
        self._flush(pk, sk, pending, done)

    def _skew(self, outcome: ProbeOutcome, done: Processed) -> None:
        assert outcome.target is not None
        server_id, region = outcome.target.server_id, outcome.probe_region
        pk, sk = latest_pk(server_id), skew_sk(region)
        for _ in range(MAX_ATTEMPTS):
            previous = self.store.get(pk, sk)
            pending: dict[str, Any] = dict((previous or {}).get("pendingAlerts") or {})
            view = skew_view(self.store.latest_targets(server_id, region), int(self.clock() * 1000), self.fresh_ms)
            state, alerts = evolve_skew(
                previous, view, server_id=server_id, probe_region=region, request_id=outcome.request_id,
                at=outcome.timestamp,
            )
            done.skewed = len(view) > 1
            if state is None:
                break
            pending.update({a.id: a.to_dict() for a in alerts})
            state.update(pk=pk, sk=sk, pendingAlerts=pending)
            if self.store.put_versioned(state, previous.get("version") if previous else None):
                break
        else:
            raise ConcurrentUpdateError(f"skew state {pk} {sk} kept changing under us; retry later")
        self._flush(pk, sk, pending, done)

    def _health(self, outcome: ProbeOutcome, health: HealthPublishing, done: Processed) -> None:
        assert outcome.target is not None
        server_id, origin, kind = outcome.target.server_id, outcome.target.target_region, outcome.target.target
        if not health.settings.deploys(origin):
            return  # a region the stack does not deploy: nothing to route around
        pk, sk = health_pk(server_id, origin), streak_sk(outcome.probe_region, kind)
        for _ in range(MAX_ATTEMPTS):
            previous = self.store.get(pk, sk)
            item = evolve_streak(previous, probe_region=outcome.probe_region, origin_region=origin, target=kind,
                                 succeeded=outcome.succeeded, at=outcome.timestamp, request_id=outcome.request_id,
                                 now=dt.datetime.fromtimestamp(self.clock(), dt.UTC))
            if item is None:  # redelivered or older: the streak stands, the decision is still re-taken
                pending: dict[str, Any] = dict((previous or {}).get("pendingAlerts") or {})
                break
            item.update(pk=pk, sk=sk, serverId=server_id)
            if self.store.put_versioned(item, previous.get("version") if previous else None):
                pending = dict(item["pendingAlerts"])
                break
        else:
            raise ConcurrentUpdateError(f"health streak {pk} {sk} kept changing under us; retry later")
        try:
            alert = self._publish_health(server_id, origin, health, outcome, done, (pk, sk))
        except HealthStoreError as exc:
            done.health_error = str(exc)
            alert = None
        if alert is not None:
            pending[alert.id] = alert.to_dict()
        self._flush(pk, sk, pending, done)

    def _published(self, server_id: str, health: HealthPublishing, done: Processed) -> tuple[Published, bool]:
        """The document as the table's mirror has it (and False), or as the store has it
        (and True) when the mirror is missing or older than the refresh interval; an old
        mirror still serves when the store cannot be read."""
        mirror = self.store.get_published(server_id)
        kept = None
        if mirror is not None:
            kept = Published(str(mirror["etag"]), mirror.get("value"))
            if self.clock() * 1000 - int(mirror["readAtMs"]) <= health.refresh_ms:
                return kept, False
        try:
            return self._read_store(server_id, health), True
        except HealthStoreError as exc:
            if kept is None:
                raise
            done.health_error = str(exc)
            return kept, False

    def _store_call(self, call: Callable[[], Any]) -> Any:
        if self.clock() < self._store_paused_until:
            raise HealthStoreError(f"KeyValueStore calls paused for {STORE_PAUSE_S:.0f} s after: {self._store_error}")
        try:
            return call()
        except HealthStoreError as exc:
            self._store_paused_until, self._store_error = self.clock() + STORE_PAUSE_S, str(exc)
            raise

    def _read_store(self, server_id: str, health: HealthPublishing) -> Published:
        published: Published = self._store_call(health.kvs.read)
        self.store.put_published(server_id, published.etag, published.value, int(self.clock() * 1000))
        return published

    def _decide(self, server_id: str, origin: str, settings: HealthSettings, published: Published,
                own: str, done: Processed) -> tuple[HealthDoc, Tally, Transition | None, float]:
        """The change to publish for ``origin``, from every probe region's streaks in this
        region's replica; when ``own`` votes for a change the replica's votes do not carry,
        again with the other probe regions' streaks read where they are written (their
        outcomes of this round may not have replicated here yet)."""
        doc = parse_doc(published.value)
        now = self.clock()
        now_ms = int(now * 1000)
        since_ms, avoided = evidence_since(doc, settings, now_ms), origin in doc.avoid
        streaks = [Streak.from_item(i) for i in self.store.streaks(server_id, origin)]
        votes = tally(streaks, settings, now_ms=now_ms, since_ms=since_ms)
        if awaits_others(avoided, votes, own, settings.quorum):
            streaks = newest([*streaks, *self._owned_streaks(server_id, origin, settings, own, done)])
            votes = tally(streaks, settings, now_ms=now_ms, since_ms=since_ms)
        done.votes = votes
        return doc, votes, decide(avoided, votes, settings.quorum), now

    def _owned_streaks(self, server_id: str, origin: str, settings: HealthSettings, own: str,
                       done: Processed) -> list[Streak]:
        streaks = []
        for probe_region in settings.probe_regions:
            if probe_region == own or self.clock() < self._owner_paused_until.get(probe_region, 0.0):
                continue  # own: the replica read has it as written; paused: its replicated copy counts
            try:
                items = self.store.owned_streaks(server_id, origin, probe_region)
            except StreakReadError as exc:
                done.owner_read_errors.append(str(exc))
                self._owner_paused_until[probe_region] = self.clock() + OWNER_PAUSE_S
                continue
            streaks += [Streak.from_item(i) for i in items or ()]
        return streaks

    def _publish_health(
        self, server_id: str, origin: str, health: HealthPublishing, outcome: ProbeOutcome, done: Processed,
        streak_key: tuple[str, str],
    ) -> Alert | None:
        """Decide for ``origin`` against the published document; write a change.

        The decision is taken against the table's mirror of the document, so a steady
        state costs no KeyValueStore call; a change is decided again against the store
        itself (the mirror may lag) and written with the ETag read."""
        settings = health.settings
        published, fresh = self._published(server_id, health, done)
        writes = 0
        while True:
            doc, votes, transition, now = self._decide(server_id, origin, settings, published, outcome.probe_region,
                                                       done)
            if transition is None:
                return None
            if not fresh:  # confirm against the store before writing (once: then it is fresh)
                published, fresh = self._read_store(server_id, health), True
                continue
            if writes == PUBLISH_ATTEMPTS:
                raise HealthStoreError(f"the health document kept changing under us ({writes} conflicting "
                                       "writes); the next outcome decides again")
            writes += 1
            at = dt.datetime.fromtimestamp(now, dt.UTC)
            value = doc.changed(origin, transition, at, settings.origin_regions).encode(at)
            if item_bytes(value) > MAX_ITEM_BYTES:
                raise HealthStoreError(f"the health document would be {item_bytes(value)} bytes, above the store's "
                                       f"{MAX_ITEM_BYTES}: {value[:200]}")
            etag: str | None = self._store_call(functools.partial(health.kvs.put, value, published.etag))
            if etag is None:  # another consumer wrote since we read: read again, decide again
                published = self._read_store(server_id, health)
                continue
            done.health = transition
            alert = region_alert(transition, origin, votes, settings, server_id=server_id,
                                 request_id=outcome.request_id, base_etag=published.etag, published=value)
            self.store.add_pending(*streak_key, alert)  # first: the alert survives a crash from here on
            self.store.put_published(server_id, etag, value, int(now * 1000))
            return alert

    def _flush(self, pk: str, sk: str, pending: dict[str, Any], done: Processed) -> None:
        for alert_id, data in sorted(pending.items()):
            alert = Alert.from_dict(data)
            verdict = self.store.claim_alert(alert)
            if verdict in ("claimed", "resend"):
                try:
                    self.publish(alert)
                except Exception:
                    if verdict == "claimed":
                        self.store.release_claim(alert)
                    raise
                self._mark_sent(alert)
                done.published.append(alert)
            elif verdict == "suppressed":
                done.suppressed.append(alert)
            self.store.remove_pending(pk, sk, alert_id)

    def _mark_sent(self, alert: Alert) -> None:
        for attempt in range(MARK_SENT_ATTEMPTS):
            try:
                self.store.mark_sent(alert)
                return
            except Exception:
                if attempt == MARK_SENT_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * 2**attempt)
