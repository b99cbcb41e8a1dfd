"""The status page as a browser lays it out at 1280 px: headless Chromium renders a busy
page (four regions probed from four, an outage, a recovering region, a drift, the
operator section); no region name or time is broken over two lines and nothing is wider than
the window. Skipped where no Chromium is installed (Debian: ``apt-get install chromium``).

``STATUS_SCREENSHOT=path.png`` also saves a screenshot to look at.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from local.status import (
    ActiveEvent,
    Alert,
    AvoidedRegion,
    EdgeRouting,
    Failure,
    OperatorView,
    Point,
    Recovery,
    Snapshot,
    TargetStatus,
    render_page,
)

WIDTH = 1280
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1"]

# Run after layout: every region name's and time's line boxes, and the page's width, into the DOM.
MEASURE = """<script>
const wrapped = [...document.querySelectorAll('.region, .when')].filter(e => e.getClientRects().length > 1)
  .map(e => e.textContent);
document.body.setAttribute('data-layout', JSON.stringify({regions: document.querySelectorAll('.region').length,
  wrapped, width: document.documentElement.scrollWidth}));
</script>"""

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (Debian: apt-get install -y chromium)")


def busy_page() -> str:
    targets = []
    for probe in REGIONS:
        for region in REGIONS:
            for kind in ("edge", "origin"):
                down = region == "eu-west-1"
                targets.append(TargetStatus(
                    probe_region=probe, label=f"{kind}@{region}",
                    endpoint=f"https://d111111abcdef8.cloudfront.net/mcp?pin={region}" if kind == "edge"
                    else f"https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.{region}.on.aws/mcp",
                    status="failed" if down else "healthy", checked_at="2026-11-29T10:04:55.123Z",
                    latency_ms=None if down else 42.0, tool_count=4, schema_hash="ab12" * 16,
                    served_region=None if down else region, consecutive_failures=4 if down else 0,
                    history=[Point(f"t{i}", 40.0 + i, not down) for i in range(30)],
                    failures=[Failure("2026-11-29T10:04:55.123Z", "ProbeConnectError",
                                      "connection refused: " + "x" * 150, "RetriesExhausted")] if down else []))
    alerts = [Alert("target-down", "target-down#origin@eu-west-1", "sent", "2026-11-29T10:00:01+00:00"),
              Alert("region-avoided", "region-avoided#ap-southeast-1#etag", "sent", "2026-11-29T09:50:00+00:00")]
    active = [ActiveEvent("outage", "eu-west-1", "2026-11-29T10:00:01+00:00",
                          ["down: edge@eu-west-1", "down: origin@eu-west-1", "region avoided"], seen_from=REGIONS),
              ActiveEvent("outage", "ap-southeast-1", "2026-11-29T09:50:00+00:00", ["region avoided"],
                          recovery=Recovery(2, 3)),
              ActiveEvent("schema-drift", "ab12ab12ab12->cd34cd34cd34", "2026-11-29T09:40:00+00:00",
                          ["schema drift"], until="2026-11-29T10:40:00+00:00")]
    snapshot = Snapshot(
        stack="prod", server_id="acme-mcp", generated_at="2026-11-29T10:05:00+00:00", probe_regions=REGIONS,
        targets=targets, alerts=alerts, regions=REGIONS, active=active,
        routing=EdgeRouting(store=True, readable=True, published_at="2026-11-29T10:00:03.000Z", fail_static=False,
                            avoided=[AvoidedRegion("eu-west-1", "2026-11-29T10:00:03+00:00"),
                                     AvoidedRegion("ap-southeast-1", "2026-11-29T09:50:00+00:00", Recovery(2, 3))]))
    operator = OperatorView(REGIONS, {"eu-west-1": "hang"}, "token")
    links = {"edge": "http://127.0.0.1:8400/mcp", "issuer": "http://127.0.0.1:8401/",
             "json": "http://127.0.0.1:8403/status.json"}
    return render_page(snapshot, links, operator)


def layout(page: str, tmp_path: Path, width: int = WIDTH, screenshot: Path | None = None) -> dict:
    """How Chromium lays ``page`` out in a window ``width`` px wide (the MEASURE script's findings)."""
    assert CHROMIUM is not None
    html_file = tmp_path / "status.html"
    html_file.write_text(page.replace("</body>", MEASURE + "</body>").replace("<meta http-equiv='refresh'", "<meta x"))
    base = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1000"]
    dom = subprocess.run([*base, "--dump-dom", html_file.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    if screenshot is not None:
        subprocess.run([*base, f"--screenshot={screenshot}", html_file.as_uri()], capture_output=True, timeout=120,
                       check=True)
    found = re.search(r"data-layout=\"([^\"]*)\"", dom)
    assert found is not None, dom[-2000:]
    return dict(json.loads(found.group(1).replace("&quot;", '"')))


def test_at_1280_px_no_region_name_wraps_and_nothing_is_wider_than_the_window(tmp_path: Path) -> None:
    shot = Path(os.environ["STATUS_SCREENSHOT"]) if os.environ.get("STATUS_SCREENSHOT") else None
    measured = layout(busy_page(), tmp_path, screenshot=shot)
    assert measured["regions"] > 50  # the check saw the region names
    assert measured["wrapped"] == []
    assert measured["width"] <= WIDTH


def test_the_check_sees_a_wrapped_region_name(tmp_path: Path) -> None:
    # Without the no-wrap rule, in a narrow window, region names break at their hyphens.
    page = busy_page().replace(".region,.when{white-space:nowrap}", "")
    measured = layout(page, tmp_path, width=500)
    assert measured["wrapped"], measured
