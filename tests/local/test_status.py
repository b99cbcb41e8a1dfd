"""The status page: per probe region and target, with nothing from the table rendered unescaped."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st

from local.status import (
    Alert,
    AvoidedRegion,
    EdgeRouting,
    Failure,
    Point,
    Snapshot,
    TargetStatus,
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
    assert page.index("Probes from us-east-1") < page.index("edge@eu-west-1") < page.index("Probes from eu-west-1")
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
    assert "edge from us-east-1" in grid and "origin from eu-west-1" in grid
    assert "failed (4)" in grid and "(avoided)" in grid
    active = page[page.index("Active alerts"):page.index("Details")]
    assert "region avoided: eu-west-1" in active and "down: origin@eu-west-1 from us-east-1" in active


def test_a_missing_document_or_every_region_down_says_the_edge_fails_static() -> None:
    base = dict(stack="prod", server_id="acme-mcp", generated_at="now", probe_regions=["us-east-1"],
                regions=["us-east-1"], alerts=[], targets=[])
    for routing in (_routing(readable=False), _routing("us-east-1", fail_static=True)):
        assert "fails static" in render_page(Snapshot(**base, routing=routing), {})  # type: ignore[arg-type]
    assert "No region avoided" in render_page(Snapshot(**base, routing=_routing()), {})  # type: ignore[arg-type]
