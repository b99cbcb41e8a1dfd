"""Fixtures for the results consumer: moto (in-process) DynamoDB, SNS and SQS, and
builders for Lambda destination records and SQS events."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

REGION = "eu-west-1"
ACCOUNT = "123456789012"
TABLE = "acme-mcp-probe-results"
SERVER = "acme-mcp"
HASH_A = "a" * 64
HASH_B = "b" * 64
HASH_C = "c" * 64
# Recent, so that EMF timestamps (checked against the wall clock) accept it.
T0 = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(minutes=5)
# The consumer's clock in the handler tests. The skew view only counts targets seen within
# its freshness window (15 min) of the clock: on the wall clock, records dated from T0 aged
# out while a long suite ran, and a case whose reference and faulted runs straddled the
# moment saw two different tables.
NOW = T0 + dt.timedelta(minutes=5)


def pin_clock(handler: Any) -> Any:
    """The imported results handler, its consumer reading ``NOW`` instead of the wall clock."""
    handler.consumer.clock = NOW.timestamp
    return handler
RESULTS_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:acme-mcp-probe-results-{REGION}"
DLQ_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:acme-mcp-probe-dlq-{REGION}"


def create_results_table(client: Any, name: str = TABLE) -> None:
    """The table as components/probe_results.py declares it (a component test checks the two agree)."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"})


