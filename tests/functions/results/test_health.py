"""Region health (functions/results/health.py): streaks, votes, quorum, hysteresis and
the published document, property-based where the rule is general. ``Fleet`` plays
whole probe rounds: every probe region probes both targets of every origin region,
then consumers decide region by region against the published document, as the
consumers of every probe region do on AWS."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edge.regions import AWS_REGIONS
from functions import contract
from functions.contract import majority
from functions.results import health
from functions.results.health import (
    EMPTY,
    MAX_ITEM_BYTES,
    TARGETS,
    HealthDoc,
    HealthSettings,
    Streak,
    Tally,
    awaits_others,
    decide,
    evidence_since,
    evolve_streak,
    item_bytes,
    newest,
    parse_doc,
    tally,
    vote_max_age_s,
)
from functions.results.state import skew_fresh_s
from stack_config.model import FailoverConfig

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1", "sa-east-1")
T0 = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)
PERIOD = dt.timedelta(minutes=1)

Observe = Callable[[int, str, str, str], bool]  # (round, probe region, origin region, target) -> succeeded


def test_key_and_version_are_the_constants_the_edge_reads():
    assert health.REGION_HEALTH_KEY == contract.REGION_HEALTH_KEY
    assert health.REGION_HEALTH_VERSION == contract.REGION_HEALTH_VERSION


def test_the_stack_configs_defaults_are_the_consumers():
    # The program passes failoverQuorum (0: majority) and the thresholds to the consumer.
    stack = FailoverConfig()
    assert all(stack.quorum_of(n) == majority(n) for n in range(1, 40))
    consumer = HealthSettings(("us-east-1",), 1)
    assert (stack.failure_threshold, stack.recovery_threshold) == (consumer.failure_threshold, consumer.recovery_threshold)


@pytest.mark.parametrize(("n", "quorum"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (17, 9)])
def test_default_quorum_is_a_majority_and_one_for_a_single_probe_region(n, quorum):
    assert majority(n) == quorum


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"probe_regions": (), "quorum": 1}, "at least one probe region"),
        ({"probe_regions": ("us-east-1", "us-east-1"), "quorum": 1}, "twice"),
        ({"probe_regions": ("us-east-1",), "quorum": 2}, "between 1 and the number of probe regions (1)"),
        ({"probe_regions": ("us-east-1",), "quorum": 0}, "between 1"),
        ({"probe_regions": ("us-east-1",), "quorum": 1, "failure_threshold": 0}, "at least 1"),
    ],
)
def test_settings_refuse_what_cannot_decide(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        HealthSettings(**kwargs)


# --- streaks -----------------------------------------------------------------------------


def _streak_step(previous: dict[str, Any] | None, succeeded: bool, at: dt.datetime, rid: str,
                 now: dt.datetime = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)) -> dict[str, Any] | None:
    return evolve_streak(previous, probe_region="eu-west-1", origin_region="us-east-1", target="edge",
                         succeeded=succeeded, at=at, request_id=rid, now=now)


@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_streak_counts_the_trailing_run_of_the_newest_outcomes(results):
    item = None
    for i, ok in enumerate(results):
        item = _streak_step(item, ok, T0 + i * PERIOD, f"r{i}") or item
    assert item is not None
    last = results[-1]
    run = next((i for i, ok in enumerate(reversed(results)) if ok != last), len(results))
    assert (item["successes"], item["failures"]) == ((run, 0) if last else (0, run))
    assert item["version"] == len(results)


@given(st.lists(st.booleans(), min_size=1, max_size=15), st.data())
def test_a_redelivered_or_older_outcome_changes_no_streak(results, data):
    item = None
    for i, ok in enumerate(results):
        item = _streak_step(item, ok, T0 + i * PERIOD, f"r{i}")
    assert item is not None
    i = data.draw(st.integers(0, len(results) - 1))
    assert _streak_step(item, data.draw(st.booleans()), T0 + i * PERIOD, f"r{i}") is None


# --- the fleet: rounds of probes and consumers -----------------------------------------


@dataclass
class Fleet:
    settings: HealthSettings
    origins: tuple[str, ...] = REGIONS[:4]
    doc: HealthDoc = EMPTY
    value: str | None = None
    writes: int = 0
    streaks: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    round: int = 0

    def now(self) -> dt.datetime:
        return T0 + self.round * PERIOD

    def probe(self, observe: Observe, probe_regions: tuple[str, ...] | None = None) -> None:
        """One round: every (live) probe region probes both targets of every origin."""
        at = self.now()
        for p in probe_regions if probe_regions is not None else self.settings.probe_regions:
            for origin in self.origins:
                for target in TARGETS:
                    key = (p, origin, target)
                    item = evolve_streak(self.streaks.get(key), probe_region=p, origin_region=origin, target=target,
                                         succeeded=observe(self.round, p, origin, target), at=at,
                                         request_id=f"{self.round}-{p}-{origin}-{target}", now=at)
                    if item is not None:
                        self.streaks[key] = item

    def tally(self, origin: str, now: dt.datetime) -> Tally:
        streaks = [Streak.from_item(i) for (_, o, _), i in self.streaks.items() if o == origin]
        now_ms = int(now.timestamp() * 1000)
        return tally(streaks, self.settings, now_ms=now_ms, since_ms=evidence_since(self.doc, self.settings, now_ms))

    def consume(self) -> None:
        """The consumers decide every origin region against the published document (a
        few seconds after the round's outcomes arrived)."""
        now = self.now() + dt.timedelta(seconds=5)
        for origin in self.origins:
            transition = decide(origin in self.doc.avoid, self.tally(origin, now), self.settings.quorum)
            if transition is not None:
                self.doc = self.doc.changed(origin, transition, now)
                self.value = self.doc.encode(now)
                self.writes += 1

    def play(self, observe: Observe, rounds: int) -> list[frozenset[str]]:
        history = []
        for _ in range(rounds):
            self.probe(observe)
            self.consume()
            history.append(self.doc.avoid)
            self.round += 1
        return history


probe_sets = st.lists(st.sampled_from(REGIONS), min_size=1, max_size=5, unique=True).map(tuple)
thresholds = st.integers(1, 4)


@settings(max_examples=60, deadline=None)
@given(probe_sets, thresholds, thresholds, st.sampled_from(REGIONS[:4]))
def test_a_region_every_probe_sees_fail_is_avoided_after_the_failure_threshold_and_restored_after_the_recovery_one(
    probes, fail_after, recover_after, dead,
):
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), fail_after, recover_after))
    down_rounds, up_rounds = fail_after + 3, recover_after + 3
    history = fleet.play(lambda r, p, o, t: o != dead, down_rounds)
    history += fleet.play(lambda r, p, o, t: True, up_rounds)
    # Avoided on the round its failure threshold is reached, not before ...
    assert history[: fail_after - 1] == [frozenset()] * (fail_after - 1)
    assert history[fail_after - 1: down_rounds] == [frozenset({dead})] * (down_rounds - fail_after + 1)
    # ... and restored on the round the recovery threshold is reached.
    back = down_rounds + recover_after - 1
    assert history[down_rounds:back] == [frozenset({dead})] * (recover_after - 1)
    assert history[back:] == [frozenset()] * (len(history) - back)
    assert fleet.writes == 2  # one change each way, published once


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(REGIONS), min_size=2, max_size=5, unique=True).map(tuple), thresholds, thresholds,
       st.data())
