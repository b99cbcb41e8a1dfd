"""The probe's input: the target one schedule names.

EventBridge Scheduler stores its input in plain text, so the event names the target
and says which credentials it needs, never the credentials themselves. Example::

    {"endpoint": "https://mcp.example.com/mcp", "serverId": "acme-mcp",
     "target": "edge", "targetRegion": "eu-west-1", "pinRegion": "eu-west-1",
     "signed": false}

``target`` is ``edge`` (the public URL, pinned to ``pinRegion`` with the region-pin
header) or ``origin`` (a regional Function URL, called directly; ``signed``: its requests
are SigV4-signed with the probe role's credentials for ``targetRegion``). Validation reports every problem at once and raises ``ProbeInputError``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .contract import TARGET_KINDS
from .errors import ProbeInputError

_REQUIRED = ("endpoint", "serverId", "target", "targetRegion")
_OPTIONAL = ("pinRegion", "signed")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
_SERVER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_MAX_URL = 2048


@dataclass(frozen=True)
class ProbeTarget:
    endpoint: str
    server_id: str
    target: str  # "edge" | "origin"
    target_region: str
    pin_region: str | None = None
    signed: bool = False

    @property
    def label(self) -> str:
        """Short name for messages and logs, e.g. ``edge@eu-west-1``."""
        return f"{self.target}@{self.target_region}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _endpoint_problem(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return f"endpoint must be a non-empty URL string, got {value!r}"
    if len(value) > _MAX_URL:
        return f"endpoint is {len(value)} characters long; at most {_MAX_URL}"
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        return f"endpoint {value!r} is not a valid URL: {exc}"
    if not host:
        return f"endpoint {value!r} has no host"
    if parts.username or parts.password:
        return f"endpoint {value!r} must not carry credentials"
    if parts.fragment:
        return f"endpoint {value!r} must not have a #fragment"
    # Plain http only on loopback (the local run); anything on a network is https.
    if parts.scheme != "https" and not (parts.scheme == "http" and _is_loopback(host)):
        return f"endpoint {value!r} must be an https:// URL (http:// only on loopback)"
    return None


def _region_problem(key: str, value: Any) -> str | None:
    if not isinstance(value, str) or not _REGION.fullmatch(value):
        return f"{key} must be an AWS region code like eu-west-1, got {value!r}"
    return None


def parse_event(event: Any) -> ProbeTarget:
    """Validate the invocation event; raise ``ProbeInputError`` naming every problem."""
    if not isinstance(event, dict):
        raise ProbeInputError(f"probe event must be a JSON object naming the target, got {type(event).__name__}")
    problems: list[str] = []
    missing = [k for k in _REQUIRED if k not in event]
    if missing:
        problems.append(f"missing required key(s): {', '.join(missing)}")
    unknown = sorted(set(event) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        problems.append(
            f"unknown key(s): {', '.join(map(str, unknown))} (allowed: {', '.join(_REQUIRED + _OPTIONAL)}; "
            "secrets never travel in the event)"
        )
    endpoint = event.get("endpoint")
    if "endpoint" in event and (p := _endpoint_problem(endpoint)):
        problems.append(p)
    server_id = event.get("serverId")
    if "serverId" in event and not (isinstance(server_id, str) and _SERVER_ID.fullmatch(server_id)):
        problems.append(f"serverId must be 1-128 letters, digits, '.', '_' or '-', got {server_id!r}")
    target = event.get("target")
    if "target" in event and target not in TARGET_KINDS:
        problems.append(f"target must be one of {', '.join(TARGET_KINDS)}, got {target!r}")
    target_region = event.get("targetRegion")
    if "targetRegion" in event and (p := _region_problem("targetRegion", target_region)):
        problems.append(p)
    pin_region = event.get("pinRegion")
    if pin_region is not None:
        if p := _region_problem("pinRegion", pin_region):
            problems.append(p)
        elif isinstance(target_region, str) and pin_region != target_region:
            problems.append(
                f"pinRegion {pin_region!r} differs from targetRegion {target_region!r}: a pinned target is in "
                "the region it is pinned to"
            )
    signed = event.get("signed", False)
    if not isinstance(signed, bool):
        problems.append(f"signed must be true or false, got {signed!r}")
    if problems:
        raise ProbeInputError("invalid probe event: " + "; ".join(problems))
    return ProbeTarget(
        endpoint=endpoint,  # type: ignore[arg-type]
        server_id=server_id,  # type: ignore[arg-type]
        target=target,  # type: ignore[arg-type]
        target_region=target_region,  # type: ignore[arg-type]
        pin_region=pin_region,
        signed=signed,
    )
