"""Structured JSON logs (AWS Lambda Powertools' Logger, one per process): one line
per request, and the SDK's own warnings in the same format. Tokens are never
logged: the request line carries the refusal reason, not the credential."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from .origin_gate import RequestRecord

SERVICE = "mcp-origin"
logger = Logger(service=SERVICE)
# The root logger gets a handler below; without this each line would print twice.
logging.getLogger(SERVICE).propagate = False


def configure_logging(level: str) -> Logger:
    logger.setLevel(level)
    # The SDK logs through the standard library's root logger. In a process of our
    # own (Lambda, the local run) root has no handler yet: give it the same JSON
    # formatter, warnings and up, which also keeps the SDK from installing its own
    # handler (logging.basicConfig is a no-op once root has one). A host process
    # that configured logging itself (a test runner) keeps its configuration.
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(LambdaPowertoolsFormatter(service=SERVICE))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    return logger


def request_logger(region: str) -> Callable[[RequestRecord, float], None]:
    def log_request(record: RequestRecord, latency_ms: float) -> None:
        fields = {
            "request_id": record.request_id,
            "region": region,
            "http_method": record.method,
            "path": record.path,
            "mcp_method": record.mcp_method,
            "protocol_version": record.protocol_version,
            "status": record.status,
            "streamed": record.streamed,
            "latency_ms": round(latency_ms, 2),
        }
        if record.refused:
            fields["refused"] = record.refused
        if record.auth_failure:
            fields["auth_failure"] = record.auth_failure
        if record.status is None or record.status >= 500:
            logger.warning("request", extra=fields)
        else:
            logger.info("request", extra=fields)

    return log_request