def test_a_partitioned_probe_region_that_sees_every_region_fail_takes_no_healthy_region_out(probes, f, r, data):
    cut_off = data.draw(st.sampled_from(probes))
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), f, r))
    history = fleet.play(lambda rnd, p, o, t: p != cut_off, 3 * (f + r))
    assert set().union(*history) == set()
    assert fleet.writes == 0 and fleet.value is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(REGIONS), min_size=3, max_size=5, unique=True).map(tuple), thresholds, st.data())
def test_a_partitioned_probe_region_does_not_block_avoiding_a_region_that_did_fail(probes, f, data):
    cut_off = data.draw(st.sampled_from(probes))
    dead = data.draw(st.sampled_from(REGIONS[:4]))
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), f, 2))
    history = fleet.play(lambda rnd, p, o, t: p != cut_off and o != dead, f + 2)
    assert history[-1] == frozenset({dead})


@settings(max_examples=80, deadline=None)
@given(probe_sets, st.integers(2, 4), st.integers(2, 4), st.data())
def test_flapping_shorter_than_the_thresholds_never_changes_the_published_state(probes, f, r, data):
    # Runs of failures shorter than f, runs of successes shorter than r: no vote either way.
    runs = data.draw(st.lists(st.tuples(st.integers(1, f - 1), st.integers(1, r - 1)), min_size=1, max_size=6))
    pattern = [ok for fails, oks in runs for ok in [False] * fails + [True] * oks]
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), f, r))
    history = fleet.play(lambda rnd, p, o, t: o != "eu-west-1" or pattern[rnd], len(pattern))
    assert set().union(*history) == set() and fleet.writes == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(REGIONS), min_size=2, max_size=5, unique=True).map(tuple), st.data())
