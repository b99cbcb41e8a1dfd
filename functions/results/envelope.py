"""Lambda Destinations records, parsed into probe outcomes.

A destination record (the SQS message body) wraps one asynchronous invocation of the
probe::

    {"version": "1.0", "timestamp": "2026-11-29T10:00:01.234Z",
     "requestContext": {"requestId": "...", "functionArn": "arn:aws:lambda:eu-west-1:...:function:x-probe:$LATEST",
                        "condition": "Success" | "RetriesExhausted" | "EventAgeExceeded",
                        "approximateInvokeCount": 1},
     "requestPayload": {<the probe event: endpoint, serverId, target, targetRegion, ...>},
     "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
     "responsePayload": {<the probe result> | {"errorType", "errorMessage", ...}}}

``EventAgeExceeded`` records carry no response: the probe never ran. The platform's
promise (``promise`` in a result; a ``ProbePromiseError`` failure when the probe failed
too) becomes the outcome's ``promise_*`` fields. Anything that is
not such a record raises ``MalformedRecordError`` (the message is reported as a
batch item failure and, after the queue's retries, parked in the quarantine queue),
including a number DynamoDB cannot store anywhere in it (``NaN``, ``Infinity``,
``1e400``, more than 38 digits): such a record would otherwise fail in the serializer
and be retried as if the failure were transient.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from typing import Any

CONDITIONS = ("Success", "RetriesExhausted", "EventAgeExceeded")
HEALTHY_STATUSES = ("healthy", "degraded")
# The promise check of each target kind and its verdicts (functions/probe/promise.py).
PROMISE_CHECKS = {"edge": "forged-token", "origin": "unsigned"}
PROMISE_STATUSES = ("pass", "broken", "unknown")
PROMISE_BROKEN_ERROR = "ProbePromiseError"
_FUNCTION_ARN = re.compile(r"arn:aws[a-z-]*:lambda:([a-z0-9-]+):\d{12}:function:[^:]+(:.+)?")
_HASH = re.compile(r"[0-9a-f]{64}")
_MAX_TEXT = 2000
_MAX_FIELD = 200
# A probe result is a few KB; a larger one is stored without its full copy, so the
# history item stays far below DynamoDB's 400 KB item limit.
MAX_RESULT_BYTES = 64 * 1024
# DynamoDB nests attributes 32 levels deep at most, the history item's ``result`` map among
# them; a deeper result is stored without its copy too (and never walked recursively: the
# store's serializer recurses in Python, past whose limit a parseable body can nest).
MAX_RESULT_DEPTH = 31
# DynamoDB numbers: up to 38 significant digits, magnitude 1e-130 to below 1e126.
_MAX_DIGITS = 38
_MAX_MAGNITUDE = 1e126
_MIN_MAGNITUDE = 1e-130


class MalformedRecordError(ValueError):
    """The message is not a Lambda destination record of a probe invocation."""


@dataclass(frozen=True)
class TargetRef:
    """Which target an outcome is about (from the probe event)."""

    server_id: str
    endpoint: str
    target: str
    target_region: str

    @property
    def label(self) -> str:
        return f"{self.target}@{self.target_region}"


@dataclass(frozen=True)
class ProbeOutcome:
    request_id: str
    condition: str
    timestamp: dt.datetime
    probe_region: str
    invoke_count: int
    target: TargetRef | None  # None: the probe event itself was invalid
    request_payload: Any
    # Success
    status: str  # healthy | degraded | failed
    latency_ms: float | None = None
    schema_hash: str | None = None
    tool_count: int | None = None
    era: str | None = None
    protocol_version: str | None = None
    served_region: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    result: dict[str, Any] | None = None
    # Why a success is degraded (the probe's plain-words reasons, each bounded; empty: none)
    degraded_reasons: tuple[str, ...] = ()
    # Failure
    error_type: str | None = None
    error_message: str | None = None
    # The platform's promise (None: not checked, as by probes from before the check)
    promise_check: str | None = None
    promise_status: str | None = None
    promise_http_status: int | None = None
    promise_detail: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status != "failed"

    @property
    def epoch_ms(self) -> int:
        return int(self.timestamp.timestamp() * 1000)


def _parse_time(value: Any) -> dt.datetime:
    if not isinstance(value, str):
        raise MalformedRecordError(f"timestamp must be an ISO 8601 string, got {value!r:.80}")
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedRecordError(f"timestamp {value!r:.80} is not ISO 8601") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def _target(payload: Any) -> TargetRef | None:
    if not isinstance(payload, dict):
        return None
    fields = [payload.get(k) for k in ("serverId", "endpoint", "target", "targetRegion")]
    if not all(isinstance(f, str) and f and len(f) <= 2048 for f in fields):
        return None
    server_id, endpoint, target, region = (str(f) for f in fields)
    if target not in ("edge", "origin") or not re.fullmatch(r"[a-z0-9-]{1,32}", region):
        return None
    return TargetRef(server_id, endpoint, target, region)


def _number(result: dict[str, Any], key: str, *, integer: bool = False) -> Any:
    value = result.get(key)
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if not ok or isinstance(value, bool) or value is None or value < 0:
        raise MalformedRecordError(f"responsePayload.{key} must be a non-negative number, got {value!r:.80}")
    return value


def _optional_str(result: dict[str, Any], key: str) -> str | None:
    value = result.get(key)
    if value is not None and not isinstance(value, str):
        raise MalformedRecordError(f"responsePayload.{key} must be a string or null, got {value!r:.80}")
    return value[:_MAX_FIELD] if value is not None else None  # e.g. a server's content type


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _bounded_result(response: dict[str, Any]) -> dict[str, Any]:
    if _nested_deeper_than(response, MAX_RESULT_DEPTH):
        return {"omitted": f"responsePayload nested deeper than {MAX_RESULT_DEPTH} levels",
                "status": response.get("status")}
    size = len(json.dumps(response, separators=(",", ":")))
    if size <= MAX_RESULT_BYTES:
        return response
    return {"omitted": f"responsePayload of {size} bytes, over {MAX_RESULT_BYTES}", "status": response.get("status")}


def _non_finite(constant: str) -> Any:
    raise MalformedRecordError(f"message body holds {constant}, which is not a JSON number")


def _storable_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or (value != 0 and not _MIN_MAGNITUDE <= abs(value) < _MAX_MAGNITUDE):
        raise MalformedRecordError(f"message body holds the number {text[:40]}, which DynamoDB cannot store")
    return value


def _storable_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise MalformedRecordError(f"message body holds a {len(text)}-digit integer, which DynamoDB cannot store")
    return int(text)


def parse_record_body(body: str, fallback_region: str) -> ProbeOutcome:
    """Parse one SQS message body; ``MalformedRecordError`` says what is wrong."""
    try:
        doc = json.loads(body, parse_constant=_non_finite, parse_float=_storable_float, parse_int=_storable_int)
    except MalformedRecordError:
        raise
    except (ValueError, RecursionError):
        raise MalformedRecordError(f"message body is not JSON: {body[:120]!r}") from None
    if not isinstance(doc, dict):
        raise MalformedRecordError(f"message body is not a JSON object: {body[:120]!r}")
    context = doc.get("requestContext")
    if not isinstance(context, dict):
        raise MalformedRecordError("not a Lambda destination record: requestContext is missing")
    request_id = context.get("requestId")
    if not isinstance(request_id, str) or not re.fullmatch(r"[A-Za-z0-9-]{1,128}", request_id):
        raise MalformedRecordError(f"requestContext.requestId is missing or invalid: {request_id!r:.80}")
    condition = context.get("condition")
    if condition not in CONDITIONS:
        raise MalformedRecordError(f"requestContext.condition {condition!r:.40} is not one of {', '.join(CONDITIONS)}")
    timestamp = _parse_time(doc.get("timestamp"))
    arn = context.get("functionArn")
    match = _FUNCTION_ARN.fullmatch(arn) if isinstance(arn, str) else None
    probe_region = match.group(1) if match else fallback_region
    invoke_count = context.get("approximateInvokeCount", 1)
    if not isinstance(invoke_count, int) or isinstance(invoke_count, bool):
        invoke_count = 1
    request_payload = doc.get("requestPayload")
    response = doc.get("responsePayload")
    common: dict[str, Any] = {
        "request_id": request_id,
        "condition": condition,
        "timestamp": timestamp,
        "probe_region": probe_region,
        "invoke_count": invoke_count,
        "target": _target(request_payload),
        "request_payload": request_payload,
    }

    if condition != "Success":
        error_type, message = condition, "the probe did not run (event older than its maximum age)"
        if isinstance(response, dict):
            error_type = str(response.get("errorType") or "UnknownError")[:200]
            message = str(response.get("errorMessage") or "")[:_MAX_TEXT]
        elif response is not None:
            message = str(response)[:_MAX_TEXT]
        target = common["target"]
        if error_type == PROMISE_BROKEN_ERROR and target is not None:
            common.update(promise_check=PROMISE_CHECKS[target.target], promise_status="broken", promise_detail=message)
        return ProbeOutcome(**common, status="failed", error_type=error_type, error_message=message)

    if not isinstance(response, dict):
        raise MalformedRecordError("Success record without a responsePayload object")
    if "errorType" in response:
        raise MalformedRecordError("Success record whose responsePayload is an error")
    status = response.get("status")
    if status not in HEALTHY_STATUSES:
        raise MalformedRecordError(f"responsePayload.status {status!r:.40} is not one of {', '.join(HEALTHY_STATUSES)}")
    schema_hash = response.get("schemaHash")
    if not isinstance(schema_hash, str) or not _HASH.fullmatch(schema_hash):
        raise MalformedRecordError(f"responsePayload.schemaHash {schema_hash!r:.80} is not a SHA-256 hex digest")
    http_status = response.get("httpStatus")
    return ProbeOutcome(
        **common,
        status=status,
        latency_ms=float(_number(response, "latencyMs")),
        schema_hash=schema_hash,
        tool_count=_number(response, "toolCount", integer=True),
        era=_optional_str(response, "era"),
        protocol_version=_optional_str(response, "protocolVersion"),
        served_region=_optional_str(response, "servedRegion"),
        http_status=http_status if isinstance(http_status, int) and not isinstance(http_status, bool) else None,
        content_type=_optional_str(response, "contentType"),
        result=_bounded_result(response),
        degraded_reasons=_reasons(response.get("degradedReasons")),
        **_promise(response.get("promise")),
    )


_MAX_REASONS = 8


def _reasons(value: Any) -> tuple[str, ...]:
    """A success's ``degradedReasons`` (absent: none): a list of strings, kept to the first
    few, each bounded, so that one odd result cannot grow the state item."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(reason, str) for reason in value):
        raise MalformedRecordError(f"responsePayload.degradedReasons must be a list of strings, got {value!r:.80}")
    return tuple(reason[:_MAX_TEXT] for reason in value[:_MAX_REASONS])


def _promise(value: Any) -> dict[str, Any]:
    """The outcome's promise fields from a result's ``promise`` (absent: not checked)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or value.get("check") not in PROMISE_CHECKS.values() \
            or value.get("status") not in PROMISE_STATUSES:
        raise MalformedRecordError(f"responsePayload.promise must name a check ({', '.join(PROMISE_CHECKS.values())}) "
                                   f"and a status ({', '.join(PROMISE_STATUSES)}), got {value!r:.120}")
    http_status, detail = value.get("httpStatus"), value.get("detail")
    return {
        "promise_check": value["check"],
        "promise_status": value["status"],
        "promise_http_status": http_status if isinstance(http_status, int) and not isinstance(http_status, bool) else None,
        "promise_detail": str(detail)[:_MAX_TEXT] if detail is not None else None,
    }
