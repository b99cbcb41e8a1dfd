"""The platform's promise, checked every round: nothing reaches a server unverified.

With every probe of a target, one more request the platform must refuse:

- an edge target: the edge pinned to the target's region, with a forged token (``forge.py``:
  the right ``iss``/``aud``/``exp``, signed by the probe's own key), and the probe's real
  token beside it in ``PROBE_TOKEN_HEADER``, which the edge never forwards. Expected: 401
  with the edge's proof that the refusal is its own, ``PROBE_CHECK_HEADER`` (a digest of the
  real token: no origin ever sees that token, so none can compute it). A 401 without it came
  from the server: the forged token got through the edge and only the server's own token
  check refused it, so it is ``broken`` (a server that verifies tokens must not hide a gate
  that fails open). The edge also counts the refusal as the probes' in its metrics (so the
  probes' checks stay out of users' 4xx). Without a real token to prove with, the edge's
  mark ``REFUSAL_HEADER`` (``x-mcp-edge-refusal``) decides.
- an origin target: the Function URL, unsigned (the real token in the side header, so a
  URL left open would be answered by the server, even one that verifies tokens itself).
  Expected: 403.

The request is the exchange's own first request (``server/discover``, or ``initialize``
for a server of the handshake era), which the server answers 2xx whenever it gets it.
The verdict, in the probe result as ``promise``::

    {"check": "forged-token" | "unsigned", "status": "pass" | "broken" | "unknown",
     "httpStatus": 401 | null, "detail": "<why, for unknown and broken>"}

Any 2xx is ``broken`` (the results consumer alerts on it), and so is the edge's expected 401
without the edge's mark. The expected refusal is ``pass``.
A timeout, a connection failure, a 5xx or any other answer is ``unknown``: it proves
neither, and the target's own probe reports the outage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from .contract import (
    EDGE_AUTHORIZATION_HEADER,
    PROBE_CHECK_HEADER,
    PROBE_TOKEN_HEADER,
    REFUSAL_HEADER,
    REGION_PIN_HEADER,
)
from .errors import ProbeError
from .event import ProbeTarget
from .exchange import CLIENT_INFO, LATEST_HANDSHAKE, modern_headers, modern_params
from .wire import ACCEPT, JSON_TYPE, Deadline, deadline_active

CHECK_FORGED_TOKEN = "forged-token"
CHECK_UNSIGNED = "unsigned"
EXPECTED_STATUS = {CHECK_FORGED_TOKEN: 401, CHECK_UNSIGNED: 403}
PASS, BROKEN, UNKNOWN = "pass", "broken", "unknown"
# The check's share of the probe's deadline: enough for one request, never the whole probe.
BUDGET_S = 5.0


def probe_check_proof(token: str) -> str:
    """The edge's proof, in ``PROBE_CHECK_HEADER``, that it refused the forged-token check
    itself: a digest of the probe's real token, which the edge never forwards (the gate's
    copy of this rule: ``edge_gate.handler.probe_proof``)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def check_of(target: ProbeTarget) -> str:
    return CHECK_UNSIGNED if target.signed else CHECK_FORGED_TOKEN


def verdict(check: str, status: int | None, edge_mark: str | None = None, proven: bool | None = None) -> str:
    """``pass``, ``broken`` or ``unknown`` for the answer's status (None: no answer) and the
    edge's proof that a forged-token refusal is its own: ``proven`` (the ``PROBE_CHECK_HEADER``
    digest of the probe's token, which no origin sees, matched or not), or, when the probe sent
    no token of its own to prove with (``proven`` None), the ``REFUSAL_HEADER`` mark (None or
    blank: absent)."""
    if status is None:
        return UNKNOWN
    if 200 <= status < 300:
        return BROKEN
    if status != EXPECTED_STATUS[check]:
        return UNKNOWN
    own = proven if proven is not None else bool((edge_mark or "").strip())
    if check == CHECK_FORGED_TOKEN and not own:
        return BROKEN  # the server's own 401: the forged token passed the edge
    return PASS