def test_either_target_failing_counts_as_failing(probes, data):
    failing_target = data.draw(st.sampled_from(TARGETS))
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), 2, 2))
    history = fleet.play(lambda rnd, p, o, t: not (o == "eu-west-1" and t == failing_target), 3)
    assert history[-1] == frozenset({"eu-west-1"})


def test_a_region_comes_back_only_when_both_targets_recovered():
    fleet = Fleet(HealthSettings(REGIONS[:3], 2, 2, 2))
    fleet.play(lambda rnd, p, o, t: o != "eu-west-1", 3)
    # The direct path recovers, the edge path to it does not: still avoided.
    history = fleet.play(lambda rnd, p, o, t: o != "eu-west-1" or t == "origin", 5)
    assert history == [frozenset({"eu-west-1"})] * 5
    assert fleet.play(lambda rnd, p, o, t: True, 2)[-1] == frozenset()


def test_votes_of_probe_regions_whose_schedules_stopped_do_not_count():
    probes = REGIONS[:3]
    fleet = Fleet(HealthSettings(probes, 2, 2, 2, vote_max_age_ms=3 * 60_000))
    # Two probe regions saw eu-west-1 fail once, then stopped probing; one region keeps
    # seeing it fail: one fresh vote is no quorum, and the stale ones never become one.
    fleet.probe(lambda rnd, p, o, t: o != "eu-west-1")
    fleet.round += 1
    for _ in range(8):
        fleet.probe(lambda rnd, p, o, t: o != "eu-west-1", probe_regions=probes[:1])
        fleet.consume()
        fleet.round += 1
    assert fleet.doc.avoid == frozenset() and fleet.writes == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(REGIONS), st.sampled_from(TARGETS), st.integers(0, 5), st.integers(0, 5),
                          st.integers(0, 20)), max_size=20),
       st.lists(st.tuples(st.sampled_from(REGIONS), st.sampled_from(TARGETS), st.integers(0, 5), st.integers(0, 5),
                          st.integers(0, 20)), max_size=10))
def test_stale_evidence_and_evidence_older_than_the_published_document_change_no_vote(fresh, ignored):
    cfg = HealthSettings(REGIONS, 3, 2, 2, vote_max_age_ms=30 * 60_000)
    now, since = 100 * 60_000, 80 * 60_000

    def streaks(rows: list[tuple[str, str, int, int, int]], base: int) -> list[Streak]:
        return [Streak(p, "us-east-1", t, f, s, base + m * 1000, f"{base}-{i}") for i, (p, t, f, s, m) in enumerate(rows)]

    kept = streaks(fresh, since + 1)  # within the maximum age, after the document
    too_old = streaks(ignored, now - cfg.vote_max_age_ms - 21_000)  # older than the maximum age
    before_doc = streaks(ignored, since - 21_000)  # before the published decision
    expected = tally(kept, cfg, now_ms=now, since_ms=since)
    assert tally(kept + too_old + before_doc, cfg, now_ms=now, since_ms=since) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(REGIONS), min_size=1, max_size=5, unique=True).map(tuple), thresholds, thresholds,
       st.booleans())
def test_a_consumer_reading_a_lagging_replica_does_not_undo_the_change_just_published(probes, f, r, failing):
    # Region eu-west-1 changes state (fails, or recovers after failing); consumer A, whose
    # replica is current, publishes the change; consumer B then decides on the state its
    # replica had one round earlier, against the document A published: it must not revert it.
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), f, r))
    if not failing:
        fleet.play(lambda rnd, p, o, t: o != "eu-west-1", f + 1)
    start, before = fleet.doc.avoid, None
    change: Observe = (lambda rnd, p, o, t: o != "eu-west-1") if failing else (lambda rnd, p, o, t: True)
    for _ in range(f + r + 2):
        before = dict(fleet.streaks)
        fleet.probe(change)
        fleet.consume()
        if fleet.doc.avoid != start:
            break
        fleet.round += 1
    assert fleet.doc.avoid != start and before is not None
    published, writes = fleet.doc, fleet.writes
    current, fleet.streaks = fleet.streaks, before  # B: one round behind
    fleet.consume()
    assert (fleet.doc, fleet.writes) == (published, writes)
    fleet.streaks = current


