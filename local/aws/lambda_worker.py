"""One Lambda function in one region, driven the way Lambda drives it.

``python -m local.aws.lambda_worker --plan PLAN --function NAME --region REGION`` imports the
function's handler (its package root on ``sys.path``, its environment from the
program plus the local overrides) and feeds it:

- its schedules (EventBridge Scheduler): every ``interval_s`` each schedule's input
  becomes an asynchronous invocation;
- asynchronous invocation: the event waits in Lambda's internal queue; an event
  older than the maximum event age is dropped as ``EventAgeExceeded``; a failure is
  retried up to the configured retries (after 1 then 2 of the local "minutes": a
  tenth of the schedule interval); then Lambda Destinations send the record, the
  returned result to the OnSuccess queue, the error with ``RetriesExhausted`` to
  the OnFailure queue;
- its SQS event source mappings: batches of up to ``batch_size`` messages gathered
  over the batching window, in Lambda's event shape; messages the function fails
  (``ReportBatchItemFailures``) stay on the queue and come back after
  ``retry_delay_s``, the rest are deleted.

Invocations run one at a time on the main thread (one execution environment; the
Python runtime calls handlers on its main thread too).
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import json
import logging
import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from local.aws.lambda_runtime import (
    Handler,
    LambdaContext,
    destination_record,
    failed_message_ids,
    invoke,
    load_handler,
    sqs_event,
)
from local.plan import FUNCTIONS_ROOT, EventSourceSpec, FunctionSpec, LocalPlan

log = logging.getLogger("local.worker")
# SQS allows at most 10 messages per ReceiveMessage and 20 s of long polling; the
# pollers wait 1 s at a time so a stop request is noticed quickly.
MAX_RECEIVE = 10
POLL_WAIT_S = 1
DESTINATION_RETRY_S = 1.0


def _log(**fields: Any) -> None:
    log.info(json.dumps(fields, default=str))


@dataclass(order=True)
class AsyncEvent:
    due: float
    payload: Any = field(compare=False)
    enqueued: float = field(compare=False, default_factory=time.monotonic)
    request_id: str = field(compare=False, default_factory=lambda: str(uuid.uuid4()))
    attempts: int = field(compare=False, default=0)


class Worker:
    def __init__(self, plan: LocalPlan, spec: FunctionSpec, handler: Handler, sqs: Any, ledger: Path | None = None):
        self.plan, self.spec, self.handler, self.sqs = plan, spec, handler, sqs
        self.ledger = ledger
        self.stop = threading.Event()
        self.jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self.async_events: queue.PriorityQueue[AsyncEvent] = queue.PriorityQueue()
        self._queue_urls: dict[str, str] = {}
        interval = min((s.interval_s for s in spec.schedules), default=60.0)
        # Lambda retries an async failure after about 1 and 2 minutes; locally one
        # "minute" is a tenth of the schedule interval.
        self.retry_unit_s = max(interval / 10, 0.5)

    # --- SQS helpers ----------------------------------------------------------------
    def queue_url(self, arn: str) -> str:
        if arn not in self._queue_urls:
            name = arn.rsplit(":", 1)[-1]
            self._queue_urls[arn] = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        return self._queue_urls[arn]

    def _context(self, request_id: str) -> LambdaContext:
        return LambdaContext(function_name=self.spec.name, region=self.spec.region,
                             memory_limit_in_mb=self.spec.memory_mb, timeout_s=self.spec.timeout_s,
                             aws_request_id=request_id)

    # --- schedules and asynchronous invocation -----------------------------------------
    def run_schedules(self) -> None:
        """Fire every schedule now, then every interval (each schedule on its own clock)."""
        next_fire = {s.name: time.monotonic() for s in self.spec.schedules}
        by_name = {s.name: s for s in self.spec.schedules}
        while not self.stop.is_set():
            now = time.monotonic()
            for name, due in next_fire.items():
                if due <= now:
                    schedule = by_name[name]
                    self.async_events.put(AsyncEvent(due=now, payload=schedule.payload))
                    self.jobs.put(self._process_async)
                    # Fixed rate: the next fire is one interval after this one was due.
                    next_fire[name] = due + schedule.interval_s
            self.stop.wait(max(0.05, min(next_fire.values(), default=now + 1) - time.monotonic()))

    def _process_async(self) -> None:
        try:
            event = self.async_events.get_nowait()
        except queue.Empty:
            return
        wait = event.due - time.monotonic()
        if wait > 0:  # a retry not yet due: put it back and look again later
            self.async_events.put(event)
            threading.Timer(wait, self.jobs.put, args=(self._process_async,)).start()
            return
        age = time.monotonic() - event.enqueued
        if age > self.spec.max_event_age_s:
            self._send_destination(self.spec.on_failure, event, "EventAgeExceeded", None)
            return
        event.attempts += 1
        invocation = invoke(self.handler, event.payload, self._context(event.request_id))
        _log(function=self.spec.name, region=self.spec.region, requestId=event.request_id,
             attempt=event.attempts, failed=invocation.failed,
             outcome=(invocation.error or {}).get("errorType") if invocation.failed else "ok")
        if not invocation.failed:
            self._send_destination(self.spec.on_success, event, "Success", invocation)
        elif event.attempts <= self.spec.max_retries:
            event.due = time.monotonic() + self.retry_unit_s * event.attempts
            self.async_events.put(event)
            threading.Timer(self.retry_unit_s * event.attempts, self.jobs.put, args=(self._process_async,)).start()
        else:
            self._send_destination(self.spec.on_failure, event, "RetriesExhausted", invocation)

    def _send_destination(self, arn: str | None, event: AsyncEvent, condition: str, invocation: Any) -> None:
        if arn is None:
            return  # no destination configured: Lambda drops the record
        record = destination_record(function_arn=self.spec.arn, request_id=event.request_id, condition=condition,
                                    invoke_count=max(event.attempts, 1), request_payload=event.payload,
                                    invocation=invocation)
        body = json.dumps(record, default=str)
        # Lambda keeps trying to deliver a destination record; so do we, until stopped.
        while True:
            try:
                self.sqs.send_message(QueueUrl=self.queue_url(arn), MessageBody=body)
                self._ledger(event, condition, arn)
                return
            except Exception as exc:  # the emulator restarting, or stopped
                _log(destinationError=f"{type(exc).__name__}: {exc}", queue=arn)
                if self.stop.wait(DESTINATION_RETRY_S):
                    return

    def _ledger(self, event: AsyncEvent, condition: str, arn: str) -> None:
        """One line per destination record sent: what the tests count outcomes against."""
        if self.ledger is not None:
            with self.ledger.open("a") as out:
                out.write(json.dumps({"requestId": event.request_id, "condition": condition,
                                      "queue": arn.rsplit(":", 1)[-1], "target": event.payload}) + "\n")

    # --- event source mappings ----------------------------------------------------------
    def run_event_source(self, source: EventSourceSpec) -> None:
        while not self.stop.is_set():
            try:
                batch = self._receive_batch(source)
            except Exception as exc:  # the emulator going away at shutdown, or a transient error
                _log(pollError=f"{type(exc).__name__}: {exc}", queue=source.queue_arn)
                self.stop.wait(1.0)
                continue
            if not batch:
                continue
            done = threading.Event()
            self.jobs.put(functools.partial(self._process_batch, source, batch, done))
            done.wait()

    def _receive_batch(self, source: EventSourceSpec) -> list[dict[str, Any]]:
        url = self.queue_url(source.queue_arn)
        batch: list[dict[str, Any]] = []
        window_ends: float | None = None
        while len(batch) < source.batch_size and not self.stop.is_set():
            wait = POLL_WAIT_S if window_ends is None else max(0, min(POLL_WAIT_S, window_ends - time.monotonic()))
            response = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=min(MAX_RECEIVE, source.batch_size - len(batch)),
                WaitTimeSeconds=int(wait), AttributeNames=["All"], MessageAttributeNames=["All"],
            )
            messages = response.get("Messages") or []
            batch.extend(messages)
            if batch and window_ends is None:
                window_ends = time.monotonic() + source.batching_window_s
            if not batch:
                return batch
            if window_ends is not None and time.monotonic() >= window_ends:
                break
        return batch

    def _process_batch(self, source: EventSourceSpec, batch: list[dict[str, Any]], done: threading.Event) -> None:
        try:
            url = self.queue_url(source.queue_arn)
            request_id = str(uuid.uuid4())
            invocation = invoke(self.handler, sqs_event(batch, source.queue_arn, self.spec.region),
                                self._context(request_id))
            ids = [m["MessageId"] for m in batch]
            failed = failed_message_ids(invocation, ids, source.report_batch_item_failures)
            succeeded = [m for m in batch if m["MessageId"] not in failed]
            for start in range(0, len(succeeded), 10):
                chunk = succeeded[start:start + 10]
                self.sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)])
            retry = [m for m in batch if m["MessageId"] in failed]
            for start in range(0, len(retry), 10):
                chunk = retry[start:start + 10]
                self.sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"],
                     "VisibilityTimeout": int(self.plan.retry_delay_s)} for i, m in enumerate(chunk)])
            _log(function=self.spec.name, region=self.spec.region, queue=source.queue_arn.rsplit(":", 1)[-1],
                 batch=len(batch), failed=len(failed),
                 error=(invocation.error or {}).get("errorMessage") if invocation.failed else None)
        except Exception as exc:
            _log(batchError=f"{type(exc).__name__}: {exc}")
        finally:
            done.set()

    # --- the execution environment --------------------------------------------------------
    def serve(self, ready_file: Path | None) -> None:
        threads = []
        if self.spec.schedules:
            threads.append(threading.Thread(target=self.run_schedules, name="schedules", daemon=True))
        for source in self.spec.event_sources:
            self.queue_url(source.queue_arn)  # fail now, not in a thread, if the queue is missing
            threads.append(threading.Thread(target=self.run_event_source, args=(source,), daemon=True,
                                            name=f"esm-{source.queue_arn.rsplit(':', 1)[-1]}"))
        for arn in (self.spec.on_success, self.spec.on_failure):
            if arn:
                self.queue_url(arn)
        for thread in threads:
            thread.start()
        if ready_file is not None:
            ready_file.parent.mkdir(parents=True, exist_ok=True)
            ready_file.write_text(str(os.getpid()))
        while not self.stop.is_set():
            try:
                job = self.jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            job()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--function", required=True)
    parser.add_argument("--region", required=True)
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack to the log

    plan = LocalPlan.read(args.plan)
    matches = [f for f in plan.functions if f.name == args.function and f.region == args.region]
    if len(matches) != 1:
        raise SystemExit(f"the plan has no function {args.function} in {args.region}")
    spec = matches[0]
    # The function's environment is set by the supervisor; check it did.
    if os.environ.get("AWS_REGION") != spec.region or os.environ.get("AWS_ENDPOINT_URL") != plan.moto_url:
        raise SystemExit("AWS_REGION/AWS_ENDPOINT_URL are not this function's: start workers through local.topology")
    handler = load_handler(spec.handler, FUNCTIONS_ROOT)
    sqs = boto3.client("sqs", config=Config(retries={"max_attempts": 2, "mode": "standard"}))
    ledger = Path(plan.run_dir) / "ledger" / f"{spec.service_name}.jsonl"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    worker = Worker(plan, spec, handler, sqs, ledger)

    def stop(signum: int, frame: Any) -> None:
        worker.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    worker.serve(args.ready_file)


if __name__ == "__main__":
    main()
