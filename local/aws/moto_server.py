"""The AWS emulator process: moto's server, made safe for a long-running topology.

``python -m local.aws.moto_server --port PORT`` serves moto's backends like
``python -m moto.server``, with two changes the local topology needs:

- Requests are serialised (one at a time), except SQS ReceiveMessage, whose long
  polls would otherwise block everything. Moto's backends are not thread-safe: under
  the consumers' concurrent writes its DynamoDB answered 500 ("dictionary changed size
  during iteration") and a cancelled transaction could roll back other clients' writes.
- DynamoDB answers and stream records are serialised as the JSON they already are
  (``execute_dynamo_result``, ``get_records``): moto's generic serialiser was most of
  the emulator's time.
- A query reads its partition only (see ``query``), not the whole table sorted.
- Moto's package directory is listed once, not on every request.
- ``TransactWriteItems`` evaluates every condition first and writes only when all
  hold, as DynamoDB does. Moto's own version writes as it goes and, on a failure,
  restores deep copies of whole tables taken before: its cost grows with the table
  (0.5 s per transaction at 3000 items) and its rollback rewinds the table's stream.

Everything else is moto's.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import faulthandler
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from moto import backends as moto_backends
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
UNLOCKED_TARGETS = ("AmazonSQS.ReceiveMessage",)
SLOW_REQUEST_S = 0.1  # logged: the emulator is what everything waits on
log = logging.getLogger("local.moto")
TRANSACTION_OPS = ("ConditionCheck", "Put", "Delete", "Update")


class SerializedApp:
    """One request at a time through moto, long polls excepted."""

    def __init__(self, app: WSGIApp):
        self.app = app
        self.lock = threading.RLock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("HTTP_X_AMZ_TARGET") in UNLOCKED_TARGETS:
            return self.app(environ, start_response)
        waited = time.perf_counter()
        with self.lock:
            started = time.perf_counter()
            # Consume the body under the lock: moto does its work while it is produced.
            body = list(self.app(environ, start_response))
        took = time.perf_counter() - started
        if took > SLOW_REQUEST_S:
            log.warning(json.dumps({"slowRequest": environ.get("HTTP_X_AMZ_TARGET") or environ.get("PATH_INFO"),
                                    "ms": round(took * 1000), "queuedMs": round((started - waited) * 1000)}))
        return body


def _key_of(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    attrs = op["Item"]
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """All conditions checked, then all writes applied; nothing written when one fails."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    seen: set[tuple[str, str]] = set()
    planned: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    errors: list[tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]] = []
    for item in transact_items:
        if len(item) != 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(item.items()))
        if op_type not in TRANSACTION_OPS:
            raise MockValidationException(f"Unsupported transaction operation {op_type}")
        key = _key_of(self, op_type, op)
        unique = (str(op["TableName"]), str(dict(sorted(key.items()))))
        if unique in seen:
            raise MultipleTransactionsException()
        seen.add(unique)
        current = self.get_item(op["TableName"], key)
        condition = op.get("ConditionExpression")
        if condition is not None and not get_filter_expression(
            condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
        ).expr(current):
            old = current.to_json()["Attributes"] if current and op.get(
                "ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
            continue
        errors.append((None, None, None))
        planned.append((op_type, op, key))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    # Conditions hold and requests are serialised: apply without re-checking.
    for op_type, op, key in planned:
        names, values = op.get("ExpressionAttributeNames") or {}, op.get("ExpressionAttributeValues") or {}
        if op_type == "Put":
            self.put_item(op["TableName"], op["Item"])
        elif op_type == "Delete":
            self.delete_item(op["TableName"], key)
        elif op_type == "Update":
            self.update_item(op["TableName"], key, update_expression=op["UpdateExpression"],
                             expression_attribute_names=names, expression_attribute_values=values)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):  # the JSON protocol's timestamps: epoch seconds
        return value.replace(tzinfo=value.tzinfo or dt.UTC).timestamp()
    if isinstance(value, bytes):  # blobs: base64
        return base64.b64encode(value).decode()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def get_records(self: DynamoDBStreamsHandler) -> str:
    """GetRecords serialised directly: the records are wire-format already, and moto's
    generic serialiser spent about 1.3 ms per record walking the service model, under
    the lock everything else waits on."""
    limit = self._get_param("Limit") or 1000
    result = self.backend.get_records(self._get_param("ShardIterator"), int(limit))
    return json.dumps(result, default=_json_default)


_moto_query = Table.query
_moto_all_items = Table.all_items


def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """Query one partition without sorting the whole table: moto's query walks (and sorts)
    every item of the table for each query, so the consumers slowed down as history grew.
    Only base-table queries take the shortcut; moto still filters on the hash key."""
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    if index_name is not None or hash_key is None:
        return _moto_query(self, hash_key, *args, **kwargs)
    self._partition_hint = hash_key  # type: ignore[attr-defined]
    try:
        return _moto_query(self, hash_key, *args, **kwargs)
    finally:
        self._partition_hint = None  # type: ignore[attr-defined]


def all_items(self: Table) -> list[Any]:
    hint = getattr(self, "_partition_hint", None)
    if hint is None:
        return _moto_all_items(self)
    partition = self.items.get(hint)
    if partition is None:
        return []
    if self.range_key_attr:
        return sorted(partition.values(), key=lambda item: item.range_key)
    return [partition]


def execute_dynamo_result(self: DynamoResult, context: Any) -> tuple[int, dict[str, str], str]:
    """DynamoDB answers serialised as the JSON they already are. ``DynamoResult`` holds
    plain DynamoDB JSON; moto's generic serialiser then walked the service model for
    every attribute value, the emulator's largest cost (history items are nested maps)."""
    return 200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(self.result, default=_json_default)


_MOTO_MODULES: tuple[str, ...] = tuple(moto_backends.list_of_moto_modules())


def list_of_moto_modules() -> Iterable[str]:
    """Moto's package directory, listed once: moto lists and stats it on every request."""
    return iter(_MOTO_MODULES)


def install_patches() -> None:
    moto_backends.list_of_moto_modules = list_of_moto_modules
    DynamoResult.execute_result = execute_dynamo_result  # type: ignore[assignment,method-assign]
    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    DynamoDBStreamsHandler.get_records = get_records  # type: ignore[assignment,method-assign]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="moto's server for the local topology")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    install_patches()
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack to the log
    # One line per request would be most of every log: keep warnings and errors.
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, SerializedApp(app), threaded=True,  # type: ignore[arg-type]
               request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