# --- copies of the streaks: this region's replica, and where each probe region writes its own


def _history(probe: str, target: str, results: list[bool]) -> list[Streak]:
    """Every version of one streak item, oldest first (the copies a lagging replica may hold)."""
    item, versions = None, []
    for i, ok in enumerate(results):
        item = evolve_streak(item, probe_region=probe, origin_region="us-east-1", target=target, succeeded=ok,
                             at=T0 + i * PERIOD, request_id=f"{probe}-{target}-{i}", now=T0 + i * PERIOD)
        assert item is not None
        versions.append(Streak.from_item(item))
    return versions


outcome_runs = st.lists(st.booleans(), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(REGIONS), st.sampled_from(TARGETS), outcome_runs), max_size=10), st.data())
def test_the_newest_copy_of_each_streak_wins_whatever_the_copies_and_their_order(rows, data):
    copies = [v for p, t, results in rows for v in data.draw(st.lists(st.sampled_from(_history(p, t, results))))]
    copies = data.draw(st.permutations(copies))
    best = newest(copies)
    keys = {(s.probe_region, s.target) for s in copies}
    assert sorted((s.probe_region, s.target) for s in best) == sorted(keys)  # one per item
    for s in best:
        assert all((c.checked_ms, c.request_id) <= (s.checked_ms, s.request_id)
                   for c in copies if (c.probe_region, c.target) == (s.probe_region, s.target))
    assert sorted(newest([*best, *copies]), key=repr) == sorted(best, key=repr)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(REGIONS), min_size=1, max_size=5, unique=True).map(tuple), thresholds, thresholds,
       st.booleans(), st.data())
def test_a_consumer_whose_vote_completes_a_change_decides_it_or_reads_the_owners_copies_which_decide_it(
        probes, f, r, avoided, data):
    # Given every probe region's true streaks (its own copy) and a replica holding any older
    # version of the other probe regions' streaks (or none), and the consumer of probe region
    # `own`, whose own streaks its replica holds as written
    cfg = HealthSettings(probes, data.draw(st.integers(1, len(probes))), f, r, vote_max_age_ms=60 * 60_000)
    histories = {(p, t): _history(p, t, data.draw(outcome_runs)) for p in probes for t in TARGETS}
    own = data.draw(st.sampled_from(probes))
    truth = [h[-1] for h in histories.values()]
    replica = [h[-1] if p == own else data.draw(st.sampled_from([None, *h])) for (p, _), h in histories.items()]
    replica_view = [s for s in replica if s is not None]
    now_ms, since_ms = int((T0 + 9 * PERIOD).timestamp() * 1000), 0
    true_votes = tally(truth, cfg, now_ms=now_ms, since_ms=since_ms)
    seen = tally(replica_view, cfg, now_ms=now_ms, since_ms=since_ms)
    change = decide(avoided, true_votes, cfg.quorum)
    own_toward = own in (true_votes.up if avoided else true_votes.down)
    # When the truth calls for a change its own vote is for, the replica shows it, or the consumer
    # reads the owners' copies; and with those, it decides on the truth.
    if change is not None and own_toward:
        assert decide(avoided, seen, cfg.quorum) == change or awaits_others(avoided, seen, own, cfg.quorum)
    owners = [h[-1] for (p, _), h in histories.items() if p != own]
    assert tally(newest([*replica_view, *owners]), cfg, now_ms=now_ms, since_ms=since_ms) == true_votes
    # A consumer that decides a change, or whose vote is for none, reads nothing more.
    if decide(avoided, seen, cfg.quorum) is not None or own not in (seen.up if avoided else seen.down):
        assert not awaits_others(avoided, seen, own, cfg.quorum)


@given(st.integers(0, 6), st.integers(0, 6), st.integers(1, 6), st.booleans())
def test_applying_a_decision_and_deciding_again_on_the_same_votes_changes_nothing(down, up, quorum, avoided):
    assume(down + up <= 6)
    votes = Tally(tuple(f"d{i}" for i in range(down)), tuple(f"u{i}" for i in range(up)))
    transition = decide(avoided, votes, quorum)
    if transition is not None:
        assert decide(transition == "avoid", votes, quorum) is None


