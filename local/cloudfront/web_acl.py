"""The distribution's AWS WAF web ACL at the local edge, where CloudFront applies it: after
its own request limits and before the viewer-request function.

CloudFront hands WAF the request's head and the first part of its body (the web ACL's
body inspection limit), so here that part of the body is read before the web ACL decides,
and handed on unchanged to the rest of the edge (``check`` returns a ``receive`` that replays it).
A blocked request gets the rule's response (the stack's JSON-RPC 429) and goes no further:
no function runs, no origin sees it. The rules are the program's own, the web ACL
resource's inputs from the mock run (``local/plan.py``), evaluated by
``local.firewall.WebAclEmulator``.

Blocks are written, per rule, to a small JSON file (``BlockLog``) that the status page
reads (``local/firewall_status.py``): the rule, when, never the request's token.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from local.cloudfront.events import EdgeResponse
from local.firewall import FirewallRequest, FirewallVerdict, WebAclEmulator

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

RECENT_S = 15 * 60
"""How far back the block log keeps each rule's block times (the status page's "recent")."""
MAX_RECENT = 1000
"""Block times kept per rule (the count beyond it is in ``total``)."""


class BlockLog:
    """Per rule: how many requests it blocked, the last time, and the times of the recent
    ones; rewritten whole (atomically) on each block, so a reader never sees half a file."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        self.path = path
        self.clock = clock
        self._rules: dict[str, dict[str, Any]] = {}
        self._recent: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def record(self, rule: str) -> None:
        now = self.clock()
        with self._lock:
            entry = self._rules.setdefault(rule, {"total": 0, "last": None})
            entry["total"] += 1
            entry["last"] = now
            recent = self._recent.setdefault(rule, deque(maxlen=MAX_RECENT))
            recent.append(now)
            while recent and recent[0] < now - RECENT_S:
                recent.popleft()
            doc = {"updatedAt": now, "rules": {name: {**e, "recent": list(self._recent[name])}
                                               for name, e in self._rules.items()}}
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.path)


def read_block_log(path: str | Path) -> dict[str, Any]:
    """What ``BlockLog`` wrote; empty rules when nothing was blocked yet."""
    try:
        doc = json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {"updatedAt": None, "rules": {}}
    return doc if isinstance(doc, dict) and isinstance(doc.get("rules"), dict) else {"updatedAt": None, "rules": {}}


def response_of(verdict: FirewallVerdict) -> EdgeResponse:
    """A block as CloudFront sends WAF's answer: the rule's status, headers and body."""
    return EdgeResponse(verdict.status, [*verdict.headers, ("x-cache", "Error from cloudfront")], verdict.body)


class EdgeWebAcl:
    """The web ACL one local edge applies (its rate counts live as long as the edge)."""

    def __init__(self, web_acl_inputs: Mapping[str, Any], block_log: Path | None = None):
        self.emulator = WebAclEmulator.from_web_acl_inputs(web_acl_inputs)
        self.blocks = BlockLog(block_log) if block_log else None

    async def check(self, method: str, path: str, query: str, headers: list[tuple[str, str]], client_ip: str,
                    receive: Receive) -> tuple[EdgeResponse | None, Receive]:
        """The block answer (None: allowed) and the ``receive`` the rest of the edge reads
        the body from. ``path`` is the raw path as sent (WAF decodes it where a rule says)."""
        messages: list[Message] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] == "http.disconnect":
                break
            body += message.get("body", b"")
            # WAF waits for what it inspects, and one byte more tells an oversize body.
            if not message.get("more_body") or len(body) > self.emulator.body_inspection_bytes:
                break
        joined: dict[str, str] = {}
        for name, value in headers:
            joined[name] = f"{joined[name]}, {value}" if name in joined else value
        verdict = self.emulator.evaluate(FirewallRequest(method=method, path=path, headers=joined, body=body,
                                                         client_ip=client_ip, query=query))
        if not verdict.allowed:
            if self.blocks is not None and verdict.rule:
                self.blocks.record(verdict.rule)
            return response_of(verdict), receive

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return None, replay
