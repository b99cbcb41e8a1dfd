"""What the consumer does with one probe outcome (independent of Powertools).

1. History item, once per request id (``ResultsStore.record_history``).
2. Latest state of the target: read, evolve (``state.evolve_latest``), write if still
   the version read; an outcome older than the stored one (SQS does not keep order)
   only adds history. Redelivery of an applied outcome changes nothing.
3. Skew state of the probe region: recomputed from the latest items.
4. Alerts raised by 2 and 3 are stored with the state change, then published once
   (claim, publish, mark sent) and removed from the item.
5. ``count_once``: once every step succeeded, the delivery that claims the request
   marker counts the outcome in the metrics (the handler emits them right after), so
   a retry after a failure at any step counts it, and a duplicate does not.

Every step is idempotent, so a message redelivered after a crash anywhere finishes
the work without repeating it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .envelope import ProbeOutcome
from .state import Alert, evolve_latest, evolve_skew, is_newer, iso_ms, skew_view
from .store import ConcurrentUpdateError, ResultsStore, latest_pk, skew_sk, target_sk

MAX_ATTEMPTS = 8
# After a publish went out, failing to record it would send the alert again on the
# retry: worth a few more attempts than any other write.
MARK_SENT_ATTEMPTS = 3


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


class Consumer:
    def __init__(
        self,
        store: ResultsStore,
        publish: Callable[[Alert], None],
        *,
        down_after: int = 2,
        fresh_ms: int = 15 * 60 * 1000,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.publish = publish
        self.down_after = down_after
        self.fresh_ms = fresh_ms
        self.clock = clock

    def process(self, outcome: ProbeOutcome, queue: str) -> Processed:
        done = Processed(outcome)
        done.new = self.store.record_history(outcome, queue)
        if outcome.target is None:
            return done  # an invalid probe event: history only, nothing to attribute it to
        self._latest(outcome, done)
        self._skew(outcome, done)
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