@settings(max_examples=60, deadline=None)
@given(probe_sets, st.integers(1, 3))
def test_publishing_the_same_decision_twice_writes_once(probes, f):
    fleet = Fleet(HealthSettings(probes, majority(len(probes)), f, 2))
    fleet.play(lambda rnd, p, o, t: o != "us-east-1", f)
    assert fleet.writes == 1
    fleet.consume()  # every consumer evaluating the same evidence again
    fleet.consume()
    assert fleet.writes == 1


@given(st.lists(st.sampled_from(REGIONS), min_size=2, max_size=5, unique=True).map(tuple), st.data())
def test_with_a_quorum_below_half_a_contested_region_is_left_as_published(probes, data):
    # quorum 1 of n: one probe region voting down and another voting up is no decision.
    fleet = Fleet(HealthSettings(probes, 1, 2, 2))
    dissenter = data.draw(st.sampled_from(probes))
    history = fleet.play(lambda rnd, p, o, t: p != dissenter or o != "eu-west-1", 6)
    assert set().union(*history) == set()


# --- the document ---------------------------------------------------------------------


def test_the_document_lists_every_region_of_the_catalog_within_the_stores_item_limit():
    value = HealthDoc(frozenset(AWS_REGIONS), 0).encode(dt.datetime(2099, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC))
    assert item_bytes(value) <= MAX_ITEM_BYTES
    assert json.loads(value)["avoid"] == sorted(AWS_REGIONS)


@given(st.frozensets(st.sampled_from(sorted(AWS_REGIONS))),
       st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2999, 1, 1), timezones=st.just(dt.UTC)))
def test_the_document_round_trips_compact_and_sorted(avoid, at):
    at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    value = HealthDoc(avoid, 0).encode(at)
    assert " " not in value and item_bytes(value) <= MAX_ITEM_BYTES
    assert json.loads(value) == {"v": 1, "avoid": sorted(avoid), "at": at.isoformat(timespec="milliseconds")
                                 .replace("+00:00", "Z")}
    assert parse_doc(value) == HealthDoc(avoid, int(at.timestamp() * 1000))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=10)


@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps),
                 st.fixed_dictionaries({"v": st.sampled_from([1, 2, "1"]), "avoid": json_values,
                                        "at": json_values}).map(json.dumps)))
def test_an_unreadable_document_reads_as_empty_and_never_raises(value):
    doc = parse_doc(value)
    assert doc == EMPTY or (json.loads(value)["v"] == 1 and isinstance(doc.avoid, frozenset))


@pytest.mark.parametrize("value", [
    None, "", "not json", "[]", '{"v":2,"avoid":[],"at":"2026-11-29T10:00:00.000Z"}',
    '{"v":1,"avoid":"eu-west-1","at":"2026-11-29T10:00:00.000Z"}', '{"v":1,"avoid":["EU WEST"],"at":"x"}',
    '{"v":1,"avoid":[],"at":"2026-11-29T10:00:00"}', '{"v":1,"avoid":[1],"at":"2026-11-29T10:00:00.000Z"}',
])
def test_missing_or_malformed_documents_read_as_nothing_avoided_and_no_time(value):
    assert parse_doc(value) == EMPTY


def test_a_document_dated_beyond_any_clock_skew_does_not_freeze_decisions():
    fleet = Fleet(HealthSettings(REGIONS[:3], 2, 2, 2))
    fleet.doc = HealthDoc(frozenset(), int(dt.datetime(2099, 1, 1, tzinfo=dt.UTC).timestamp() * 1000))
    assert fleet.play(lambda rnd, p, o, t: o != "eu-west-1", 2)[-1] == frozenset({"eu-west-1"})


def test_evidence_counts_from_the_published_time_within_the_clock_skew_allowed():
    cfg = HealthSettings(REGIONS[:1], 1, vote_max_age_ms=60_000)
    assert evidence_since(HealthDoc(frozenset(), 1_000), cfg, now_ms=500) == 1_000
    assert evidence_since(HealthDoc(frozenset(), 61_501), cfg, now_ms=500) == 0


@given(interval=st.integers(1, 3600))
def test_votes_count_for_three_rounds_and_never_less_than_a_minute(interval: int) -> None:
    age = vote_max_age_s(interval)
    assert age >= 3 * interval and age >= 60
    assert age == 3 * interval or age == 60
    assert vote_max_age_s(interval + 1) >= age  # longer rounds, older evidence still counts


@given(interval=st.integers(1, 3600))
def test_skew_forgets_targets_silent_for_five_rounds_and_at_least_fifteen_minutes(interval: int) -> None:
    assert skew_fresh_s(interval) == max(5 * interval, 900)
