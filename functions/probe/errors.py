"""Typed probe failures.

The probe is invoked asynchronously: whatever it raises becomes the
``responsePayload`` (``errorType``, ``errorMessage``) of the OnFailure destination
record. The class name is the error type the consumer, the metrics and the
operator see, so each failure mode has its own class and a message that says
what happened, where, and how long it took.
"""

from __future__ import annotations


class ProbeError(Exception):
    """Base of every failure the probe reports on purpose."""


class ProbeInputError(ProbeError):
    """The invocation event does not name a valid target (a schedule misconfiguration)."""


class ProbeConfigError(ProbeError):
    """The probe function's own configuration (environment, secrets) is unusable."""


class ProbeTimeoutError(ProbeError):
    """The probe did not finish within its hard deadline."""


class ProbeHttpError(ProbeError):
    """The target answered with an HTTP status that is not a valid MCP answer."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class ProbeAuthError(ProbeError):
    """No usable bearer token: the token endpoint refused us, or the target answered 401."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ProbePromiseError(ProbeError):
    """The platform's promise is broken: the edge let a forged token through (a 2xx, or a 401 without
    the edge's mark: the server's own refusal), or a Function URL answered an unsigned request with
    2xx (``promise.py``). Raised only when the probe's own exchange failed
    too, so the failure record still says so; a successful probe reports it in its result."""


class ProbeProtocolError(ProbeError):
    """The target answered, but not with valid MCP (wrong content type, bad JSON, JSON-RPC error...)."""


class ProbeLimitError(ProbeProtocolError):
    """The target's answers exceeded what one probe reads (bytes of a body or of the whole
    exchange, decompressed; tools; pages): reported instead of running out of memory."""
