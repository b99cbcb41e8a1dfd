"""The status page: per probe region and target, with nothing from the table rendered unescaped."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from local.status import (
    Alert,
    AvoidedRegion,
    EdgeRouting,
    Failure,
    Point,
    Recovery,
    Snapshot,
    TargetStatus,
    active_events,
    first_publication,
    recovery_progress,
    render_page,
    sparkline,
)


def _target(region: str, label: str, **kw: object) -> TargetStatus:
    base: dict = dict(probe_region=region, label=label, endpoint="http://127.0.0.1:8400/mcp", status="healthy",
                      checked_at="2026-11-29T10:00:00Z", latency_ms=12.0, tool_count=3, schema_hash="ab" * 32,
                      served_region=label.split("@")[1], consecutive_failures=0)
    base.update(kw)
    return TargetStatus(**base)


def _snapshot(*targets: TargetStatus, alerts: list[Alert] | None = None) -> Snapshot:
    return Snapshot(stack="prod", server_id="acme-mcp", generated_at="now", probe_regions=["us-east-1", "eu-west-1"],
                    targets=list(targets), alerts=alerts or [])


def _text(page: str) -> str:
    parser = _Collect()
    parser.feed(page)
    return "".join(parser.text)


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_page_has_a_section_per_probe_region_and_a_row_per_target() -> None:
    page = render_page(_snapshot(
        _target("us-east-1", "edge@eu-west-1", history=[Point("t1", 10.0, True), Point("t2", None, False)]),
        _target("eu-west-1", "origin@eu-west-1", status="failed", consecutive_failures=3, latency_ms=None,
                failures=[Failure("t3", "ProbeConnectError", "connection refused", "RetriesExhausted")]),
    ), {"edge": "http://127.0.0.1:8400/mcp"})
    assert "<meta http-equiv='refresh'" in page
    text = _text(page)
    assert text.index("Probes from us-east-1") < text.index("edge@eu-west-1") < text.index("Probes from eu-west-1")
    assert "ProbeConnectError: connection refused" in page and "(3 in a row)" in page
    assert "<svg" in page and "<circle" in page  # a failed point is drawn as a red dot
    assert "abababababab" in page  # schema hash, shortened


@given(text=st.text(min_size=1, max_size=60))
def test_table_content_is_always_escaped(text: str) -> None:
    snapshot = dataclasses.replace(_snapshot(
        _target("us-east-1", f"edge@{text}", endpoint=text, failures=[Failure(text, text, text, text)],
                status=text, served_region=text, schema_hash=text),
        alerts=[Alert(kind=text, key=text, state=text, claimed_at=text)],
    ), regions=[text], routing=EdgeRouting(store=True, readable=True, published_at=text, fail_static=False,
                                           avoided=[AvoidedRegion(text, text)]))
    page = render_page(snapshot, {"json": text})
    parser = _Collect()
    parser.feed(page)
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "a", "code", "table", "tr",
               "th", "td", "b", "br", "span", "div", "svg", "polyline", "circle", "ul", "li"}
    assert set(parser.tags) <= allowed


def test_the_sparkline_scales_latency_into_the_box() -> None:
    svg = sparkline([Point("a", 100.0, True), Point("b", 50.0, True), Point("c", None, False)], width=100, height=20)
    points = re.search(r'points="([^"]+)"', svg)
    assert points is not None
    coords = [tuple(map(float, p.split(","))) for p in points.group(1).split()]
    assert coords == [(0.0, 2.0), (50.0, 10.0)]
    assert 'cx="100.0"' in svg
    assert sparkline([]).startswith("<svg")


def _routing(*avoided: str, readable: bool = True, fail_static: bool = False) -> EdgeRouting:
    return EdgeRouting(store=True, readable=readable, published_at="2026-11-29T10:00:00.000Z", fail_static=fail_static,
                       avoided=[AvoidedRegion(r, "2026-11-29T09:58:00+00:00") for r in avoided])


def test_the_page_starts_with_the_edges_routing_the_region_grid_and_active_alerts() -> None:
    # Given eu-west-1 avoided, and its origin failing from us-east-1.
    snapshot = Snapshot(
        stack="prod", server_id="acme-mcp", generated_at="now", probe_regions=["us-east-1", "eu-west-1"],
        regions=["us-east-1", "eu-west-1"], alerts=[], routing=_routing("eu-west-1"),
        targets=[_target("us-east-1", "origin@eu-west-1", status="failed", consecutive_failures=4),
                 _target("us-east-1", "edge@us-east-1")])
    page = render_page(snapshot, {})
    # Then the overview comes before the details, in the order an operator reads it.
    order = [page.index(h) for h in ("Edge routing", "Health by region", "Active alerts", "Details")]
    assert order == sorted(order)
    assert "2026-11-29T09:58:00+00:00" in page  # since when
    grid = page[page.index("Health by region"):page.index("Active alerts")]
    assert grid.count("<tr>") == 3  # a header and one row per deployed region
    assert "edge from us-east-1" in _text(grid) and "origin from eu-west-1" in _text(grid)
    assert "failed (4)" in grid and "(avoided)" in grid


def test_a_missing_document_or_every_region_down_says_the_edge_fails_static() -> None:
    base = dict(stack="prod", server_id="acme-mcp", generated_at="now", probe_regions=["us-east-1"],
                regions=["us-east-1"], alerts=[], targets=[])
    for routing in (_routing(readable=False), _routing("us-east-1", fail_static=True)):
        assert "fails static" in render_page(Snapshot(**base, routing=routing), {})  # type: ignore[arg-type]
    assert "No region avoided" in render_page(Snapshot(**base, routing=_routing()), {})  # type: ignore[arg-type]


# --- active alerts: what was sent and is not resolved, one line per event ------------------

PROBES = ["us-east-1", "eu-west-1", "ap-northeast-1"]


def _sent(kind: str, key: str, at: str, state: str = "sent", expires: str = "2026-11-29T11:00:00+00:00") -> Alert:
    return Alert(kind=kind, key=key, state=state, claimed_at=at, expires_at=expires)


def _outage_of_eu_west_1() -> tuple[list[Alert], list[TargetStatus]]:
    alerts = [_sent("target-down", "target-down#origin@eu-west-1", "2026-11-29T10:00:01+00:00"),
              _sent("target-down", "target-down#edge@eu-west-1", "2026-11-29T10:00:02+00:00"),
              _sent("region-avoided", "region-avoided#eu-west-1#etag1", "2026-11-29T10:00:03+00:00")]
    targets = [_target(probe, f"{kind}@eu-west-1", status="failed", consecutive_failures=3)
               for probe in PROBES for kind in ("edge", "origin")]
    targets.append(_target("us-east-1", "origin@us-east-1"))
    return alerts, targets


def test_one_outage_seen_from_every_probe_region_is_one_event_naming_them() -> None:
    alerts, targets = _outage_of_eu_west_1()
    events = active_events(alerts, targets, "2026-11-29T10:05:00+00:00")
    assert len(events) == 1
    (event,) = events
    assert (event.kind, event.subject, event.since) == ("outage", "eu-west-1", "2026-11-29T10:00:01+00:00")
    assert event.seen_from == sorted(PROBES)
    assert event.alerts == ["down: edge@eu-west-1", "down: origin@eu-west-1", "region avoided"]
    page = render_page(dataclasses.replace(_snapshot(*targets), probe_regions=PROBES, active=events), {})
    active = _text(page[page.index("Active alerts"):page.index("Details")])
    assert active.count("outage") == 1 and "failing from 3 of 3 probe regions" in active


def test_drift_and_skew_alerts_that_were_sent_are_active_and_claims_not_sent_are_not() -> None:
    alerts = [_sent("schema-drift", "schema-drift#aaa->bbb", "2026-11-29T10:00:00+00:00"),
              _sent("schema-skew", "schema-skew#aaa+bbb", "2026-11-29T10:00:01+00:00"),
              _sent("target-down", "target-down#origin@us-east-1", "2026-11-29T10:00:02+00:00", state="claimed")]
    events = active_events(alerts, [], "2026-11-29T10:05:00+00:00")
    assert [(e.kind, e.subject) for e in events] == [("schema-drift", "aaa->bbb"), ("schema-skew", "aaa+bbb")]
    page = _text(render_page(dataclasses.replace(_snapshot(), active=events), {}))
    assert "schema drift" in page and "schema skew" in page


def test_resolved_alerts_leave_the_active_list() -> None:
    alerts, targets = _outage_of_eu_west_1()
    alerts += [_sent("target-recovered", "target-recovered#origin@eu-west-1", "2026-11-29T10:09:00+00:00"),
               _sent("target-recovered", "target-recovered#edge@eu-west-1", "2026-11-29T10:09:00+00:00"),
               _sent("region-restored", "region-restored#eu-west-1#etag2", "2026-11-29T10:09:01+00:00"),
               _sent("schema-skew", "schema-skew#aaa+bbb", "2026-11-29T10:00:01+00:00"),
               _sent("schema-skew-resolved", "schema-skew-resolved#aaa+bbb", "2026-11-29T10:02:00+00:00"),
               _sent("schema-drift", "schema-drift#aaa->bbb", "2026-11-29T09:00:00+00:00",
                     expires="2026-11-29T10:00:00+00:00")]
    assert active_events(alerts, targets, "2026-11-29T10:10:00+00:00") == []
    # A second outage after the recovery is active again (its claim replaces the expired one).
    alerts[0] = _sent("target-down", "target-down#origin@eu-west-1", "2026-11-29T10:20:00+00:00")
    assert [e.subject for e in active_events(alerts, targets, "2026-11-29T10:21:00+00:00")] == ["eu-west-1"]
    assert "None" in _text(render_page(_snapshot(), {}))


def test_an_avoided_region_whose_probes_are_green_again_shows_its_recovery() -> None:
    # Given eu-west-1 avoided, green again from two probe regions (2 and 1 rounds) and still failing from one.
    successes = {"us-east-1": {"edge": 2, "origin": 3}, "eu-west-1": {"edge": 1, "origin": 1},
                 "ap-northeast-1": {"edge": 0, "origin": 0}}
    recovery = recovery_progress(successes, quorum=2, needed=3)
    # Then the quorum has seen one round: the second-best probe region's smallest streak.
    assert recovery == Recovery(rounds=1, needed=3)
    assert recovery_progress({"us-east-1": {"edge": 0, "origin": 4}}, quorum=1, needed=3) is None
    alerts, targets = _outage_of_eu_west_1()
    green = [dataclasses.replace(t, status="healthy", consecutive_failures=0) for t in targets]
    events = active_events(alerts, green, "2026-11-29T10:05:00+00:00", {"eu-west-1": recovery})
    snapshot = dataclasses.replace(_snapshot(*green), regions=["us-east-1", "eu-west-1"], active=events,
                                   routing=EdgeRouting(store=True, readable=True, published_at="x", fail_static=False,
                                                       avoided=[AvoidedRegion("eu-west-1", "t", recovery)]))
    text = _text(render_page(snapshot, {}))
    routing = text[text.index("Edge routing"):text.index("Health by region")]
    assert "recovering (1 of 3 rounds)" in routing
    active = text[text.index("Active alerts"):text.index("Details")]
    assert "probes green again" in active and "recovering (1 of 3 rounds)" in active


@given(streaks=st.dictionaries(st.sampled_from(PROBES), st.fixed_dictionaries(
    {"edge": st.integers(0, 20), "origin": st.integers(0, 20)})), quorum=st.integers(1, 3), needed=st.integers(1, 10))
def test_recovery_never_counts_past_what_restores_nor_below_a_quorum(streaks: dict, quorum: int, needed: int) -> None:
    recovery = recovery_progress(streaks, quorum, needed)
    voters = [p for p, t in streaks.items() if min(t.values()) > 0]
    if len(voters) < quorum:
        assert recovery is None
    else:
        assert recovery is not None and 1 <= recovery.rounds <= needed
        # at least a quorum of probe regions has seen every round counted
        assert sum(min(t.values()) >= recovery.rounds for t in streaks.values()) >= quorum


def test_before_the_first_publication_the_page_says_not_published_yet() -> None:
    assert first_publication("1970-01-01T00:00:00.000Z") == ""
    assert first_publication("2026-11-29T10:00:00.000Z") == "2026-11-29T10:00:00.000Z"
    snapshot = dataclasses.replace(_snapshot(), routing=EdgeRouting(store=True, readable=True, published_at="",
                                                                      fail_static=False, avoided=[]))
    page = render_page(snapshot, {})
    assert "not published yet" in page and "1970" not in page


def test_region_names_are_kept_on_one_line() -> None:
    alerts, targets = _outage_of_eu_west_1()
    snapshot = dataclasses.replace(_snapshot(*targets), probe_regions=PROBES, regions=["us-east-1", "eu-west-1"],
                                   active=active_events(alerts, targets, "2026-11-29T10:05:00+00:00"))
    page = render_page(snapshot, {})
    assert ".region,.when{white-space:nowrap}" in page
    # every region name on the page is inside a no-wrap element
    bare = re.sub(r"<(span|b) class='region'>[^<]*</\1>", "", page)
    assert "eu-west-1" not in _text(bare).replace("edge@eu-west-1", "").replace("origin@eu-west-1", "")


def test_recovery_counts_against_the_quorum_and_rounds_the_consumers_run_with() -> None:
    import types

    from local.status import health_settings

    def plan(env: dict[str, str]) -> Any:
        consumer = types.SimpleNamespace(environment={"HEALTH_PROBE_REGIONS": ",".join(PROBES), **env})
        return types.SimpleNamespace(functions=[types.SimpleNamespace(environment={}), consumer],
                                     probe_regions=PROBES)

    # 0 means a majority, as the consumer reads it
    assert health_settings(plan({"HEALTH_QUORUM": "0", "HEALTH_RECOVERY_THRESHOLD": "3"})) == (2, 3)
    assert health_settings(plan({"HEALTH_QUORUM": "3", "HEALTH_RECOVERY_THRESHOLD": "5"})) == (3, 5)
