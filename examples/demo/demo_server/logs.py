"""Structured JSON logs: one line per request, and the SDK's own warnings in the same
format. Headers are never logged (the bearer token travels in one): the request line
carries the refusal reason only.

Everything but the request line goes through AWS Lambda Powertools' ``Logger`` (one
per process). The request line, written once per request on the hot path, has
Powertools' structure (the same keys in the same order, its timestamp format, ``None``
fields left out, ``xray_trace_id`` from the Lambda environment) but is built here
with one ``json.dumps`` and one write: Powertools spends about 75 us a line in
``LogRecord`` creation, caller lookup and its generic formatter, four times what
this costs; CloudWatch and any query over the lines see no difference.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import time
from typing import Any, TextIO

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from .origin_gate import RequestRecord

SERVICE = "mcp-origin"
logger = Logger(service=SERVICE)
# The root logger gets a handler below; without this each line would print twice.
logging.getLogger(SERVICE).propagate = False
XRAY_TRACE_ID_ENV = "_X_AMZN_TRACE_ID"  # what Powertools reads for xray_trace_id
# True while the origin warms up (warm_up): request lines are built but not written,
# so the logs hold only requests that came from outside.
QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("mcp_request_log_quiet", default=False)


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


def powertools_timestamp(created: float) -> str:
    """Powertools' default timestamp (``2021-05-03 10:20:19,650+0200``, local time)."""
    local = time.localtime(created)
    msecs = int((created - int(created)) * 1000)
    return time.strftime(f"%Y-%m-%d %H:%M:%S,{msecs:03d}%z", local)


def xray_trace_id(environ: Any = os.environ) -> str | None:
    value = environ.get(XRAY_TRACE_ID_ENV)
    return value.split(";")[0].replace("Root=", "") if value else None


def request_fields(record: RequestRecord, region: str, latency_ms: float) -> dict[str, Any]:
    """The request line's own fields (never a token: the record holds none)."""
    fields: dict[str, Any] = {
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
    return fields


class RequestLog:
    """``log(record, latency_ms)``: the request line, at INFO (WARNING for a 5xx or a
    request that got no response), when the Powertools logger's level lets it through;
    written to ``stream`` (standard output, where Powertools writes, by default), unless
    ``written`` is False or ``QUIET`` is set (the warm-up's requests: built, not written)."""

    def __init__(self, region: str, *, stream: TextIO | None = None, clock: Any = time.time):
        self.region = region
        self.stream = stream
        self.clock = clock
        self.levels = logging.getLogger(SERVICE)

    def log_request(self, record: RequestRecord, latency_ms: float, *, written: bool = True) -> None:
        warning = record.status is None or record.status >= 500
        if not self.levels.isEnabledFor(logging.WARNING if warning else logging.INFO):
            return
        line: dict[str, Any] = {
            "level": "WARNING" if warning else "INFO",
            "location": LOCATION,
            "message": "request",
            "timestamp": powertools_timestamp(self.clock()),
            "service": SERVICE,
        }
        for key, value in request_fields(record, self.region, latency_ms).items():
            if value is not None:
                line[key] = value
        if (trace := xray_trace_id()) is not None:
            line["xray_trace_id"] = trace
        text = json.dumps(line, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"
        if not written or QUIET.get():
            return
        stream = self.stream or sys.stdout
        stream.write(text)
        stream.flush()

    __call__ = log_request


# Powertools' "location" is funcName:lineno of the logging call: here, the emitter.
LOCATION = f"log_request:{RequestLog.log_request.__code__.co_firstlineno}"


def request_logger(region: str) -> RequestLog:
    return RequestLog(region)
