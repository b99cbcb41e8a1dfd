"""What Lambda does around a handler, for the local runner: the pieces with AWS-defined shapes.

- ``load_handler``: import ``module.function`` with the package root on ``sys.path``,
  as Lambda imports it from the root of the zip.
- ``LambdaContext``: the context object handlers and Powertools read.
- ``invoke``: call the handler on the main thread (as the Python runtime does, so
  SIGALRM-based deadlines in handlers work) with the function's timeout enforced.
- ``error_payload``: the error object the Python runtime reports for an exception.
- ``destination_record``: the Lambda Destinations record of one async invocation.
- ``sqs_event`` / ``failed_message_ids``: an SQS event source mapping's batch, and
  which of its messages failed under ``ReportBatchItemFailures`` rules.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACCOUNT_ID = "123456789012"
Handler = Callable[[Any, Any], Any]


class FunctionTimeoutError(BaseException):
    """Lambda stopped the invocation at the function's timeout (BaseException: handlers must not swallow it)."""


def load_handler(handler: str, root: Path) -> Handler:
    """``probe.handler.handler`` -> the function, imported from ``root`` like a zip's root."""
    module_name, _, function_name = handler.rpartition(".")
    if not module_name:
        raise ValueError(f"handler {handler!r} must be module.function")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(module_name)
    fn = getattr(module, function_name, None)
    if not callable(fn):
        raise ValueError(f"{module_name} has no callable {function_name}")
    return fn  # type: ignore[no-any-return]


@dataclass
class LambdaContext:
    function_name: str
    region: str
    memory_limit_in_mb: int
    timeout_s: float
    aws_request_id: str
    function_version: str = "$LATEST"
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = self.started or time.monotonic()
        self.invoked_function_arn = f"arn:aws:lambda:{self.region}:{ACCOUNT_ID}:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"{dt.date.today():%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_s - (time.monotonic() - self.started)) * 1000))


@contextlib.contextmanager
def _function_timeout(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("handlers run on the main thread, as in the Lambda Python runtime")

    def expire(signum: int, frame: Any) -> None:
        raise FunctionTimeoutError(f"Task timed out after {seconds:.2f} seconds")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Invocation:
    request_id: str
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def invoke(handler: Handler, event: Any, context: LambdaContext) -> Invocation:
    """Run the handler to completion, an exception or the timeout; never raises for the handler's faults."""
    try:
        with _function_timeout(context.timeout_s):
            result = handler(event, context)
    except FunctionTimeoutError as exc:
        return Invocation(context.aws_request_id, error={"errorMessage": f"{context.aws_request_id} {exc}",
                                                         "errorType": "Sandbox.Timedout"})
    except Exception as exc:
        return Invocation(context.aws_request_id, error=error_payload(exc, context.aws_request_id))
    return Invocation(context.aws_request_id, result=result)


def error_payload(exc: BaseException, request_id: str) -> dict[str, Any]:
    """The Python runtime's error object: errorMessage, errorType, requestId, stackTrace."""
    return {
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "requestId": request_id,
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
    }


def _timestamp(when: dt.datetime | None = None) -> str:
    when = when or dt.datetime.now(dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def destination_record(
    *, function_arn: str, request_id: str, condition: str, invoke_count: int, request_payload: Any,
    invocation: Invocation | None,
) -> dict[str, Any]:
    """A Lambda Destinations record (the SQS message body Lambda sends)."""
    record: dict[str, Any] = {
        "version": "1.0",
        "timestamp": _timestamp(),
        "requestContext": {
            "requestId": request_id,
            "functionArn": f"{function_arn}:$LATEST",
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "requestPayload": request_payload,
    }
    if invocation is None:  # EventAgeExceeded: the function never ran
        return record
    response_context: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
    if invocation.failed:
        response_context["functionError"] = "Unhandled"
    record["responseContext"] = response_context
    record["responsePayload"] = invocation.error if invocation.failed else invocation.result
    return record


def _lambda_message_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in attributes.items():
        out[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": value.get("BinaryListValues", []),
            "dataType": value.get("DataType"),
        }
    return out


def sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The event an SQS event source mapping hands the function, from ReceiveMessage results."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": dict(m.get("Attributes") or {}),
                "messageAttributes": _lambda_message_attributes(m.get("MessageAttributes") or {}),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def failed_message_ids(invocation: Invocation, message_ids: Sequence[str], report_item_failures: bool) -> set[str]:
    """Which messages of a batch go back to the queue, by Lambda's rules.

    A raised error (or timeout) fails the whole batch. With ``ReportBatchItemFailures``
    the listed items fail; a malformed response (not an object, a list that is not a
    list, an identifier missing, empty or not in the batch) fails the whole batch.
    An empty or null response means every item succeeded.
    """
    everything = set(message_ids)
    if invocation.failed:
        return everything
    if not report_item_failures:
        return set()
    response = invocation.result
    if response is None or response == {}:
        return set()
    if not isinstance(response, dict):
        return everything
    failures = response.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return everything
    failed: set[str] = set()
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in everything:
            return everything
        failed.add(identifier)
    return failed