@dataclass
class Aws:
    dynamodb: Any
    sns: Any
    sqs: Any
    topic_arn: str
    inbox_url: str
    region: str = REGION

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert published so far (via an SQS subscription of the topic), drained."""
        out: list[dict[str, Any]] = []
        while True:
            page = self.sqs.receive_message(QueueUrl=self.inbox_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = page.get("Messages", [])
            if not messages:
                return out
            for m in messages:
                envelope = json.loads(m["Body"])
                out.append({"subject": envelope.get("Subject"), "message": envelope["Message"],
                            "kind": envelope.get("MessageAttributes", {}).get("alertType", {}).get("Value")})
                self.sqs.delete_message(QueueUrl=self.inbox_url, ReceiptHandle=m["ReceiptHandle"])

    def items(self, prefix: str = "") -> list[dict[str, Any]]:
        from functions.results.store import deserialize

        items = [deserialize(i) for i in self.dynamodb.scan(TableName=TABLE)["Items"]]
        return [i for i in items if i["pk"].startswith(prefix)]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        sns = boto3.client("sns", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        create_results_table(dynamodb)
        topic_arn = sns.create_topic(Name=f"{SERVER}-alerts-{REGION}")["TopicArn"]
        inbox_url = sqs.create_queue(QueueName="alert-inbox")["QueueUrl"]
        inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=inbox_arn)
        yield Aws(dynamodb, sns, sqs, topic_arn, inbox_url)


# --- destination records ----------------------------------------------------------------


def probe_event(target: str = "origin", region: str = "us-east-1", server: str = SERVER) -> dict[str, Any]:
    endpoint = f"https://{region}.lambda-url.example/mcp" if target == "origin" else "https://mcp.acme.example/mcp"
    return {
        "endpoint": endpoint, "serverId": server, "target": target, "targetRegion": region,
        "pinRegion": region if target == "edge" else None, "signed": target == "origin",
    }


def probe_result(schema_hash: str = HASH_A, *, status: str = "healthy", latency: float = 42.5, tools: int = 3,
                 served: str | None = None, promise: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        **({"promise": promise} if promise is not None else {}),
        "status": status, "degradedReasons": [] if status == "healthy" else ["latency 2000 ms above 1500 ms"],
        "latencyMs": latency, "phases": {"connectMs": 3.2, "firstByteMs": 20.1, "totalMs": latency},
        "steps": [{"method": "server/discover", "httpStatus": 200, "ms": 20.5}],
        "toolCount": tools, "schemaHash": schema_hash, "protocolVersion": "2026-07-28", "era": "modern",
        "fallbackReason": None, "servedRegion": served, "probeRegion": REGION, "httpStatus": 200,
        "contentType": "application/json", "checkedAt": "2026-11-29T10:00:00.000Z",
    }


@dataclass
class Record:
    """One destination record, as Lambda sends it to SQS."""

    condition: str = "Success"
    event: dict[str, Any] = field(default_factory=probe_event)
    response: Any = field(default_factory=probe_result)
    at: dt.datetime = T0
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    probe_region: str = REGION

    def body(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "version": "1.0",
            "timestamp": self.at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {
                "requestId": self.request_id,
                "functionArn": f"arn:aws:lambda:{self.probe_region}:{ACCOUNT}:function:acme-mcp-probe:$LATEST",
                "condition": self.condition,
                "approximateInvokeCount": 1,
            },
            "requestPayload": self.event,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
        }
        if self.condition != "Success":
            doc["responseContext"]["functionError"] = "Unhandled"
        if self.condition != "EventAgeExceeded":
            doc["responsePayload"] = self.response
        return doc

    def json(self) -> str:
        return json.dumps(self.body())


def failure(error_type: str = "ProbeHttpError", message: str = "tools/list: HTTP 500", **kw: Any) -> Record:
    return Record(condition="RetriesExhausted", response={"errorType": error_type, "errorMessage": message,
                                                           "stackTrace": ["..."]}, **kw)


def sqs_event(*bodies: str, queue_arn: str = RESULTS_QUEUE_ARN, message_ids: list[str] | None = None) -> dict[str, Any]:
    ids = message_ids or [str(uuid.uuid4()) for _ in bodies]
    return {"Records": [
        {
            "messageId": mid, "receiptHandle": f"rh-{mid}", "body": body,
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1764410400000",
                           "SenderId": "AIDAMOCK", "ApproximateFirstReceiveTimestamp": "1764410400000"},
            "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn, "awsRegion": REGION,
        }
        for mid, body in zip(ids, bodies, strict=True)
    ]}


class Context:
    """The Lambda context the handler is invoked with."""

    function_name = "acme-mcp-probe-results"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:acme-mcp-probe-results"
    aws_request_id = "consumer-invocation"

    def get_remaining_time_in_millis(self) -> int:
        return 30000


# --- moto server (for code run in a subprocess: the shipped packages) ----------------------


@dataclass
class MotoServer:
    url: str

    def client(self, service: str, region: str = REGION) -> Any:
        return boto3.client(service, region_name=region, endpoint_url=self.url,
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def reset(self) -> None:
        """Forget every resource: moto's servers in one process share one state (the
        ``moto_server`` fixture does it when it starts and when it ends)."""
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=10)

    def env(self, region: str = REGION) -> dict[str, str]:
        """What a Lambda process needs to talk to this server instead of AWS."""
        return {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": region, "AWS_DEFAULT_REGION": region}


@pytest.fixture
def moto_server() -> Iterator[MotoServer]:
    """moto's server on loopback, holding nothing: moto's servers in one process share one
    state, and which test modules share a pytest-xdist worker changes from run to run (two
    modules creating the same secret name failed one run in many), so it is emptied first,
    and again last, for a later module's own server."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    served = MotoServer(f"http://{host}:{port}")
    try:
        served.reset()
        yield served
        served.reset()
    finally:
        server.stop()


def extract_function_package(prod: Any, name_contains: str, dest: Path) -> Path:
    """Unzip the package the program uploads for the function whose name contains ``name_contains``
    (the first probe region's), so a test can run exactly that code."""
    import zipfile

    function = next(f for f in prod.of_type("aws:lambda/function:Function") if name_contains in f.name)
    with zipfile.ZipFile(function["code"].path) as zf:
        zf.extractall(dest)
    return dest


def run_in_package(package: Path, script: str, env: dict[str, str], timeout: float = 60) -> Any:
    """Run ``script`` with only the package (then the interpreter's own site-packages, standing
    in for the Lambda runtime) on the path; it prints one JSON document, returned parsed."""
    import os
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON"))}
    result = subprocess.run([sys.executable, "-c", script], cwd=package, capture_output=True, text=True,
                            timeout=timeout, env={**clean, **env, "PYTHONPATH": str(package)})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
