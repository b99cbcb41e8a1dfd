"""One probe: authenticate, speak MCP with one target, and summarize what happened.

The result (the OnSuccess ``responsePayload``)::

    {"status": "healthy" | "degraded", "degradedReasons": [...],
     "latencyMs": 41.7,                     # the whole MCP exchange, token fetch excluded
     "phases": {"connectMs": 3.1, "firstByteMs": 12.0, "totalMs": 41.7},
     "steps": [{"method": "server/discover", "httpStatus": 200, "ms": 12.9}, ...],
     "toolCount": 7, "schemaHash": "<sha256 hex>", "protocolVersion": "2026-07-28",
     "era": "modern" | "legacy", "fallbackReason": null | "<why discover was not used>",
     "servedRegion": "eu-west-1" | null, "probeRegion": "us-east-1",
     "httpStatus": 200, "contentType": "application/json", "checkedAt": "<ISO 8601 UTC>",
     "promise": {"check": "forged-token", "status": "pass", "httpStatus": 401, "detail": null}}

``connectMs`` is DNS + TCP + TLS of the (fresh) connection, ``firstByteMs`` the time
to the first response's headers, ``totalMs`` the exchange until its last byte.
A degraded reason is also a server that keeps sessions (it issued an ``Mcp-Session-Id`` and
refuses a request without it): it answered this round, but will not once Lambda runs a
second instance (``advice.py`` names the setting for each SDK). A server that answered
2026-07-28 is asked the legacy handshake too when ``HandshakeChecks`` says it is due.
``promise`` is the round's check that the platform refuses what it must (``promise.py``),
made after the exchange, so the exchange's timings are its own.

A direct target (``signed``) gets every request SigV4-signed (``Signer``, ``sigv4.py``) and
the bearer token in ``EDGE_AUTHORIZATION_HEADER``, since the signature takes
``Authorization``; an edge target gets the token in ``Authorization``, as any viewer.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .advice import stateful_server_advice
from .auth import TokenSource
from .contract import EDGE_AUTHORIZATION_HEADER, REGION_PIN_HEADER, SERVED_REGION_HEADER
from .errors import ProbeAuthError, ProbeConfigError, ProbeError, ProbePromiseError, ProbeTimeoutError
from .event import ProbeTarget
from .exchange import ExchangeResult, handshake_stateful, run_exchange
from .promise import BROKEN, broken_text, check_promise
from .schema_hash import schema_hash
from .wire import Deadline, McpHttp

USER_AGENT = "mcp-edge-probe/1.0"
# (method, url, body) -> the headers that sign the request.
Signer = Callable[[str, str, bytes], Mapping[str, str]]


@dataclass(frozen=True)
class ProbeSettings:
    deadline_s: float
    degraded_latency_ms: float
    probe_region: str
    region_pin_header: str = REGION_PIN_HEADER
    served_region_header: str = SERVED_REGION_HEADER

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProbeSettings:
        problems = []

        def number(name: str, default: str) -> float:
            raw = env.get(name, default)
            try:
                value = float(raw)
            except ValueError:
                value = -1.0
            if not value > 0:
                problems.append(f"{name}={raw!r} must be a positive number")
            return value

        settings = cls(
            deadline_s=number("PROBE_DEADLINE_S", "20"),
            degraded_latency_ms=number("PROBE_DEGRADED_LATENCY_MS", "1500"),
            probe_region=env.get("AWS_REGION", "") or "unknown",
        )
        if problems:
            raise ProbeConfigError("probe environment is invalid: " + "; ".join(problems))
        return settings


# How often one execution environment asks a target that answered 2026-07-28 the legacy
# handshake too (three requests: initialize, tools/list without the session, DELETE), to
# tell a server stateful on the handshake: rarely, since it is a server's setting, not its health.
HANDSHAKE_CHECK_INTERVAL_S = 600.0


class HandshakeChecks:
    """Per endpoint, when the handshake was last checked and whether the server was stateful."""

    def __init__(self, interval_s: float = HANDSHAKE_CHECK_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self._clock = clock
        self._seen: dict[str, tuple[float, bool]] = {}

    def due(self, endpoint: str) -> bool:
        last = self._seen.get(endpoint)
        return last is None or self._clock() - last[0] >= self.interval_s

    def record(self, endpoint: str, stateful: bool) -> None:
        self._seen[endpoint] = (self._clock(), stateful)

    def stateful(self, endpoint: str) -> bool:
        return self._seen.get(endpoint, (0.0, False))[1]


def target_headers(target: ProbeTarget, settings: ProbeSettings) -> dict[str, str]:
    """The headers a target needs besides the token and the signature: the region pin."""
    return {settings.region_pin_header: target.pin_region} if target.pin_region else {}


def token_header(target: ProbeTarget, token: str) -> dict[str, str]:
    """Where the bearer token goes: ``Authorization`` through the edge, the side header on a
    signed request (whose ``Authorization`` is the signature; the adapter restores it)."""
    return {EDGE_AUTHORIZATION_HEADER if target.signed else "authorization": f"Bearer {token}"}


def summarize(target: ProbeTarget, settings: ProbeSettings, exchange: ExchangeResult, now: dt.datetime) -> dict[str, Any]:
    answers = exchange.answers
    first, tools_answer = answers[0], exchange.tools_answer
    total_ms = sum(a.total_ms for a in answers)
    served = tools_answer.headers.get(settings.served_region_header) or next(
        (a.headers[settings.served_region_header] for a in answers if settings.served_region_header in a.headers), None
    )
    reasons = []
    if total_ms > settings.degraded_latency_ms:
        reasons.append(f"latency {total_ms:.0f} ms above {settings.degraded_latency_ms:g} ms")
    if served is not None and served != target.target_region:
        pinned = " although pinned there" if target.pin_region else ""
        reasons.append(f"served by {served} instead of {target.target_region}{pinned}")
    if exchange.stateful:
        reasons.append(stateful_server_advice())
    return {
        "status": "degraded" if reasons else "healthy",
        "degradedReasons": reasons,
        "latencyMs": round(total_ms, 1),
        "phases": {
            "connectMs": round(sum(a.connect_ms for a in answers), 1),
            "firstByteMs": round(first.first_byte_ms, 1),
            "totalMs": round(total_ms, 1),
        },
        "steps": [a.step() for a in answers],
        "toolCount": len(exchange.tools),
        "schemaHash": schema_hash(exchange.tools),
        "protocolVersion": exchange.protocol_version,
        "era": exchange.era,
        "fallbackReason": exchange.fallback_reason,
        "servedRegion": served,
        "probeRegion": settings.probe_region,
        "httpStatus": tools_answer.status,
        "contentType": tools_answer.content_type,
        "checkedAt": now.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def run_probe(
    target: ProbeTarget,
    settings: ProbeSettings,
    tokens: TokenSource | None,
    new_client: Callable[[], httpx.Client],
    deadline: Deadline,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    *,
    sign: Signer | None = None,
    forged_token: Callable[[str], str] | None = None,
    handshake: HandshakeChecks | None = None,
) -> dict[str, Any]:
    """Probe one target, then check the platform's promise on it; the result dict, or a typed
    ``ProbeError``. ``sign`` signs a direct target's requests (required for one);
    ``forged_token`` makes the forgery of a real token (``forge.forge``); ``handshake`` (the
    handler's, per execution environment) asks a 2026-07-28 server the legacy handshake too
    when due, and keeps what it found."""
    if target.signed and sign is None:
        raise ProbeConfigError(f"target {target.label} is a Function URL, whose requests must be signed, "
                               "but the probe has no credentials to sign with")
    static = target_headers(target, settings)
    started = now()
    retried = False
    token: str | None = None
    try:
        while True:
            headers = dict(static)
            fetches_before = tokens.fetches if tokens else 0
            if tokens is not None:
                token = tokens.token(deadline)
                headers.update(token_header(target, token))
            fresh_token = tokens is not None and tokens.fetches > fetches_before
            # A fresh client per probe: every probe measures a fresh connection (DNS, TCP,
            # TLS), as a new MCP client would see it, instead of a warm one.
            with new_client() as client:
                try:
                    exchange = run_exchange(McpHttp(client, target.endpoint, deadline, headers, sign=sign))
                except ProbeAuthError as exc:
                    # A cached token the target refuses (keys rotated, token revoked): once
                    # more with a fresh token before reporting an auth failure.
                    if tokens is None or fresh_token or retried or exc.status != 401:
                        raise
                    tokens.invalidate()
                    retried = True
                    continue
                if handshake is not None and exchange.era == "modern":
                    if handshake.due(target.endpoint):
                        handshake.record(target.endpoint, handshake_stateful(
                            McpHttp(client, target.endpoint, deadline, headers, sign=sign)))
                    exchange.stateful = handshake.stateful(target.endpoint)
            break
    except ProbeError as failure:
        # The target failed, but the promise may still be broken: an alert must not wait for it to answer.
        promise = _promise(target, new_client, deadline, None, token, forged_token)
        if promise["status"] == BROKEN:
            raise ProbePromiseError(f"{broken_text(target, promise)}; the probe itself failed: "
                                    f"{type(failure).__name__}: {failure}") from None
        raise
    result = summarize(target, settings, exchange, started)
    result["promise"] = _promise(target, new_client, deadline, exchange.era, token, forged_token)
    return result


def _promise(target: ProbeTarget, new_client: Callable[[], httpx.Client], deadline: Deadline, era: str | None,
             token: str | None, forged_token: Callable[[str], str] | None) -> dict[str, Any]:
    real, forge = token, forged_token
    forgery = (lambda: forge(real)) if forge is not None and real is not None else None
    return check_promise(target, new_client, deadline, era=era, forged_token=forgery, real_token=token)


@contextlib.contextmanager
def hard_deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise ProbeTimeoutError after ``seconds`` wherever the code is blocked.

    Backstop for the per-operation timeouts (DNS lookups, a library that ignores
    its timeout): SIGALRM interrupts the main thread's blocking call. Off the main
    thread (signals are not available there) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise ProbeTimeoutError(f"{what}: hard deadline of {seconds:.3g} s reached")

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:  # someone else's alarm (a test runner's timeout): put it back
            left = outer_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), outer_interval)
