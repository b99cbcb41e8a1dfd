"""Exceptions as a person reads them: what ``scripts/run-local`` prints instead of a traceback.

``for_people`` finds, in an exception (and the exception groups anyio and the MCP SDK
wrap failures in), the first one this project knows how to explain, and returns its
explanation; None when there is none (the caller then prints the exception's type and
message, and ``--debug`` shows the traceback).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import httpx2
from mcp.shared.exceptions import MCPError

from local.client import EdgeRefusedError
from local.control import ControlError
from local.faults import FaultError
from local.plan import PlanError

# Explained by their own message, which names the problem and what to do.
_SELF_EXPLAINED = (EdgeRefusedError, ControlError, FaultError, PlanError)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: group members, then causes, depth first."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(getattr(current, "exceptions", ()) or ())
        if current.__cause__ is not None:
            stack.append(current.__cause__)


def for_people(exc: BaseException) -> str | None:
    found = list(_leaves(exc))
    for candidate in found:
        if isinstance(candidate, _SELF_EXPLAINED):
            return str(candidate)
    for candidate in found:
        if isinstance(candidate, (httpx.TransportError, httpx2.TransportError)):
            request = getattr(candidate, "_request", None)
            where = f" {request.url}" if request is not None else ""
            return (f"cannot reach{where} ({type(candidate).__name__}: {candidate or 'no answer'}): is the local "
                    "topology running (scripts/run-local)?")
        if isinstance(candidate, MCPError):
            return f"the MCP server answered an error: {candidate}"
        if isinstance(candidate, RuntimeError) and str(candidate).startswith("token endpoint "):
            return str(candidate)  # request_token: the issuer's status and answer
    return None
