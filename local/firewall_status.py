"""The status page's web ACL section: per rule of the stack's web ACL, the requests the local
edge blocked recently (read from the edge's block log, ``local/cloudfront/web_acl.py``).

``web_acl_blocks(plan)`` is the data (for status.json), ``web_acl_section(plan)`` the HTML
fragment; the status page calls them, and they hold no state of their own.
"""

from __future__ import annotations

import html
import time
from datetime import UTC, datetime
from typing import Any

from local.cloudfront.web_acl import RECENT_S, read_block_log
from local.firewall import snake_keys
from local.plan import LocalPlan

RECENT_MINUTES = RECENT_S // 60


def web_acl_blocks(plan: LocalPlan, now: float | None = None) -> list[dict[str, Any]] | None:
    """Each rule of the web ACL in priority order with its blocks (total, in the last
    ``RECENT_MINUTES`` minutes, the last one's time); None when the stack has no web ACL."""
    acl, log_file = plan.edge.web_acl, plan.edge.web_acl_block_log
    if not acl:
        return None
    now = time.time() if now is None else now
    logged = read_block_log(log_file)["rules"] if log_file else {}
    rows = []
    for rule in sorted(snake_keys(acl.get("rules") or []), key=lambda r: r["priority"]):
        # A managed group's blocks are logged as "<rule>:<managed rule>".
        entries = [e for name, e in logged.items() if name == rule["name"] or name.startswith(rule["name"] + ":")]
        last = max((e.get("last") or 0 for e in entries), default=0) or None
        rows.append({
            "rule": rule["name"],
            "total": sum(int(e.get("total", 0)) for e in entries),
            "recent": sum(1 for e in entries for t in e.get("recent", []) if t >= now - RECENT_S),
            "lastBlockedAt": datetime.fromtimestamp(last, UTC).isoformat(timespec="seconds") if last else None,
        })
    return rows


def web_acl_section(plan: LocalPlan, now: float | None = None) -> str:
    """The HTML section: a table of the rules and their recent blocks (empty without a web ACL)."""
    rows = web_acl_blocks(plan, now)
    if rows is None:
        return ""
    e = html.escape
    parts = [f"<h2>Web ACL (AWS WAF)</h2><p class='muted'>Requests the edge blocked before any function ran, "
             f"per rule; recent: the last {RECENT_MINUTES} minutes.</p>",
             "<table><tr><th>Rule</th><th>Recent blocks</th><th>Since start</th><th>Last block</th></tr>"]
    for row in rows:
        css = "bad" if row["recent"] else ""
        parts.append(f"<tr><td><code>{e(row['rule'])}</code></td><td class='{css}'>{row['recent']}</td>"
                     f"<td>{row['total']}</td><td>{e(row['lastBlockedAt'] or '-')}</td></tr>")
    parts.append("</table>")
    return "".join(parts)
