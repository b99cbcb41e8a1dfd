"""Where the origin secret comes from: AWS Secrets Manager, read once per execution
environment at start-up (AWS Lambda Powertools parameters, cached).

The program stores the secret as ``{"current": "...", "previous": "..."}`` in one
secret per region (components/secrets.py) and gives the function only its ARN
(``ORIGIN_SECRET_ID``) and version id (``ORIGIN_SECRET_VERSION``): nothing that opens
the origin is readable with ``lambda:GetFunctionConfiguration``. A rotation writes a
new secret version, which changes ``ORIGIN_SECRET_VERSION``: Lambda publishes a new
function version and every execution environment starts again and reads the new
pair, so both values are accepted during the overlap, as before.

The read starts with the process: ``app`` imports this module before the SDK, and
importing it starts the read (``start_from_environment(os.environ)``) in a daemon
thread, like the key set's download (``key_prefetch``), so it runs while the SDK is
imported; start-up then takes its outcome (``early_or_read``), a failure included.

Without ``ORIGIN_SECRET_ID`` (tests, the local topology's origins) ``ORIGIN_SECRET``
and ``ORIGIN_SECRET_PREVIOUS`` are taken from the environment as they are.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from .contract import ORIGIN_SECRET_DOC_CURRENT, ORIGIN_SECRET_DOC_PREVIOUS, OriginEnv, OriginSecretValuesEnv
from .settings import SettingsError

# Read at start-up only; the cache covers anything that asks again in the same environment.
CACHE_S = 3600
# Short timeouts: the read runs in Lambda's init phase (10 s), and a Secrets Manager
# outage must fail the start with a clear error, not hang it.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, MAX_ATTEMPTS = 2, 3, 2
_provider: Any = None


def parse_origin_secret(secret_id: str, raw: Any) -> tuple[str, str]:
    """(current, previous) from the secret's value; previous is "" outside a rotation."""
    try:
        doc = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        doc = None
    current = doc.get(ORIGIN_SECRET_DOC_CURRENT) if isinstance(doc, dict) else None
    previous = doc.get(ORIGIN_SECRET_DOC_PREVIOUS, "") if isinstance(doc, dict) else None
    if not isinstance(current, str) or not current or not isinstance(previous, str | None):
        raise SettingsError([
            f"{OriginEnv.ORIGIN_SECRET_ID} = {secret_id!r}: the secret must be a JSON object "
            f'{{"{ORIGIN_SECRET_DOC_CURRENT}": "<secret>", "{ORIGIN_SECRET_DOC_PREVIOUS}": "<secret or empty>"}} '
            "(as the program writes it)"])
    return current, previous or ""


def read_origin_secret(secret_id: str) -> str:
    """The secret's value through Powertools' SecretsProvider (one client, cached)."""
    global _provider
    try:
        if _provider is None:
            from aws_lambda_powertools.utilities.parameters import SecretsProvider
            from botocore.config import Config

            _provider = SecretsProvider(boto_config=Config(
                connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"}))
        value = _provider.get(secret_id, max_age=CACHE_S)
    except Exception as exc:  # botocore and Powertools raise many types; all mean "no secret"
        raise SettingsError([f"{OriginEnv.ORIGIN_SECRET_ID} = {secret_id!r}: cannot read it from Secrets Manager: "
                             f"{type(exc).__name__}: {str(exc)[:300]}"]) from None
    return str(value)


@dataclass(frozen=True)
class EarlyRead:
    """One read of the secret in a daemon thread, started with the process (``app``
    imports this module before the SDK), so it runs while the SDK is imported."""

    secret_id: str
    outcome: Future[str]

    def result(self) -> str:
        # The read is bounded (timeouts and attempts above); the wait only guards a stuck thread.
        try:
            return self.outcome.result(timeout=(CONNECT_TIMEOUT_S + READ_TIMEOUT_S) * MAX_ATTEMPTS + 5)
        except TimeoutError:
            raise SettingsError([f"{OriginEnv.ORIGIN_SECRET_ID} = {self.secret_id!r}: no answer from "
                                 "Secrets Manager"]) from None


def _read_into(secret_id: str, outcome: Future[str]) -> None:
    try:
        outcome.set_result(read_origin_secret(secret_id))
    except SettingsError as exc:
        outcome.set_exception(exc)


_early: EarlyRead | None = None


def start_from_environment(environ: Mapping[str, str]) -> EarlyRead | None:
    """Start reading the secret ORIGIN_SECRET_ID names, if any (the origin's process)."""
    global _early
    secret_id = environ.get(OriginEnv.ORIGIN_SECRET_ID, "").strip()
    if secret_id and _early is None:
        _early = EarlyRead(secret_id, Future())
        threading.Thread(target=_read_into, args=(secret_id, _early.outcome), daemon=True,
                         name="origin-secret-early-read").start()
    return _early


def early_or_read(secret_id: str) -> str:
    """The early read's value when it read this secret, else a read now."""
    early = _early
    return early.result() if early is not None and early.secret_id == secret_id else read_origin_secret(secret_id)


def with_origin_secrets(env: Mapping[str, str], read: Callable[[str], Any] = early_or_read) -> dict[str, str]:
    """``env`` with ORIGIN_SECRET (and ORIGIN_SECRET_PREVIOUS) taken from Secrets Manager
    when ORIGIN_SECRET_ID names the secret; ``env`` as it is otherwise."""
    secret_id = env.get(OriginEnv.ORIGIN_SECRET_ID, "").strip()
    if not secret_id:
        return dict(env)
    current, previous = parse_origin_secret(secret_id, read(secret_id))
    return {**env, OriginSecretValuesEnv.ORIGIN_SECRET: current, OriginSecretValuesEnv.ORIGIN_SECRET_PREVIOUS: previous}


start_from_environment(os.environ)
