"""Lambda entry point of the probe (``probe.handler.handler``).

Invoked asynchronously by EventBridge Scheduler with the target as input. Returns the
probe result (OnSuccess destination) or raises a typed ``ProbeError`` (OnFailure
destination). Writes nothing itself.

Environment:
    PROBE_DEADLINE_S, PROBE_DEGRADED_LATENCY_MS   the probe's limits
    TOKEN_URL, CLIENT_ID, CLIENT_SECRET_NAME      client credentials (secret in Secrets Manager);
                                                  no TOKEN_URL: probes send no token
    TOKEN_AUDIENCE                                audience / RFC 8707 resource of the token
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,     the probe role's credentials, as Lambda sets them: direct
    AWS_SESSION_TOKEN                             targets (Function URLs, AuthType AWS_IAM) are signed with them

Header names are the package's contract (``contract.py``), not variables.

Clients, settings and the token cache are built on the first invocation and kept for
the life of the execution environment; configuration errors surface as a typed
``ProbeConfigError`` in the failure record rather than as an init crash.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from .auth import TokenSource, secrets_manager_reader
from .errors import ProbeConfigError, ProbeError
from .event import ProbeTarget, parse_event
from .forge import forge
from .probe import USER_AGENT, HandshakeChecks, ProbeSettings, Signer, hard_deadline, run_probe
from .secrets_manager import SecretReadError, credentials_from
from .sigv4 import FunctionUrlSigner
from .tls import client_context
from .wire import Deadline, new_probe_client

logger = logging.getLogger("probe")
logger.setLevel(logging.INFO)

# Seconds kept back from the Lambda timeout, so a probe that hits its deadline still
# returns its error to the destination instead of being killed by the runtime.
SAFETY_MARGIN_S = 2.0
# The watchdog fires this long after the deadline, when the cooperative timeouts failed.
WATCHDOG_GRACE_S = 0.5


@dataclass
class Runtime:
    settings: ProbeSettings
    tokens: TokenSource | None
    tls: ssl.SSLContext
    # Per execution environment: when each target was last asked the legacy handshake.
    handshake: HandshakeChecks = field(default_factory=HandshakeChecks)

    def new_client(self) -> httpx.Client:
        return new_probe_client(self.tls, headers={"user-agent": USER_AGENT})


_runtime: Runtime | None = None


def build_runtime(env: Mapping[str, str]) -> Runtime:
    settings = ProbeSettings.from_env(env)
    tls = client_context()  # shared with the Secrets Manager reads (tls.py)
    tokens = None
    if token_url := env.get("TOKEN_URL"):
        client_id, secret_name = env.get("CLIENT_ID", ""), env.get("CLIENT_SECRET_NAME", "")
        if not client_id or not secret_name:
            raise ProbeConfigError("TOKEN_URL is set but CLIENT_ID or CLIENT_SECRET_NAME is not")
        tokens = TokenSource(
            token_url=token_url,
            client_id=client_id,
            read_client_secret=secrets_manager_reader(secret_name, env),
            audience=env.get("TOKEN_AUDIENCE") or None,
            http=new_probe_client(tls, headers={"user-agent": USER_AGENT}),
        )
    return Runtime(settings=settings, tokens=tokens, tls=tls)


def runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        _runtime = build_runtime(os.environ)
    return _runtime


def signer_for(target: ProbeTarget, env: Mapping[str, str]) -> Signer | None:
    """A direct target's signer, with the credentials Lambda gives the function now
    (read per invocation: cheap, and they are whatever the runtime last handed over)."""
    if not target.signed:
        return None
    try:
        return FunctionUrlSigner(target.target_region, credentials_from(env))
    except SecretReadError as exc:
        raise ProbeConfigError(f"cannot sign the requests to {target.label}: {exc}") from None


def handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        target = parse_event(event)
        rt = runtime()
        budget = rt.settings.deadline_s
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            budget = min(budget, context.get_remaining_time_in_millis() / 1000 - SAFETY_MARGIN_S)
        deadline = Deadline(budget)
        with hard_deadline(budget + WATCHDOG_GRACE_S, f"probe of {target.endpoint}"):
            result = run_probe(target, rt.settings, rt.tokens, rt.new_client, deadline,
                               sign=signer_for(target, os.environ), forged_token=forge, handshake=rt.handshake)
    except ProbeError as exc:
        logger.warning(json.dumps({"probe": "failed", "errorType": type(exc).__name__, "error": str(exc), "event": _safe(event)}))
        raise
    logger.info(json.dumps({"probe": "ok", "target": target.label, "endpoint": target.endpoint, **result}))
    return result


def _safe(event: Any) -> Any:
    """The event for a log line (it holds no secrets by construction, but bound its size)."""
    text = json.dumps(event, default=str)
    return event if len(text) <= 2000 else text[:2000]