def first_request(era: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON-RPC request a server of that era answers 2xx, and its MCP headers."""
    if era == "legacy":
        params = {"protocolVersion": LATEST_HANDSHAKE, "capabilities": {}, "clientInfo": CLIENT_INFO}
        return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": modern_params()}
    return body, modern_headers("server/discover")


def check_promise(
    target: ProbeTarget,
    new_client: Callable[[], httpx.Client],
    deadline: Deadline,
    *,
    era: str | None,
    forged_token: Callable[[], str] | None,
    real_token: str | None,
) -> dict[str, Any]:
    """Send the one request the platform must refuse; the verdict (never raises)."""
    check = check_of(target)
    headers: dict[str, str] = {}
    if check == CHECK_FORGED_TOKEN:
        if forged_token is None:
            return _outcome(check, UNKNOWN, None, "the probe has no token to forge (no token endpoint configured)")
        try:
            headers["authorization"] = f"Bearer {forged_token()}"
        except (ProbeError, ImportError) as exc:  # not a JWT, an algorithm we cannot sign, no cryptography
            return _outcome(check, UNKNOWN, None, f"no forged token: {exc}")
        if target.pin_region:
            headers[REGION_PIN_HEADER] = target.pin_region
        if real_token is not None:  # so the edge counts this refusal as the probes', not a user's
            headers[PROBE_TOKEN_HEADER] = real_token
    elif real_token is not None:
        headers[EDGE_AUTHORIZATION_HEADER] = f"Bearer {real_token}"
    body, mcp_headers = first_request(era)
    budget = Deadline(min(BUDGET_S, deadline.remaining()))
    if budget.remaining() <= 0:
        return _outcome(check, UNKNOWN, None, "no time left in the probe's deadline")
    try:
        with deadline_active(budget), new_client() as client:
            request = client.build_request(
                "POST", target.endpoint, content=json.dumps(body, separators=(",", ":")).encode(),
                headers={"accept": ACCEPT, "content-type": JSON_TYPE, **mcp_headers, **headers},
                timeout=httpx.Timeout(budget.remaining()),
            )
            response = client.send(request, stream=True)
            response.close()  # the status is the answer; the body is not read
    except (httpx.HTTPError, ProbeError) as exc:
        return _outcome(check, UNKNOWN, None, f"no answer: {type(exc).__name__}: {str(exc)[:200] or 'timed out'}")
    status = response.status_code
    proven = None
    if check == CHECK_FORGED_TOKEN and real_token is not None:
        proven = response.headers.get(PROBE_CHECK_HEADER) == probe_check_proof(real_token)
    result = verdict(check, status, response.headers.get(REFUSAL_HEADER), proven)
    expected = EXPECTED_STATUS[check]
    if result == BROKEN and status == expected:  # the forged token's 401, without the edge's proof
        proof = PROBE_CHECK_HEADER if proven is not None else REFUSAL_HEADER
        detail: str | None = (f"answered HTTP {status} without the edge's {proof} header: the refusal "
                              "did not come from the edge, so the edge let a token signed by another key "
                              "through to the server, which refused it itself")
    else:
        detail = {
            PASS: None,
            BROKEN: f"answered HTTP {status} where {expected} was expected: "
                    + ("the edge let a token signed by another key through" if check == CHECK_FORGED_TOKEN
                       else "the Function URL answered a request without a signature"),
            UNKNOWN: f"answered HTTP {status} where {expected} was expected",
        }[result]
    return _outcome(check, result, status, detail)


def _outcome(check: str, status: str, http_status: int | None, detail: str | None) -> dict[str, Any]:
    return {"check": check, "status": status, "httpStatus": http_status, "detail": detail}


def broken_text(target: ProbeTarget, promise: Mapping[str, Any]) -> str:
    what = "a forged token to the edge" if promise["check"] == CHECK_FORGED_TOKEN else "an unsigned request"
    return f"{target.label}: {what} {promise['detail']}"
