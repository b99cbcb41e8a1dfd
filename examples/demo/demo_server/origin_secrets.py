"""Where the origin secret comes from: AWS Secrets Manager, read once per execution
environment at start-up (``secrets_manager``: one signed request, no boto3).

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
from .secrets_manager import DEADLINE_S, SecretReadError, get_secret_string
from .settings import SettingsError

# Read at start-up only, and kept: anything that asks again in the same environment gets
# the same value (a rotation restarts environments instead, see above).
_read: dict[str, str] = {}


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
    """The secret's value, read once per process (``secrets_manager``: bounded, within
    the init phase's 10 s: an outage fails the start with a clear error, never hangs it)."""
    if secret_id not in _read:
        try:
            _read[secret_id] = get_secret_string(secret_id, user_agent="mcp-edge-origin")
        except SecretReadError as exc:
            raise SettingsError([f"{OriginEnv.ORIGIN_SECRET_ID} = {secret_id!r}: cannot read it from Secrets "
                                 f"Manager: {exc}"]) from None
    return _read[secret_id]


@dataclass(frozen=True)
class EarlyRead:
    """One read of the secret in a daemon thread, started with the process (``app``
    imports this module before the SDK), so it runs while the SDK is imported."""

    secret_id: str
    outcome: Future[str]

    def result(self) -> str:
        # The read is bounded (secrets_manager.DEADLINE_S); the wait only guards a stuck thread.
        try:
            return self.outcome.result(timeout=DEADLINE_S + 5)
        except TimeoutError:
            raise SettingsError([f"{OriginEnv.ORIGIN_SECRET_ID} = {self.secret_id!r}: no answer from "
                                 "Secrets Manager"]) from None


def _read_into(secret_id: str, outcome: Future[str]) -> None:
    try:
        outcome.set_result(read_origin_secret(secret_id))
    except SettingsError as exc:
        outcome.set_exception(exc)
    except Exception as exc:  # never leave the waiter without an outcome
        outcome.set_exception(SettingsError([f"{OriginEnv.ORIGIN_SECRET_ID} = {secret_id!r}: cannot read it from "
                                             f"Secrets Manager: {type(exc).__name__}: {str(exc)[:200]}"]))


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
