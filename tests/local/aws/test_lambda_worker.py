"""The worker drives a handler as Lambda would: destinations, retries, event age, event source mappings."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from local.aws.lambda_worker import AsyncEvent, Worker
from local.plan import EventSourceSpec, FunctionSpec
from local.supervisor import ServiceSpec, Supervisor, free_ports

REGION = "eu-west-1"
ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def sqs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    (port,) = free_ports(1)
    with Supervisor(tmp_path_factory.mktemp("emulator")) as sup:
        sup.start_all([ServiceSpec(name="aws-emulator", argv=("-m", "local.aws.moto_server", "--port", str(port)),
                                   port=port, ready_path="/moto-api/")])
        yield boto3.client("sqs", region_name=REGION, endpoint_url=f"http://127.0.0.1:{port}",
                           aws_access_key_id="t", aws_secret_access_key="t")


def _queue(sqs: Any, name: str, **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            return out
        out.extend(json.loads(m["Body"]) for m in got)
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                        for i, m in enumerate(got)])


def _worker(sqs: Any, handler: Any, tmp_path: Path, **spec: Any) -> Worker:
    fn = FunctionSpec(name="f", region=REGION, handler="x.handler", environment={}, timeout_s=5, memory_mb=128,
                      **spec)
    plan = SimpleNamespace(retry_delay_s=1.0)
    return Worker(plan, fn, handler, sqs, tmp_path / "ledger.jsonl")  # type: ignore[arg-type]


def _run_jobs(worker: Worker, until: Any, timeout_s: float = 10.0) -> None:
    """The worker's main loop, until ``until()`` holds."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, "the worker did not get there"
        try:
            worker.jobs.get(timeout=0.1)()
        except Exception as exc:
            if type(exc).__name__ != "Empty":
                raise


def test_async_outcomes_go_to_their_destinations_after_the_configured_retries(sqs: Any, tmp_path: Path) -> None:
    ok, dlq = _queue(sqs, "w-ok"), _queue(sqs, "w-dlq")
    calls: list[Any] = []

    def handler(event: Any, ctx: Any) -> Any:
        calls.append(event)
        if event["fail"]:
            raise ConnectionError("origin refused the connection")
        return {"status": "healthy"}

    worker = _worker(sqs, handler, tmp_path, max_retries=1, on_success=_arn("w-ok"), on_failure=_arn("w-dlq"))
    worker.retry_unit_s = 0.2
    for payload in ({"fail": False}, {"fail": True}):
        worker.async_events.put(AsyncEvent(due=time.monotonic(), payload=payload))
        worker.jobs.put(worker._process_async)
    _run_jobs(worker, lambda: len(calls) == 3)
    (success,) = _drain(sqs, ok)
    (failure,) = _drain(sqs, dlq)
    assert success["requestContext"]["condition"] == "Success"
    assert success["responsePayload"] == {"status": "healthy"}
    assert failure["requestContext"]["condition"] == "RetriesExhausted"
    assert failure["requestContext"]["approximateInvokeCount"] == 2  # the first try and one retry
    assert failure["responsePayload"]["errorType"] == "ConnectionError"
    assert failure["requestPayload"] == {"fail": True}
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [(r["condition"], r["queue"]) for r in ledger] == [("Success", "w-ok"), ("RetriesExhausted", "w-dlq")]


def test_an_event_older_than_its_maximum_age_is_dropped_unrun_to_the_failure_destination(
    sqs: Any, tmp_path: Path
) -> None:
    dlq = _queue(sqs, "w-age-dlq")
    worker = _worker(sqs, lambda e, c: pytest.fail("an expired event must not run"), tmp_path, max_event_age_s=60,
                     on_failure=_arn("w-age-dlq"))
    worker.async_events.put(AsyncEvent(due=time.monotonic(), payload={"n": 1}, enqueued=time.monotonic() - 61))
    worker._process_async()
    (record,) = _drain(sqs, dlq)
    assert record["requestContext"]["condition"] == "EventAgeExceeded"
    assert "responsePayload" not in record


def test_failed_batch_items_come_back_and_succeeded_ones_are_deleted(sqs: Any, tmp_path: Path) -> None:
    url = _queue(sqs, "w-esm", VisibilityTimeout="180")
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"n": n}))
    seen: list[list[int]] = []

    def handler(event: Any, ctx: Any) -> Any:
        bodies = [json.loads(r["body"])["n"] for r in event["Records"]]
        seen.append(sorted(bodies))
        # The first time message 1 is seen it fails; afterwards it succeeds.
        failing = [r for r in event["Records"] if json.loads(r["body"])["n"] == 1 and len(seen) == 1]
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in failing]}

    source = EventSourceSpec(queue_arn=_arn("w-esm"), batch_size=10, batching_window_s=0.5,
                             report_batch_item_failures=True, maximum_concurrency=2)
    worker = _worker(sqs, handler, tmp_path, event_sources=[source])
    for _ in range(2):
        batch: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while not batch and time.monotonic() < deadline:
            batch = worker._receive_batch(source)
        done = SimpleNamespace(set=lambda: None)
        worker._process_batch(source, batch, done)  # type: ignore[arg-type]
    assert seen == [[0, 1, 2], [1]]  # only the failed item came back, after the retry delay, not 180 s
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_raising_handler_returns_the_whole_batch(sqs: Any, tmp_path: Path) -> None:
    url = _queue(sqs, "w-raise", VisibilityTimeout="180")
    for n in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=str(n))

    def handler(event: Any, ctx: Any) -> Any:
        raise RuntimeError("table unavailable")

    source = EventSourceSpec(queue_arn=_arn("w-raise"), batch_size=10, batching_window_s=0.2,
                             report_batch_item_failures=True, maximum_concurrency=None)
    worker = _worker(sqs, handler, tmp_path, event_sources=[source])
    batch = worker._receive_batch(source)
    worker._process_batch(source, batch, SimpleNamespace(set=lambda: None))  # type: ignore[arg-type]
    time.sleep(1.2)  # the retry delay
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"])
    assert sorted(m["Body"] for m in again["Messages"]) == ["0", "1"]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again["Messages"]} == {"2"}
